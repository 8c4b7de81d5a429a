#!/usr/bin/env python3
"""plrbridge: serve one PyLabRobot machine over a small JSON HTTP API.

Current PyLabRobot has no remote API, so this bridge holds the machine object
(a LiquidHandler, PlateReader, HeaterShaker, TemperatureController, ... or
anything with public coroutine methods) and serves:

    GET  /                   bridge and machine identity
    GET  /describe           methods (parameter names, types, defaults from the
                             signatures) and readable state
    GET  /state              current values of the readable state
    GET  /deck               the deck and its state as one blob, when there is a deck
    POST /tasks              {"method", "params", "timeout_s"?} -> a task (202)
    GET  /tasks              recent tasks
    GET  /tasks/{id}         one task: status, progress, result, error;
                             ?wait=S[&seen=V] holds the answer (a long-poll)
                             until the task's version differs from V, the
                             task ends, or S seconds (at most 30) pass
    POST /tasks/{id}/cancel  ask the task's coroutine to stop
    POST /stop               e-stop: cancel running tasks, then machine.stop()

Task statuses: queued, running, done, failed, cancelled, unknown. A task is
"cancelled" only when its coroutine really ended by asyncio.CancelledError
after a cancel; one that finishes anyway is "done". A task that exceeds its
timeout is cancelled and reported "unknown" (never done): nobody knows how far
the machine got. Only one exclusive task runs at a time (409 otherwise);
methods named with --concurrent may run alongside.

It uses the standard library only (PyLabRobot is needed only to build a real
machine), binds 127.0.0.1 by default, and is documented in README.md.

    python3 plrbridge.py --factory my_lab.py:make_machine --port 5050
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import dataclasses
import enum
import importlib
import importlib.util
import inspect
import json
import math
import os
import secrets
import sys
import threading
import time
import typing
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

__all__ = ["Bridge", "BridgeError", "report_progress", "make_server", "serve", "main"]

VERSION = "2"

# The longest a GET /tasks/{id}?wait= is held (version 2 and later; /describe
# says so as bridge.long_poll_s), and how many may be held at once (beyond
# that one is answered at once, wait_s 0, and the client polls).
LONG_POLL_MAX_S = 30.0
MAX_WAITERS = 64

TERMINAL = ("done", "failed", "cancelled", "unknown")

_current_task: contextvars.ContextVar = contextvars.ContextVar("plrbridge_task", default=None)


def report_progress(fraction: float | None = None, message: str | None = None) -> None:
    """Report progress of the task running the current coroutine.

    Machine code (or a wrapper around it) may call this from inside an
    invoked method; outside a task it does nothing.
    """
    task = _current_task.get()
    if task is None:
        return
    with task.lock:
        before = (task.progress, task.message)
        if fraction is not None:
            try:
                f = float(fraction)
            except (TypeError, ValueError):
                return
            if not math.isnan(f):
                task.progress = max(0.0, min(1.0, f))
        if message is not None:
            task.message = str(message)
        if (task.progress, task.message) != before:
            task.changed()


class BridgeError(Exception):
    """An error with an HTTP status, answered as {"error": message}."""

    def __init__(self, status: int, message: str, **extra: typing.Any):
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


# ---------------------------------------------------------------- types


def _is_resource_class(cls: typing.Any) -> bool:
    """True for PyLabRobot Resource classes (found by MRO name, no import)."""
    if not inspect.isclass(cls):
        return False
    return any(c.__name__ == "Resource" for c in cls.__mro__)


_TEXT_TYPES = {
    "bool": "boolean", "int": "integer", "float": "number", "str": "string",
    "dict": "object", "list": "array", "tuple": "array", "None": "null",
}


def describe_type(ann: typing.Any) -> dict:
    """Map a Python annotation onto {"type", "items"?, "enum"?, "nullable"?,
    "resource"?, "python_type"} with JSON types (integer, number, boolean,
    string, array, object, any)."""
    out: dict = {"python_type": _type_text(ann)}
    if ann is inspect.Parameter.empty or ann is typing.Any or ann is None:
        out["type"] = "any"
        return out
    if isinstance(ann, str):
        text = ann.strip()
        optional = False
        if text.startswith("Optional[") and text.endswith("]"):
            text, optional = text[len("Optional["):-1], True
        parts = [p.strip() for p in text.split("|")]
        if "None" in parts:
            optional = True
            parts = [p for p in parts if p != "None"]
        if len(parts) == 1:
            base = parts[0]
            low = base.split("[", 1)[0].lower()
            if low in ("list", "sequence", "tuple"):
                out["type"] = "array"
                inner = base[base.find("[") + 1:-1] if "[" in base else ""
                if inner and "," not in inner:
                    out["items"] = describe_type(inner)
            elif low in _TEXT_TYPES and _TEXT_TYPES[low] != "null":
                out["type"] = _TEXT_TYPES[low]
            elif low in ("dict", "mapping"):
                out["type"] = "object"
            else:
                out["type"] = "any"
        else:
            out["type"] = "any"
        if optional:
            out["nullable"] = True
        return out
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if _is_union(origin):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            inner = describe_type(rest[0])
            inner["python_type"] = out["python_type"]
            if len(rest) < len(args):
                inner["nullable"] = True
            return inner
        if len(rest) < len(args):
            out["nullable"] = True
        members = [describe_type(a) for a in rest]
        resources = [a for a, d in zip(rest, members) if d.get("resource")]
        if resources:
            out["resource_types"] = [_type_text(a) for a in resources]
        if len(resources) == len(rest):
            # Union[TipSpot, Trash]: a resource name, resolved on the deck
            # and checked against the member classes.
            out["type"] = "string"
            out["resource"] = True
            return out
        kinds = {d["type"] for d in members}
        out["type"] = kinds.pop() if len(kinds) == 1 else "any"
        out["one_of"] = members
        return out
    if origin is typing.Literal:
        out["enum"] = [a for a in args]
        kinds = {type(a) for a in args}
        out["type"] = "string" if kinds == {str} else ("integer" if kinds == {int} else "any")
        return out
    if origin in (list, tuple, set, frozenset) or (origin is not None and _is_sequence_origin(origin)):
        out["type"] = "array"
        if args and not (origin is tuple and (len(args) != 2 or args[1] is not Ellipsis) and len(args) != 1):
            out["items"] = describe_type(args[0])
        return out
    if origin in (dict,) or (origin is not None and _is_mapping_origin(origin)):
        out["type"] = "object"
        return out
    if ann is bool:
        out["type"] = "boolean"
    elif ann is int:
        out["type"] = "integer"
    elif ann is float:
        out["type"] = "number"
    elif ann is str:
        out["type"] = "string"
    elif ann in (list, tuple, set):
        out["type"] = "array"
    elif ann is dict:
        out["type"] = "object"
    elif inspect.isclass(ann) and issubclass(ann, enum.Enum):
        values = [m.value for m in ann]
        out["enum"] = [m.name for m in ann]
        out["type"] = "string"
        out["enum_values"] = [_jsonable(v) for v in values]
    elif _is_resource_class(ann):
        out["type"] = "string"
        out["resource"] = True
    else:
        out["type"] = "any"
    return out


def _is_union(origin: typing.Any) -> bool:
    """typing.Union[...] / Optional[...] or a PEP 604 X | Y."""
    return origin is typing.Union or (origin is not None and origin is getattr(__import__("types"), "UnionType", None))


def _is_sequence_origin(origin: typing.Any) -> bool:
    import collections.abc as cabc
    return inspect.isclass(origin) and issubclass(origin, cabc.Sequence) and not issubclass(origin, (str, bytes))


def _is_mapping_origin(origin: typing.Any) -> bool:
    import collections.abc as cabc
    return inspect.isclass(origin) and issubclass(origin, cabc.Mapping)


def _type_text(ann: typing.Any) -> str:
    if ann is inspect.Parameter.empty:
        return ""
    if isinstance(ann, str):
        return ann
    if inspect.isclass(ann) and typing.get_origin(ann) is None:
        return ann.__name__
    return str(ann).replace("typing.", "")


def _jsonable(v: typing.Any, depth: int = 0) -> typing.Any:
    """Turn a return value into JSON: PLR objects by serialize(), dataclasses
    by fields, enums by value, anything else by repr()."""
    if depth > 32:
        return repr(v)
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, enum.Enum):
        return _jsonable(v.value, depth + 1)
    if isinstance(v, dict):
        return {str(k): _jsonable(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_jsonable(x, depth + 1) for x in v]
    ser = getattr(v, "serialize", None)
    if callable(ser):
        try:
            return _jsonable(ser(), depth + 1)
        except Exception:  # noqa: BLE001 - fall back to repr
            pass
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return _jsonable(dataclasses.asdict(v), depth + 1)
    tolist = getattr(v, "tolist", None)  # numpy arrays
    if callable(tolist):
        try:
            return _jsonable(tolist(), depth + 1)
        except Exception:  # noqa: BLE001
            pass
    return repr(v)


# ---------------------------------------------------------------- tasks


class Task:
    """One invocation of a machine coroutine."""

    def __init__(self, method: str, params: dict, exclusive: bool, timeout_s: float):
        self.id = secrets.token_hex(8)
        self.method = method
        self.params = params
        self.exclusive = exclusive
        self.timeout_s = timeout_s
        self.status = "queued"
        self.progress: float | None = None
        self.message: str | None = None
        self.result: typing.Any = None
        self.error: str | None = None
        self.error_type: str | None = None
        self.created = time.time()
        self.started: float | None = None
        self.finished: float | None = None
        self.cancel_requested = False
        self.timed_out = False
        self.lock = threading.Lock()
        # version counts the changes a long-poll answers for (status,
        # progress, message, cancel_requested); cond wakes its waiters.
        self.version = 1
        self.cond = threading.Condition(self.lock)
        self.atask: asyncio.Task | None = None

    def changed(self) -> None:
        """Count a change and wake the long-polls; call with self.lock held."""
        self.version += 1
        self.cond.notify_all()

    def snapshot(self) -> dict:
        with self.lock:
            out = {
                "id": self.id, "method": self.method, "params": _jsonable(self.params), "status": self.status,
                "progress": self.progress, "created": self.created, "started": self.started,
                "finished": self.finished, "cancel_requested": self.cancel_requested, "version": self.version,
            }
            if self.message is not None:
                out["message"] = self.message
            if self.status == "done":
                out["result"] = self.result
            if self.error is not None:
                out["error"] = self.error
                out["error_type"] = self.error_type
            return out


# ---------------------------------------------------------------- bridge


class Bridge:
    """Holds the machine and its tasks; every coroutine runs on self.loop."""

    def __init__(self, machine: typing.Any, *, concurrent: typing.Iterable[str] = (),
                 not_cancellable: typing.Iterable[str] = (), exclude: typing.Iterable[str] = (),
                 state_attrs: typing.Iterable[str] = ("setup_finished",), auto_state: bool = True,
                 task_timeout_s: float = 3600.0, state_timeout_s: float = 2.0, stop_timeout_s: float = 10.0,
                 keep_tasks: int = 256, keep_seconds: float = 3600.0):
        self.machine = machine
        self.concurrent = set(concurrent)
        self.not_cancellable = set(not_cancellable)
        self.task_timeout_s = float(task_timeout_s)
        self.state_timeout_s = float(state_timeout_s)
        self.stop_timeout_s = float(stop_timeout_s)
        self.keep_tasks = int(keep_tasks)
        self.keep_seconds = float(keep_seconds)
        self.tasks: dict[str, Task] = {}
        self.order: list[str] = []
        self.lock = threading.Lock()
        self.max_waiters = MAX_WAITERS
        self.waiters = 0
        self.closing = False
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="plrbridge-loop", daemon=True)
        self._thread.start()
        excluded = set(exclude) | {"stop"}
        self.methods: dict[str, typing.Callable] = {}
        self.state_getters: dict[str, typing.Callable] = {}
        for name in sorted(dir(machine)):
            if name.startswith("_") or name in excluded:
                continue
            try:
                attr = getattr(machine, name)
            except Exception:  # noqa: BLE001 - properties may raise before setup
                continue
            if not inspect.iscoroutinefunction(attr):
                continue
            if auto_state and name.startswith("get_") and _no_required_params(attr):
                self.state_getters[name[len("get_"):]] = attr
                continue
            self.methods[name] = attr
        self.state_attrs = [a for a in state_attrs if _has_attr(machine, a)]
        for c in self.concurrent | self.not_cancellable:
            if c not in self.methods:
                raise ValueError(f"--concurrent/--not-cancellable name {c!r} is not a public coroutine of the machine")

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def close(self) -> None:
        """Cancel what still runs (bounded), stop and close the event loop."""
        async def shutdown() -> None:
            me = asyncio.current_task()
            pending = [t for t in asyncio.all_tasks() if t is not me]
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        with self.lock:
            self.closing = True
            tasks = list(self.tasks.values())
        for t in tasks:  # wake the long-polls
            with t.lock:
                t.cond.notify_all()
        if self.loop.is_running():
            try:
                self.call(asyncio.wait_for(shutdown(), 2.0), 3.0)
            except BaseException:  # noqa: BLE001 - closing anyway
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive() and not self.loop.is_closed():
            self.loop.close()

    def call(self, coro: typing.Awaitable, timeout: float) -> typing.Any:
        """Run a coroutine on the loop from a request thread."""
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout)

    # ---- describe

    def describe(self) -> dict:
        methods = []
        for name, fn in self.methods.items():
            methods.append(self._describe_method(name, fn))
        state = []
        for a in self.state_attrs:
            state.append({"name": a, "type": describe_type(type(getattr(self.machine, a, None)))["type"], "source": "attribute"})
        for name, fn in self.state_getters.items():
            ret = _hints(fn).get("return", inspect.signature(fn).return_annotation)
            state.append({"name": name, "type": describe_type(ret)["type"], "source": "get_" + name})
        cls = type(self.machine)
        return {
            "bridge": {"name": "plrbridge", "version": VERSION, "long_poll_s": LONG_POLL_MAX_S},
            "machine": {"class": cls.__name__, "module": cls.__module__, "doc": _first_line(cls.__doc__),
                        "has_deck": _has_attr(self.machine, "deck"), "stop": callable(getattr(self.machine, "stop", None))},
            "methods": methods,
            "state": state,
        }

    def _describe_method(self, name: str, fn: typing.Callable) -> dict:
        sig = inspect.signature(fn)
        hints = _hints(fn)
        params = []
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            d = describe_type(hints.get(p.name, p.annotation))
            d["name"] = p.name
            d["kind"] = "keyword_only" if p.kind == p.KEYWORD_ONLY else "positional_or_keyword"
            d["required"] = p.default is inspect.Parameter.empty
            if p.default is not inspect.Parameter.empty:
                # An enum default is published by name, as the enum lists
                # (a value such as 1 would fall outside its own enum).
                dv = p.default.name if isinstance(p.default, enum.Enum) else _jsonable(p.default)
                if isinstance(dv, str) and not isinstance(p.default, (str, enum.Enum)):
                    d["default_repr"] = dv
                else:
                    d["default"] = dv
            params.append(d)
        ret = hints.get("return", sig.return_annotation)
        return {
            "name": name, "doc": _first_line(fn.__doc__), "params": params, "returns": describe_type(ret),
            "cancellable": name not in self.not_cancellable, "concurrent": name in self.concurrent,
            "accepts_kwargs": any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()),
        }

    # ---- state

    def state(self) -> dict:
        values: dict = {}
        errors: dict = {}
        for a in self.state_attrs:
            try:
                values[a] = _jsonable(getattr(self.machine, a))
            except Exception as e:  # noqa: BLE001
                errors[a] = f"{type(e).__name__}: {e}"

        async def read_all() -> None:
            async def one(name: str, fn: typing.Callable) -> None:
                try:
                    values[name] = _jsonable(await asyncio.wait_for(fn(), self.state_timeout_s))
                except asyncio.TimeoutError:
                    errors[name] = f"no answer within {self.state_timeout_s}s"
                except Exception as e:  # noqa: BLE001
                    errors[name] = f"{type(e).__name__}: {e}"
            await asyncio.gather(*(one(n, f) for n, f in self.state_getters.items()))

        if self.state_getters:
            self.call(read_all(), self.state_timeout_s + 1)
        return {"values": values, "errors": errors, "ts": time.time()}

    def deck(self) -> dict:
        deck = getattr(self.machine, "deck", None)
        if deck is None:
            raise BridgeError(404, "the machine has no deck")
        out = {"deck": _jsonable(deck)}
        sas = getattr(deck, "serialize_all_state", None)
        if callable(sas):
            out["state"] = _jsonable(sas())
        return out

    # ---- tasks

    def _convert(self, fn: typing.Callable, params: dict) -> dict:
        """Check params against the signature and turn resource names into
        resources (from the machine's deck)."""
        if not isinstance(params, dict):
            raise BridgeError(400, "params must be an object")
        sig = inspect.signature(fn)
        try:
            sig.bind(**params)
        except TypeError as e:
            raise BridgeError(400, f"bad params: {e}") from None
        hints = _hints(fn)
        out = {}
        for k, v in params.items():
            p = sig.parameters.get(k)
            ann = hints.get(k, p.annotation if p is not None else inspect.Parameter.empty)
            out[k] = self._value(k, ann, v)
        return out

    def _value(self, name: str, ann: typing.Any, v: typing.Any, depth: int = 0) -> typing.Any:
        """Convert a JSON value for an annotation: resource names to resources,
        enum member names to members, objects to instances of annotated
        classes, through Optional[...] and list/sequence annotations."""
        if v is None or depth > 8 or isinstance(ann, str) or ann is inspect.Parameter.empty:
            return v
        origin, args = typing.get_origin(ann), typing.get_args(ann)
        if _is_union(origin):
            rest = [a for a in args if a is not type(None)]
            if len(rest) == 1:
                return self._value(name, rest[0], v, depth + 1)
            return self._union_value(name, rest, v, depth)
        if isinstance(v, list) and (origin in (list, tuple, set, frozenset) or (origin is not None and _is_sequence_origin(origin))):
            item = args[0] if args else inspect.Parameter.empty
            out = [self._value(name, item, x, depth + 1) for x in v]
            return tuple(out) if origin is tuple else out
        if _is_resource_class(ann) and not isinstance(v, str):
            raise BridgeError(400, f"{name}: want the name of a {ann.__name__} on the deck, got {type(v).__name__} {v!r}")
        if _is_resource_class(ann) and isinstance(v, str):
            # The class is checked for every resource parameter, not only
            # inside a Union: a tip rack named for `plate` is refused
            # before the task starts, nothing moved.
            r = self._resource(name, v)
            if inspect.isclass(ann) and not isinstance(r, ann):
                raise BridgeError(400, f"{name}: {v!r} is a {type(r).__name__}, not {ann.__name__}")
            return r
        if ann is int and isinstance(v, float) and v.is_integer():
            return int(v)
        if ann is float and isinstance(v, int) and not isinstance(v, bool):
            return float(v)
        if inspect.isclass(ann) and issubclass(ann, enum.Enum) and isinstance(v, str):
            try:
                return ann[v]
            except KeyError:
                try:
                    return ann(v)
                except ValueError:
                    raise BridgeError(400, f"{name}: {v!r} is not one of {[m.name for m in ann]}") from None
        if isinstance(v, dict) and inspect.isclass(ann) and origin is None and ann not in (dict, object) \
                and not _is_mapping_origin(ann) and not _is_resource_class(ann):
            data = dict(v)
            if data.get("type") == ann.__name__:
                data.pop("type")
            deser = getattr(ann, "deserialize", None)
            try:
                return deser(dict(v)) if callable(deser) else ann(**data)
            except Exception as e:  # noqa: BLE001
                raise BridgeError(400, f"{name}: cannot build {ann.__name__} from {v}: {e}") from None
        return v

    def _union_value(self, name: str, members: list, v: typing.Any, depth: int) -> typing.Any:
        """Convert a value for Union[A, B, ...]: a string names a resource
        when a member is a resource class (it must be an instance of one of
        them) or an enum member; a list goes to the first sequence member; an
        object builds the first non-resource class member that accepts it."""
        if isinstance(v, str):
            res = [a for a in members if _is_resource_class(a)]
            if res:
                r = self._resource(name, v)
                if not any(isinstance(r, a) for a in res):
                    raise BridgeError(400, f"{name}: {v!r} is a {type(r).__name__}, not "
                                           f"{' or '.join(a.__name__ for a in res)}")
                return r
            for a in members:
                if inspect.isclass(a) and issubclass(a, enum.Enum):
                    try:
                        return self._value(name, a, v, depth + 1)
                    except BridgeError:
                        continue
            return v
        if all(_is_resource_class(a) for a in members):
            raise BridgeError(400, f"{name}: want the name of a {' or '.join(a.__name__ for a in members)} on the deck, "
                                   f"got {type(v).__name__} {v!r}")
        if isinstance(v, list):
            for a in members:
                o = typing.get_origin(a)
                if o in (list, tuple, set, frozenset) or (o is not None and _is_sequence_origin(o)):
                    return self._value(name, a, v, depth + 1)
            return v
        if isinstance(v, dict):
            errors = []
            for a in members:
                if inspect.isclass(a) and not _is_resource_class(a) and a not in (dict, object) \
                        and typing.get_origin(a) is None and not _is_mapping_origin(a):
                    try:
                        return self._value(name, a, v, depth + 1)
                    except BridgeError as e:
                        errors.append(str(e))
            if errors:
                raise BridgeError(400, "; ".join(errors))
            return v
        return v

    def _resource(self, name: str, rname: str) -> typing.Any:
        for holder in (getattr(self.machine, "deck", None), self.machine):
            get = getattr(holder, "get_resource", None)
            if callable(get):
                try:
                    return get(rname)
                except Exception as e:  # noqa: BLE001
                    raise BridgeError(400, f"{name}: no resource {rname!r}: {e}") from None
        raise BridgeError(400, f"{name}: the machine has no deck to find resource {rname!r} in")

    def submit(self, method: str, params: dict | None, timeout_s: float | None = None) -> dict:
        fn = self.methods.get(method)
        if fn is None:
            raise BridgeError(404, f"no method {method!r}", methods=sorted(self.methods))
        conv = self._convert(fn, params or {})
        if timeout_s is None:
            timeout_s = self.task_timeout_s
        try:
            timeout_s = float(timeout_s)
        except (TypeError, ValueError):
            raise BridgeError(400, "timeout_s must be a number") from None
        if not (timeout_s > 0) or math.isinf(timeout_s):
            raise BridgeError(400, "timeout_s must be positive and finite")
        exclusive = method not in self.concurrent
        task = Task(method, params or {}, exclusive, timeout_s)
        with self.lock:
            if exclusive:
                for t in self.tasks.values():
                    if t.exclusive and t.status not in TERMINAL:
                        raise BridgeError(409, f"busy: task {t.id} ({t.method}) is running", running=t.id)
            self.tasks[task.id] = task
            self.order.append(task.id)
            self._prune()
        self.call(self._start(task, fn, conv), 5)
        return task.snapshot()

    async def _start(self, task: Task, fn: typing.Callable, params: dict) -> None:
        ctx = contextvars.copy_context()
        ctx.run(_current_task.set, task)
        task.atask = self.loop.create_task(self._run(task, fn, params), context=ctx)

    async def _run(self, task: Task, fn: typing.Callable, params: dict) -> None:
        with task.lock:
            task.status, task.started = "running", time.time()
            task.changed()
        inner = asyncio.ensure_future(fn(**params))
        try:
            done, _ = await asyncio.wait({inner}, timeout=task.timeout_s)
            if not done:
                with task.lock:
                    task.timed_out = True
                inner.cancel()
                try:
                    await inner
                except BaseException:  # noqa: BLE001 - the end state is unknown either way
                    pass
                self._finish(task, "unknown", error=f"no end within the timeout of {task.timeout_s}s: the coroutine "
                             "was cancelled; how far the machine got is unknown", error_type="Timeout")
                return
            result = inner.result()
        except asyncio.CancelledError:
            # Our own task was cancelled (cancel or stop): pass it on and
            # wait for the coroutine's real end.
            inner.cancel()
            try:
                result = await inner
            except asyncio.CancelledError:
                self._finish(task, "cancelled", error="cancelled: the coroutine ended by CancelledError",
                             error_type="CancelledError")
                return
            except Exception as e:  # noqa: BLE001
                self._finish(task, "failed", error=f"{type(e).__name__}: {e}", error_type=type(e).__name__)
                return
            self._finish(task, "done", result=_jsonable(result))
            return
        except Exception as e:  # noqa: BLE001
            self._finish(task, "failed", error=f"{type(e).__name__}: {e}", error_type=type(e).__name__)
            return
        self._finish(task, "done", result=_jsonable(result))

    def _finish(self, task: Task, status: str, result: typing.Any = None, error: str | None = None,
                error_type: str | None = None) -> None:
        with task.lock:
            task.status, task.finished = status, time.time()
            task.result, task.error, task.error_type = result, error, error_type
            if status == "done":
                task.progress = 1.0
            task.changed()

    def _prune(self) -> None:
        now = time.time()
        keep = []
        finished = [i for i in self.order if self.tasks[i].status in TERMINAL]
        drop = set(finished[:max(0, len(finished) - self.keep_tasks)])
        for i in self.order:
            t = self.tasks[i]
            if i in drop or (t.status in TERMINAL and t.finished and now - t.finished > self.keep_seconds):
                del self.tasks[i]
                continue
            keep.append(i)
        self.order = keep

    def task(self, task_id: str) -> dict:
        with self.lock:
            t = self.tasks.get(task_id)
        if t is None:
            raise BridgeError(404, "task not found")
        return t.snapshot()

    def wait_task(self, task_id: str, wait: float, seen: int | None = None) -> tuple[dict, float]:
        """A long-poll: the task once its version differs from seen (default:
        its version now), once it has ended, or after wait seconds (clamped
        to LONG_POLL_MAX_S), whichever comes first. Returns the snapshot and
        the wait granted: 0 when it was not held (no wait asked, or
        max_waiters requests are held already)."""
        with self.lock:
            t = self.tasks.get(task_id)
            if t is None:
                raise BridgeError(404, "task not found")
            wait = max(0.0, min(float(wait), LONG_POLL_MAX_S))
            if wait <= 0 or self.waiters >= self.max_waiters or self.closing:
                wait = 0.0
            else:
                self.waiters += 1
        if wait <= 0:
            return t.snapshot(), 0.0
        try:
            deadline = time.monotonic() + wait
            with t.cond:
                if seen is None:
                    seen = t.version
                while t.version == seen and t.status not in TERMINAL and not self.closing:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    t.cond.wait(left)
        finally:
            with self.lock:
                self.waiters -= 1
        return t.snapshot(), wait

    def list_tasks(self) -> list:
        with self.lock:
            ts = [self.tasks[i] for i in self.order]
        return [t.snapshot() for t in reversed(ts)]

    def cancel(self, task_id: str) -> dict:
        with self.lock:
            t = self.tasks.get(task_id)
        if t is None:
            raise BridgeError(404, "task not found")
        if t.method in self.not_cancellable:
            raise BridgeError(409, f"{t.method} is not cancellable; use /stop")
        with t.lock:
            terminal = t.status in TERMINAL
            if not terminal and not t.cancel_requested:
                t.cancel_requested = True
                t.changed()
        if not terminal:
            self.loop.call_soon_threadsafe(self._cancel_atask, t)
        return t.snapshot()

    @staticmethod
    def _cancel_atask(t: Task) -> None:
        if t.atask is not None and not t.atask.done():
            t.atask.cancel()

    def stop(self) -> dict:
        """E-stop: cancel every running task, then await machine.stop()."""
        with self.lock:
            running = [t for t in self.tasks.values() if t.status not in TERMINAL]
        for t in running:
            with t.lock:
                if not t.cancel_requested:
                    t.cancel_requested = True
                    t.changed()
            self.loop.call_soon_threadsafe(self._cancel_atask, t)
        stop = getattr(self.machine, "stop", None)
        out: dict = {"cancelled": [t.id for t in running]}
        if not callable(stop):
            out.update(stopped=False, error="the machine has no stop()")
            return out
        try:
            async def do_stop() -> None:
                r = stop()
                if inspect.isawaitable(r):
                    await asyncio.wait_for(r, self.stop_timeout_s)
            self.call(do_stop(), self.stop_timeout_s + 1)
            out["stopped"] = True
        except BaseException as e:  # noqa: BLE001 - report any failure of the stop
            out.update(stopped=False, error=f"{type(e).__name__}: {e}")
        return out


def _hints(fn: typing.Callable) -> dict:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolved forward references
        return {}


def _no_required_params(fn: typing.Callable) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return all(p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in sig.parameters.values())


def _has_attr(obj: typing.Any, name: str) -> bool:
    try:
        getattr(obj, name)
        return True
    except Exception:  # noqa: BLE001
        return False


def _first_line(doc: str | None) -> str:
    if not doc:
        return ""
    return inspect.cleandoc(doc).split("\n", 1)[0]


# ---------------------------------------------------------------- HTTP


class _Handler(BaseHTTPRequestHandler):
    bridge: Bridge
    server_version = "plrbridge/" + VERSION
    max_body = 16 << 20

    def log_message(self, fmt: str, *args: typing.Any) -> None:  # quiet unless asked
        if getattr(self.server, "verbose", False):
            super().log_message(fmt, *args)

    def _send(self, status: int, body: typing.Any) -> None:
        data = json.dumps(body, allow_nan=False, default=repr).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        n = int(self.headers.get("Content-Length") or 0)
        if n > self.max_body:
            raise BridgeError(413, "body too large")
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return {}
        try:
            v = json.loads(raw)
        except ValueError as e:
            raise BridgeError(400, f"body is not JSON: {e}") from None
        if not isinstance(v, dict):
            raise BridgeError(400, "body must be a JSON object")
        return v

    def _dispatch(self, method: str) -> None:
        url = urlparse(self.path)
        path = url.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        b = self.bridge
        try:
            if method == "GET" and path == "/":
                self._send(200, {"bridge": "plrbridge", "version": VERSION, "machine": type(b.machine).__name__,
                                 "long_poll_s": LONG_POLL_MAX_S})
            elif method == "GET" and path == "/describe":
                self._send(200, b.describe())
            elif method == "GET" and path == "/state":
                self._send(200, b.state())
            elif method == "GET" and path == "/deck":
                self._send(200, b.deck())
            elif method == "GET" and path == "/tasks":
                self._send(200, {"tasks": b.list_tasks()})
            elif method == "POST" and path == "/tasks":
                body = self._body()
                m = body.get("method")
                if not isinstance(m, str):
                    raise BridgeError(400, "method (string) is required")
                self._send(202, {"task": b.submit(m, body.get("params"), body.get("timeout_s"))})
            elif method == "GET" and len(parts) == 2 and parts[0] == "tasks":
                q = parse_qs(url.query)
                if "wait" not in q:
                    self._send(200, {"task": b.task(parts[1])})
                else:
                    wait, seen = _wait_query(q)
                    snap, granted = b.wait_task(parts[1], wait, seen)
                    self._send(200, {"task": snap, "wait_s": granted})
            elif method == "POST" and len(parts) == 3 and parts[0] == "tasks" and parts[2] == "cancel":
                self._send(202, {"task": b.cancel(parts[1])})
            elif method == "POST" and path == "/stop":
                self._send(200, b.stop())
            else:
                raise BridgeError(404, f"no route {method} {path}")
        except BridgeError as e:
            self._send(e.status, {"error": e.message, **e.extra})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (a long-poll its caller cut short)
        except Exception as e:  # noqa: BLE001 - never leak a traceback page
            self._send(500, {"error": f"{type(e).__name__}: {e}"})

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")


def _wait_query(q: dict) -> tuple[float, int | None]:
    """The wait (seconds, finite, >= 0) and seen (an integer version) of a
    long-poll's query; a bad one is a 400."""
    try:
        wait = float(q["wait"][-1])
    except ValueError:
        raise BridgeError(400, "wait must be a number of seconds") from None
    if not math.isfinite(wait) or wait < 0:
        raise BridgeError(400, "wait must be a finite number of seconds >= 0")
    seen = None
    if "seen" in q:
        try:
            seen = int(q["seen"][-1])
        except ValueError:
            raise BridgeError(400, "seen must be an integer task version") from None
    return wait, seen


def make_server(bridge: Bridge, host: str = "127.0.0.1", port: int = 5050, verbose: bool = False) -> ThreadingHTTPServer:
    """An HTTP server for the bridge (not started; call serve_forever)."""
    handler = type("Handler", (_Handler,), {"bridge": bridge})
    srv = ThreadingHTTPServer((host, port), handler)
    srv.daemon_threads = True
    srv.verbose = verbose  # type: ignore[attr-defined]
    return srv


def load_factory(spec: str) -> typing.Callable:
    """'module:callable' or 'path/to/file.py:callable'."""
    mod_name, _, attr = spec.rpartition(":")
    if not mod_name or not attr:
        raise ValueError(f"--factory {spec!r}: want module:callable or file.py:callable")
    if mod_name.endswith(".py") or os.sep in mod_name:
        s = importlib.util.spec_from_file_location("plrbridge_factory", mod_name)
        if s is None or s.loader is None:
            raise ValueError(f"cannot load {mod_name}")
        mod = importlib.util.module_from_spec(s)
        s.loader.exec_module(mod)
    else:
        mod = importlib.import_module(mod_name)
    return getattr(mod, attr)


def serve(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Serve one PyLabRobot machine over JSON HTTP.")
    ap.add_argument("--factory", required=True, help="module:callable or file.py:callable returning the machine")
    ap.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1; only loopback is safe)")
    ap.add_argument("--port", type=int, default=5050)
    ap.add_argument("--setup", action="store_true", help="await machine.setup() before serving")
    ap.add_argument("--concurrent", default="", help="comma-separated methods that may run alongside others")
    ap.add_argument("--not-cancellable", default="", help="comma-separated methods whose cancel is refused")
    ap.add_argument("--exclude", default="", help="comma-separated methods not to serve")
    ap.add_argument("--state", default="setup_finished", help="comma-separated attributes served as state")
    ap.add_argument("--no-auto-state", action="store_true", help="do not serve zero-argument get_* coroutines as state")
    ap.add_argument("--task-timeout", type=float, default=3600.0, help="default task timeout in seconds")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    split = lambda s: [x.strip() for x in s.split(",") if x.strip()]  # noqa: E731
    made = load_factory(a.factory)()
    if inspect.isawaitable(made):
        made = asyncio.run(made)
    bridge = Bridge(made, concurrent=split(a.concurrent), not_cancellable=split(a.not_cancellable),
                    exclude=split(a.exclude), state_attrs=split(a.state), auto_state=not a.no_auto_state,
                    task_timeout_s=a.task_timeout)
    if a.setup:
        bridge.call(made.setup(), a.task_timeout)
    if a.host not in ("127.0.0.1", "::1", "localhost"):
        print(f"plrbridge: WARNING: binding {a.host}: anyone who can reach it can move the machine", file=sys.stderr)
    srv = make_server(bridge, a.host, a.port, a.verbose)
    print(f"plrbridge: serving {type(made).__name__} on http://{a.host}:{srv.server_address[1]}", file=sys.stderr)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
        bridge.close()


def main() -> None:
    # Run as a script, this module is __main__; machine code that does
    # `import plrbridge` (for report_progress) must get this same module.
    sys.modules.setdefault("plrbridge", sys.modules[__name__])
    serve()


if __name__ == "__main__":
    main()
