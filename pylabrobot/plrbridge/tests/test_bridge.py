"""Tests of plrbridge against stub machine classes (no PyLabRobot needed).

Run:  cd pylabrobot/plrbridge && python3 -m unittest discover -s tests
"""

from __future__ import annotations

import asyncio
import enum
import json
import threading
import time
import typing
import unittest
import urllib.error
import urllib.request

import plrbridge

WAIT = 5.0


class Resource:
    def __init__(self, name: str):
        self.name = name

    def serialize(self) -> dict:
        return {"name": self.name, "type": type(self).__name__}


class TipSpot(Resource):
    pass


class Well(Resource):
    pass


class Trash(Resource):
    pass


class Deck(Resource):
    def __init__(self):
        super().__init__("deck")
        self.children = {n: Well(n) for n in ("plate_well_A1", "plate_well_A2")}
        self.children["tips_A1"] = TipSpot("tips_A1")
        self.children["trash"] = Trash("trash")

    def get_resource(self, name: str) -> Resource:
        if name not in self.children:
            raise ValueError(f"Resource '{name}' not found")
        return self.children[name]

    def serialize_all_state(self) -> dict:
        return {n: {"volume": 0} for n in self.children}


class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


class Coordinate:
    def __init__(self, x: float = 0, y: float = 0, z: float = 0):
        self.x, self.y, self.z = x, y, z

    def serialize(self) -> dict:
        return {"x": self.x, "y": self.y, "z": self.z}


class StubHandler:
    """A liquid-handler-like stub: coroutines that record calls and block on demand."""

    def __init__(self):
        self.deck = Deck()
        self.setup_finished = False
        self.calls: list = []
        self.gate: asyncio.Event | None = None
        self.stop_calls = 0
        self.stop_fails = False
        self.temperature = 21.5
        self._private_calls = 0

    async def setup(self) -> None:
        """Set the machine up."""
        self.setup_finished = True

    async def stop(self) -> None:
        self.stop_calls += 1
        if self.stop_fails:
            raise RuntimeError("stop failed")

    async def aspirate(self, resources: typing.List[Well], vols: list[float], use_channels: typing.Optional[list[int]] = None,
                       flow_rate: float | None = None, mode: Mode = Mode.FAST, blow_out: bool = False) -> dict:
        """Aspirate from wells."""
        self.calls.append(("aspirate", [r.name for r in resources], vols, use_channels, mode))
        return {"aspirated": sum(vols), "wells": [r.name for r in resources], "mode": mode}

    async def pick_up_tips(self, tip_spot: TipSpot, offset: Coordinate = None) -> str:  # type: ignore[assignment]
        self.calls.append(("pick_up_tips", tip_spot.name, offset.serialize() if offset else None))
        return tip_spot.name

    async def dispense(self, resources: typing.Sequence[Well], offsets: typing.Optional[typing.List[Coordinate]] = None,
                       modes: typing.Optional[list[Mode]] = None) -> None:
        self.calls.append(("dispense", [r.name for r in resources], [o.serialize() for o in offsets or []], modes))

    async def drop_tips(self, tip_spots: typing.Sequence[typing.Union[TipSpot, Trash]],
                        use_channels: typing.Optional[typing.List[int]] = None) -> None:
        """PyLabRobot's signature: tip spots or the trash, by name."""
        self.calls.append(("drop_tips", [(type(r).__name__, r.name) for r in tip_spots]))

    async def move_to(self, to: typing.Union[TipSpot, Coordinate],
                      via: typing.Optional[typing.Union[Well, Trash]] = None) -> None:
        """A resource or a coordinate (like move_plate's `to`)."""
        target = (type(to).__name__, to.name if isinstance(to, Resource) else to.serialize())
        self.calls.append(("move_to", target, None if via is None else (type(via).__name__, via.name)))

    async def shake(self, speed: int, duration: float, direction: typing.Literal["cw", "ccw"] = "cw") -> None:
        self.calls.append(("shake", speed, duration, direction))
        plrbridge.report_progress(0.25, "spinning up")
        await self._block()
        plrbridge.report_progress(0.75)

    async def stubborn(self) -> str:
        """Ignores the first cancel and finishes."""
        try:
            await self._block()
        except asyncio.CancelledError:
            await asyncio.sleep(0)
        return "finished anyway"

    async def monitor(self) -> None:
        await self._block()

    async def explode(self, code: int = 3) -> None:
        raise ValueError(f"boom {code}")

    async def get_temperature(self) -> float:
        return self.temperature

    async def get_broken(self) -> float:
        raise RuntimeError("sensor offline")

    async def _hidden(self) -> None:
        self._private_calls += 1

    def sync_method(self) -> int:
        return 1

    async def _block(self) -> None:
        if self.gate is None:
            self.gate = asyncio.Event()
        await self.gate.wait()


