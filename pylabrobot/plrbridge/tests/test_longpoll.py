"""Long-poll of GET /tasks/{id}?wait= (bridge version 2): the answer comes as
soon as the task changes, never by busy-waiting, bounded in time and in the
number of held requests.

Run:  cd pylabrobot/plrbridge && python3 -m unittest discover -s tests
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import typing
import unittest
import urllib.error
import urllib.request

import plrbridge
from test_bridge import WAIT, StubHandler, run_in_loop

# A long-poll asked to wait this long must answer on the change, far sooner.
LONG = 25.0


class LongPollTest(unittest.TestCase):
    def setUp(self) -> None:
        self.m = StubHandler()
        self.b = plrbridge.Bridge(self.m, concurrent=["monitor"], task_timeout_s=60)
        run_in_loop(self.b, lambda: setattr(self.m, "gate", asyncio.Event()))

    def tearDown(self) -> None:
        self.release()
        self.b.close()

    def release(self) -> None:
        g = self.m.gate
        if g is not None and not self.b.loop.is_closed():
            self.b.loop.call_soon_threadsafe(g.set)

    def running(self, method: str = "monitor", params: dict | None = None) -> dict:
        t = self.b.submit(method, params or {})
        deadline = time.monotonic() + WAIT
        while self.b.task(t["id"])["status"] != "running":
            self.assertLess(time.monotonic(), deadline, "task never ran")
            time.sleep(0.002)
        return self.b.task(t["id"])

    def in_thread(self, fn: typing.Callable[[], typing.Any]) -> tuple[threading.Thread, list]:
        out: list = []
        th = threading.Thread(target=lambda: out.append(fn()), daemon=True)
        th.start()
        return th, out

    def held(self, n: int = 1) -> None:
        """Wait until n long-polls are held (the bridge counts them)."""
        deadline = time.monotonic() + WAIT
        while self.b.waiters < n:
            self.assertLess(time.monotonic(), deadline, f"{n} long-polls never held")
            time.sleep(0.002)

    def test_answers_when_the_task_ends(self) -> None:
        t = self.running()
        th, out = self.in_thread(lambda: self.b.wait_task(t["id"], LONG, t["version"]))
        self.held()
        start = time.monotonic()
        self.release()
        th.join(WAIT)
        self.assertFalse(th.is_alive(), "the long-poll did not answer when the task ended")
        snap, granted = out[0]
        self.assertEqual(snap["status"], "done")
        self.assertEqual(granted, LONG)
        self.assertGreater(snap["version"], t["version"])
        self.assertLess(time.monotonic() - start, WAIT)

    def test_answers_on_progress(self) -> None:
        t = self.running("shake", {"speed": 1, "duration": 1.0})
        # shake reports 0.25 "spinning up" as it starts: read past it.
        deadline = time.monotonic() + WAIT
        while self.b.task(t["id"])["progress"] != 0.25:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.002)
        t = self.b.task(t["id"])
        th, out = self.in_thread(lambda: self.b.wait_task(t["id"], LONG, t["version"]))
        self.held()
        task = self.b.tasks[t["id"]]
        ctx = __import__("contextvars").copy_context()

        def report() -> None:
            plrbridge._current_task.set(task)
            plrbridge.report_progress(0.5, "halfway")

        ctx.run(report)
        th.join(WAIT)
        self.assertFalse(th.is_alive(), "a progress report did not answer the long-poll")
        snap, _ = out[0]
        self.assertEqual((snap["status"], snap["progress"], snap["message"]), ("running", 0.5, "halfway"))

    def test_seen_older_version_answers_at_once(self) -> None:
        t = self.running()
        snap, granted = self.b.wait_task(t["id"], LONG, t["version"] - 1)
        self.assertEqual(snap["version"], t["version"])
        self.assertEqual(granted, LONG)

    def test_wait_elapses_unchanged(self) -> None:
        t = self.running()
        snap, granted = self.b.wait_task(t["id"], 0.05, t["version"])
        self.assertEqual((snap["status"], snap["version"], granted), ("running", t["version"], 0.05))

    def test_wait_is_clamped(self) -> None:
        t = self.running()
        th, out = self.in_thread(lambda: self.b.wait_task(t["id"], 1e6, t["version"]))
        self.held()
        self.release()
        th.join(WAIT)
        self.assertEqual(out[0][1], plrbridge.LONG_POLL_MAX_S)

    def test_terminal_answers_at_once(self) -> None:
        t = self.b.submit("setup", {})
        deadline = time.monotonic() + WAIT
        while self.b.task(t["id"])["status"] not in plrbridge.TERMINAL:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.002)
        v = self.b.task(t["id"])["version"]
        snap, _ = self.b.wait_task(t["id"], LONG, v)
        self.assertEqual(snap["status"], "done")

    def test_waiters_are_bounded(self) -> None:
        self.b.max_waiters = 2
        t = self.running()
        ths = [self.in_thread(lambda: self.b.wait_task(t["id"], LONG, t["version"])) for _ in range(2)]
        self.held(2)
        snap, granted = self.b.wait_task(t["id"], LONG, t["version"])
        self.assertEqual((snap["status"], granted), ("running", 0.0), "a third long-poll was held beyond max_waiters")
        self.release()
        for th, _ in ths:
            th.join(WAIT)
            self.assertFalse(th.is_alive())
        self.assertEqual(self.b.waiters, 0)

    def test_close_wakes_waiters(self) -> None:
        t = self.running()
        th, out = self.in_thread(lambda: self.b.wait_task(t["id"], LONG, t["version"]))
        self.held()
        self.b.close()
        th.join(WAIT)
        self.assertFalse(th.is_alive(), "close left a long-poll waiting")

    def test_unknown_task_is_404(self) -> None:
        with self.assertRaises(plrbridge.BridgeError) as cm:
            self.b.wait_task("nope", 1.0)
        self.assertEqual(cm.exception.status, 404)


class LongPollHTTPTest(unittest.TestCase):
    def setUp(self) -> None:
        self.m = StubHandler()
        self.b = plrbridge.Bridge(self.m, task_timeout_s=60)
        run_in_loop(self.b, lambda: setattr(self.m, "gate", asyncio.Event()))
        self.srv = plrbridge.make_server(self.b, port=0)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def tearDown(self) -> None:
        g = self.m.gate
        if g is not None:
            self.b.loop.call_soon_threadsafe(g.set)
        self.srv.shutdown()
        self.srv.server_close()
        self.b.close()

    def get(self, path: str) -> tuple[int, dict]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=WAIT) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def test_advertised(self) -> None:
        st, d = self.get("/describe")
        self.assertEqual((st, d["bridge"]["version"], d["bridge"]["long_poll_s"]), (200, "2", plrbridge.LONG_POLL_MAX_S))
        st, d = self.get("/")
        self.assertEqual(d["long_poll_s"], plrbridge.LONG_POLL_MAX_S)

    def test_round_trip(self) -> None:
        data = json.dumps({"method": "shake", "params": {"speed": 1, "duration": 1.0}}).encode()
        req = urllib.request.Request(self.url + "/tasks", data=data, method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=WAIT) as r:
            tid = json.loads(r.read())["task"]["id"]
        # A plain poll carries no wait_s; a long-poll that elapses says what it granted.
        st, plain = self.get(f"/tasks/{tid}")
        self.assertEqual(st, 200)
        self.assertNotIn("wait_s", plain)
        deadline = time.monotonic() + WAIT
        while True:
            st, t = self.get(f"/tasks/{tid}")
            if t["task"]["progress"] == 0.25:
                break
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.002)
        v = t["task"]["version"]
        st, r = self.get(f"/tasks/{tid}?wait=0.05&seen={v}")
        self.assertEqual((st, r["wait_s"], r["task"]["version"]), (200, 0.05, v))
        out: list = []
        th = threading.Thread(target=lambda: out.append(self.get(f"/tasks/{tid}?wait={LONG}&seen={v}")), daemon=True)
        th.start()
        deadline = time.monotonic() + WAIT
        while self.b.waiters < 1:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.002)
        self.b.loop.call_soon_threadsafe(self.m.gate.set)
        th.join(WAIT)
        self.assertFalse(th.is_alive(), "the HTTP long-poll did not answer when the task ended")
        st, r = out[0]
        # shake reports 0.75 on its way out: that change answers first.
        self.assertEqual(st, 200)
        self.assertGreater(r["task"]["version"], v)
        while r["task"]["status"] != "done":
            v = r["task"]["version"]
            st, r = self.get(f"/tasks/{tid}?wait={LONG}&seen={v}")
            self.assertEqual(st, 200)
            self.assertGreater(r["task"]["version"], v, "a long-poll answered without a change before its wait")
        self.assertEqual(r["wait_s"], LONG)

    def test_bad_query_refused(self) -> None:
        data = json.dumps({"method": "setup"}).encode()
        req = urllib.request.Request(self.url + "/tasks", data=data, method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=WAIT) as r:
            tid = json.loads(r.read())["task"]["id"]
        for q in ("wait=soon", "wait=nan", "wait=-1", "wait=inf", "wait=1&seen=x"):
            st, e = self.get(f"/tasks/{tid}?{q}")
            self.assertEqual(st, 400, q)
            self.assertIn("error", e)
        st, e = self.get("/tasks/nope?wait=1")
        self.assertEqual(st, 404)


if __name__ == "__main__":
    unittest.main()