def run_in_loop(bridge: plrbridge.Bridge, fn: typing.Callable) -> None:
    done = threading.Event()

    def call() -> None:
        fn()
        done.set()

    bridge.loop.call_soon_threadsafe(call)
    if not done.wait(WAIT):
        raise AssertionError("loop callback did not run")


class BridgeTest(unittest.TestCase):
    def setUp(self) -> None:
        self.m = StubHandler()
        self.b = plrbridge.Bridge(self.m, concurrent=["monitor"], not_cancellable=["explode"], task_timeout_s=30)
        run_in_loop(self.b, lambda: setattr(self.m, "gate", asyncio.Event()))

    def tearDown(self) -> None:
        self.release()
        self.b.close()

    def release(self) -> None:
        g = self.m.gate
        if g is not None:
            self.b.loop.call_soon_threadsafe(g.set)

    def wait(self, task_id: str, pred: typing.Callable[[dict], bool], what: str) -> dict:
        deadline = time.monotonic() + WAIT
        while True:
            t = self.b.task(task_id)
            if pred(t):
                return t
            if time.monotonic() > deadline:
                self.fail(f"task {task_id}: {what} not reached: {t}")
            time.sleep(0.002)

    def terminal(self, task_id: str) -> dict:
        return self.wait(task_id, lambda t: t["status"] in plrbridge.TERMINAL, "terminal")

    # ---- describe

    def test_describe_methods_from_signatures(self) -> None:
        d = self.b.describe()
        names = [m["name"] for m in d["methods"]]
        self.assertIn("aspirate", names)
        self.assertIn("setup", names)
        self.assertNotIn("stop", names, "stop is served by /stop, not as a method")
        self.assertNotIn("_hidden", names)
        self.assertNotIn("sync_method", names)
        self.assertNotIn("get_temperature", names, "zero-arg getters are state")
        asp = next(m for m in d["methods"] if m["name"] == "aspirate")
        self.assertEqual(asp["doc"], "Aspirate from wells.")
        p = {x["name"]: x for x in asp["params"]}
        self.assertEqual(p["resources"]["type"], "array")
        self.assertTrue(p["resources"]["items"]["resource"])
        self.assertTrue(p["resources"]["required"])
        self.assertEqual(p["vols"]["items"]["type"], "number")
        self.assertEqual(p["use_channels"]["type"], "array")
        self.assertTrue(p["use_channels"]["nullable"])
        self.assertFalse(p["use_channels"]["required"])
        self.assertIsNone(p["use_channels"]["default"])
        self.assertEqual(p["flow_rate"]["type"], "number")
        self.assertEqual(p["mode"]["type"], "string")
        self.assertEqual(p["mode"]["enum"], ["FAST", "SLOW"])
        self.assertEqual(p["mode"]["default"], "FAST", "an enum default is published by name, as the enum lists")
        self.assertEqual(p["blow_out"], {**p["blow_out"], "type": "boolean", "default": False})
        shake = next(m for m in d["methods"] if m["name"] == "shake")
        sp = {x["name"]: x for x in shake["params"]}
        self.assertEqual(sp["speed"]["type"], "integer")
        self.assertEqual(sp["direction"]["enum"], ["cw", "ccw"])
        pick = next(m for m in d["methods"] if m["name"] == "pick_up_tips")
        self.assertTrue({x["name"]: x for x in pick["params"]}["tip_spot"]["resource"])
        flags = {m["name"]: (m["cancellable"], m["concurrent"]) for m in d["methods"]}
        self.assertEqual(flags["monitor"], (True, True))
        self.assertEqual(flags["explode"], (False, False))
        state = {s["name"]: s for s in d["state"]}
        self.assertEqual(state["temperature"]["type"], "number")
        self.assertEqual(state["setup_finished"]["type"], "boolean")
        self.assertTrue(d["machine"]["has_deck"])
        json.dumps(d)  # the whole description is JSON

    def test_state_reads_getters_and_attributes(self) -> None:
        s = self.b.state()
        self.assertEqual(s["values"]["temperature"], 21.5)
        self.assertIs(s["values"]["setup_finished"], False)
        self.assertNotIn("broken", s["values"])
        self.assertIn("sensor offline", s["errors"]["broken"])

    def test_deck_blob(self) -> None:
        d = self.b.deck()
        self.assertEqual(d["deck"]["name"], "deck")
        self.assertIn("plate_well_A1", d["state"])

    # ---- tasks

    def test_done_with_result_and_resources(self) -> None:
        t = self.b.submit("aspirate", {"resources": ["plate_well_A1", "plate_well_A2"], "vols": [10, 20.5], "mode": "SLOW"})
        self.assertIn(t["status"], ("queued", "running", "done"))
        self.assertEqual(len(t["id"]), 16)
        t = self.terminal(t["id"])
        self.assertEqual(t["status"], "done", t)
        self.assertEqual(t["result"], {"aspirated": 30.5, "wells": ["plate_well_A1", "plate_well_A2"], "mode": "slow"})
        self.assertEqual(t["progress"], 1.0)
        self.assertEqual(self.m.calls[-1][4], Mode.SLOW)
        self.assertEqual(self.m.calls[-1][2], [10.0, 20.5])

    def test_object_param_built_from_dict(self) -> None:
        t = self.terminal(self.b.submit("pick_up_tips", {"tip_spot": "tips_A1", "offset": {"x": 1, "y": 2, "z": 3}})["id"])
        self.assertEqual(t["status"], "done", t)
        self.assertEqual(self.m.calls[-1], ("pick_up_tips", "tips_A1", {"x": 1, "y": 2, "z": 3}))

    def test_nested_conversion(self) -> None:
        t = self.terminal(self.b.submit("dispense", {"resources": ["plate_well_A2"],
                                                      "offsets": [{"type": "Coordinate", "x": 1, "y": 0, "z": 2}],
                                                      "modes": ["SLOW", "fast"]})["id"])
        self.assertEqual(t["status"], "done", t)
        self.assertEqual(self.m.calls[-1], ("dispense", ["plate_well_A2"], [{"x": 1, "y": 0, "z": 2}], [Mode.SLOW, Mode.FAST]))
        d = {m["name"]: m for m in self.b.describe()["methods"]}["dispense"]
        p = {x["name"]: x for x in d["params"]}
        self.assertTrue(p["resources"]["items"]["resource"])
        self.assertEqual(p["offsets"]["type"], "array")

    def test_union_of_resources(self) -> None:
        d = {m["name"]: m for m in self.b.describe()["methods"]}
        p = {x["name"]: x for x in d["drop_tips"]["params"]}
        items = p["tip_spots"]["items"]
        self.assertEqual((p["tip_spots"]["type"], items["type"]), ("array", "string"))
        self.assertTrue(items["resource"], items)
        self.assertEqual(items["resource_types"], ["TipSpot", "Trash"])
        t = self.terminal(self.b.submit("drop_tips", {"tip_spots": ["tips_A1", "trash"]})["id"])
        self.assertEqual(t["status"], "done", t)
        self.assertEqual(self.m.calls[-1], ("drop_tips", [("TipSpot", "tips_A1"), ("Trash", "trash")]))
        with self.assertRaises(plrbridge.BridgeError) as e:
            self.b.submit("drop_tips", {"tip_spots": ["plate_well_A1"]})
        self.assertEqual(e.exception.status, 400)
        self.assertIn("is a Well, not TipSpot or Trash", str(e.exception))
        with self.assertRaises(plrbridge.BridgeError):
            self.b.submit("drop_tips", {"tip_spots": ["nowhere"]})

    def test_union_resource_or_object(self) -> None:
        d = {m["name"]: m for m in self.b.describe()["methods"]}
        p = {x["name"]: x for x in d["move_to"]["params"]}
        self.assertEqual(p["to"]["resource_types"], ["TipSpot"])
        self.assertEqual(len(p["to"]["one_of"]), 2)
        self.assertTrue(p["via"]["nullable"])
        self.assertTrue(p["via"]["resource"])
        t = self.terminal(self.b.submit("move_to", {"to": "tips_A1", "via": "trash"})["id"])
        self.assertEqual(t["status"], "done", t)
        self.assertEqual(self.m.calls[-1], ("move_to", ("TipSpot", "tips_A1"), ("Trash", "trash")))
        t = self.terminal(self.b.submit("move_to", {"to": {"x": 1, "y": 2, "z": 3}, "via": None})["id"])
        self.assertEqual(t["status"], "done", t)
        self.assertEqual(self.m.calls[-1], ("move_to", ("Coordinate", {"x": 1, "y": 2, "z": 3}), None))

    def test_resource_class_checked_outside_union(self) -> None:
        # Before the fix only Union members were checked: a tip spot named
        # for a Well parameter reached the machine.
        with self.assertRaises(plrbridge.BridgeError) as e:
            self.b.submit("aspirate", {"resources": ["tips_A1"], "vols": [1]})
        self.assertEqual(e.exception.status, 400)
        self.assertIn("is a TipSpot, not Well", str(e.exception))
        with self.assertRaises(plrbridge.BridgeError) as e:
            self.b.submit("pick_up_tips", {"tip_spot": "plate_well_A1"})
        self.assertIn("is a Well, not TipSpot", str(e.exception))
        self.assertEqual(self.m.calls, [], "a task with a resource of the wrong class ran")

    def test_resource_param_must_be_a_name(self) -> None:
        # A resource parameter given an object or a number (not a name) is
        # refused before the task starts, in a plain annotation and in a
        # Union of resource classes alike.
        for method, params in (("pick_up_tips", {"tip_spot": {"name": "tips_A1"}}),
                               ("pick_up_tips", {"tip_spot": 3}),
                               ("drop_tips", {"tip_spots": [{"name": "trash"}]})):
            with self.assertRaises(plrbridge.BridgeError) as cm:
                self.b.submit(method, params)
            self.assertEqual(cm.exception.status, 400, (method, params))
            self.assertIn("want the name of a", cm.exception.message)
        self.assertEqual(self.m.calls, [], "a task with a non-name resource ran")

    def test_enum_default_published_by_name(self) -> None:
        d = {m["name"]: m for m in self.b.describe()["methods"]}
        mode = {x["name"]: x for x in d["aspirate"]["params"]}["mode"]
        self.assertIn(mode["default"], mode["enum"], "the default falls outside its own enum")

    def test_failed_carries_message(self) -> None:
        t = self.terminal(self.b.submit("explode", {"code": 7})["id"])
        self.assertEqual(t["status"], "failed")
        self.assertEqual(t["error"], "ValueError: boom 7")
        self.assertEqual(t["error_type"], "ValueError")

    def test_refusals(self) -> None:
        cases = [
            ("nope", {}, 404),
            ("aspirate", {"resources": ["plate_well_A1"]}, 400),           # missing vols
            ("aspirate", {"resources": ["x"], "vols": [1]}, 400),          # unknown resource
            ("aspirate", {"resources": ["plate_well_A1"], "vols": [1], "bogus": 1}, 400),
            ("aspirate", {"resources": ["plate_well_A1"], "vols": [1], "mode": "MEDIUM"}, 400),
        ]
        for method, params, status in cases:
            with self.subTest(method=method, params=params):
                with self.assertRaises(plrbridge.BridgeError) as cm:
                    self.b.submit(method, params)
                self.assertEqual(cm.exception.status, status)
        self.assertEqual(self.m.calls, [], "a refused task ran")
        with self.assertRaises(plrbridge.BridgeError) as cm:
            self.b.task("0123456789abcdef")
        self.assertEqual(cm.exception.status, 404)

    def test_one_exclusive_task_at_a_time(self) -> None:
        t = self.b.submit("shake", {"speed": 100, "duration": 1.5})
        self.wait(t["id"], lambda x: x["status"] == "running", "running")
        with self.assertRaises(plrbridge.BridgeError) as cm:
            self.b.submit("setup", {})
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(cm.exception.extra["running"], t["id"])
        mon = self.b.submit("monitor", {})  # concurrent: allowed alongside
        self.wait(mon["id"], lambda x: x["status"] == "running", "running")
        self.release()
        self.assertEqual(self.terminal(t["id"])["status"], "done")
        self.assertEqual(self.terminal(mon["id"])["status"], "done")

    def test_progress_reported(self) -> None:
        t = self.b.submit("shake", {"speed": 100, "duration": 1.5})
        r = self.wait(t["id"], lambda x: x["progress"] == 0.25, "progress 0.25")
        self.assertEqual(r["message"], "spinning up")
        self.assertEqual(r["status"], "running")

    def test_cancel_honoured_is_cancelled(self) -> None:
        t = self.b.submit("shake", {"speed": 100, "duration": 1.5})
        self.wait(t["id"], lambda x: x["status"] == "running", "running")
        c = self.b.cancel(t["id"])
        self.assertTrue(c["cancel_requested"])
        r = self.terminal(t["id"])
        self.assertEqual(r["status"], "cancelled")
        self.assertTrue(r["cancel_requested"])

    def test_cancel_ignored_is_done(self) -> None:
        t = self.b.submit("stubborn", {})
        self.wait(t["id"], lambda x: x["status"] == "running", "running")
        self.b.cancel(t["id"])
        r = self.terminal(t["id"])
        self.assertEqual(r["status"], "done", "a coroutine that finished after a cancel is not cancelled")
        self.assertEqual(r["result"], "finished anyway")

    def test_not_cancellable_refused(self) -> None:
        t = self.b.submit("explode", {})
        with self.assertRaises(plrbridge.BridgeError) as cm:
            self.b.cancel(t["id"])
        self.assertEqual(cm.exception.status, 409)

    def test_timeout_is_unknown_never_done(self) -> None:
        t = self.b.submit("stubborn", {}, timeout_s=0.05)
        r = self.terminal(t["id"])
        self.assertEqual(r["status"], "unknown", r)
        self.assertIn("timeout", r["error"])

    def test_stop_cancels_and_calls_machine_stop(self) -> None:
        t = self.b.submit("shake", {"speed": 100, "duration": 1.5})
        self.wait(t["id"], lambda x: x["status"] == "running", "running")
        r = self.b.stop()
        self.assertEqual(r, {"cancelled": [t["id"]], "stopped": True})
        self.assertEqual(self.m.stop_calls, 1)
        self.assertEqual(self.terminal(t["id"])["status"], "cancelled")
        self.m.stop_fails = True
        r = self.b.stop()
        self.assertFalse(r["stopped"])
        self.assertIn("stop failed", r["error"])

    def test_finished_tasks_are_bounded(self) -> None:
        b = plrbridge.Bridge(StubHandler(), keep_tasks=3)
        try:
            ids = []
            for _ in range(6):
                i = b.submit("setup", {})["id"]
                ids.append(i)
                deadline = time.monotonic() + WAIT
                while b.task(i)["status"] not in plrbridge.TERMINAL:
                    self.assertLess(time.monotonic(), deadline)
                    time.sleep(0.002)
            b.submit("setup", {})
            kept = [t["id"] for t in b.list_tasks()]
            self.assertLessEqual(len(kept), 4)
            self.assertNotIn(ids[0], kept, "the oldest finished task was kept")
        finally:
            b.close()


class HTTPTest(unittest.TestCase):
    def setUp(self) -> None:
        self.m = StubHandler()
        self.b = plrbridge.Bridge(self.m, concurrent=["monitor"])
        run_in_loop(self.b, lambda: setattr(self.m, "gate", asyncio.Event()))
        self.srv = plrbridge.make_server(self.b, port=0)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        self.th = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.th.start()

    def tearDown(self) -> None:
        g = self.m.gate
        if g is not None:
            self.b.loop.call_soon_threadsafe(g.set)
        self.srv.shutdown()
        self.srv.server_close()
        self.b.close()

    def req(self, method: str, path: str, body: typing.Any = None) -> tuple[int, dict]:
        data = None if body is None else json.dumps(body).encode()
        r = urllib.request.Request(self.url + path, data=data, method=method,
                                   headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(r, timeout=WAIT) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def test_binds_loopback_by_default(self) -> None:
        self.assertEqual(self.srv.server_address[0], "127.0.0.1")

    def test_http_round_trip(self) -> None:
        st, d = self.req("GET", "/describe")
        self.assertEqual(st, 200)
        self.assertIn("shake", [m["name"] for m in d["methods"]])
        st, s = self.req("GET", "/state")
        self.assertEqual((st, s["values"]["temperature"]), (200, 21.5))
        st, t = self.req("POST", "/tasks", {"method": "shake", "params": {"speed": 10, "duration": 2}})
        self.assertEqual(st, 202)
        tid = t["task"]["id"]
        st, busy = self.req("POST", "/tasks", {"method": "setup"})
        self.assertEqual((st, busy["running"]), (409, tid))
        st, c = self.req("POST", f"/tasks/{tid}/cancel")
        self.assertEqual(st, 202)
        deadline = time.monotonic() + WAIT
        while True:
            st, t = self.req("GET", f"/tasks/{tid}")
            if t["task"]["status"] in plrbridge.TERMINAL:
                break
            self.assertLess(time.monotonic(), deadline, t)
            time.sleep(0.002)
        self.assertEqual(t["task"]["status"], "cancelled")
        st, lst = self.req("GET", "/tasks")
        self.assertEqual(lst["tasks"][0]["id"], tid)
        st, e = self.req("GET", "/tasks/doesnotexist")
        self.assertEqual((st, e["error"]), (404, "task not found"))
        st, e = self.req("POST", "/tasks", {"method": "shake", "params": {"speed": "x", "duration": 1, "bogus": 1}})
        self.assertEqual(st, 400)
        st, e = self.req("POST", "/tasks", [1, 2])
        self.assertEqual(st, 400)
        st, r = self.req("POST", "/stop")
        self.assertEqual((st, r["stopped"]), (200, True))
        self.assertEqual(self.m.stop_calls, 1)
        st, e = self.req("GET", "/nowhere")
        self.assertEqual(st, 404)


class TypeMappingTest(unittest.TestCase):
    def test_string_annotations(self) -> None:
        cases = {
            "int": "integer", "float": "number", "bool": "boolean", "str": "string",
            "list[int]": "array", "Optional[float]": "number", "float | None": "number",
            "dict[str, int]": "object", "SomeModel": "any",
        }
        for text, want in cases.items():
            with self.subTest(text=text):
                self.assertEqual(plrbridge.describe_type(text)["type"], want)

    def test_jsonable(self) -> None:
        self.assertEqual(plrbridge._jsonable({"a": (1, float("nan")), "b": Mode.FAST, "c": Coordinate(1, 2, 3)}),
                         {"a": [1, None], "b": "fast", "c": {"x": 1, "y": 2, "z": 3}})


if __name__ == "__main__":
    unittest.main()


class CLITest(unittest.TestCase):
    """The script as a process: --factory file.py:callable, --port 0, loopback."""

    def test_serves_factory_machine(self) -> None:
        import os
        import re
        import subprocess
        import sys
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            fac = os.path.join(d, "fac.py")
            with open(fac, "w") as f:
                f.write("import plrbridge\n"
                        "class M:\n"
                        "    async def ping(self, n: int = 1) -> int:\n"
                        "        plrbridge.report_progress(0.5)\n"
                        "        return n\n"
                        "def make():\n"
                        "    return M()\n")
            script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plrbridge.py")
            p = subprocess.Popen([sys.executable, script, "--factory", fac + ":make", "--port", "0"],
                                 stderr=subprocess.PIPE, text=True)
            try:
                line = p.stderr.readline()
                m = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
                self.assertIsNotNone(m, line)
                with urllib.request.urlopen(m.group(1) + "/describe", timeout=WAIT) as r:
                    d = json.loads(r.read())
                self.assertEqual([x["name"] for x in d["methods"]], ["ping"])
                req = urllib.request.Request(m.group(1) + "/tasks", data=json.dumps({"method": "ping", "params": {"n": 3}}).encode(),
                                             method="POST", headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=WAIT) as r:
                    tid = json.loads(r.read())["task"]["id"]
                deadline = time.monotonic() + WAIT
                while True:
                    with urllib.request.urlopen(m.group(1) + "/tasks/" + tid, timeout=WAIT) as r:
                        t = json.loads(r.read())["task"]
                    if t["status"] in plrbridge.TERMINAL:
                        break
                    self.assertLess(time.monotonic(), deadline)
                    time.sleep(0.005)
                self.assertEqual((t["status"], t["result"]), ("done", 3))
            finally:
                p.terminate()
                p.wait(timeout=WAIT)
                p.stderr.close()

    def test_bad_factory_spec(self) -> None:
        with self.assertRaises(ValueError):
            plrbridge.load_factory("no_colon_here")
