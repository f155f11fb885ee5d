"""load.py's app: the reference app (``app.py`` on the offline demo model), plus a probe.

The app itself is ``app.py`` unchanged: its sessions, tools, approvals, ask_user, bash
in the sandbox and the research team. Only when ``DEPUTY_LOAD_DIAGNOSTICS=1`` (load.py
sets it; nothing here is part of the package) this module adds two things:

* every log record at WARNING or above is counted by level, and the first few ERROR
  ones are kept: a server-side exception is an error for the benchmark;
* ``GET /__load/diagnostics`` answers JSON with what the process holds right now, after
  ``gc.collect()``: its asyncio tasks, threads, child processes (those running bwrap are
  sandboxes), leftover per-call cgroups, the live shiny sessions, Agents and shinychat
  Chats, the most numerous kinds of object, and those log counts (``?quick=1``: only
  the sessions and child processes, which load.py polls). Ended sessions must
  leave none of these behind (ARCHITECTURE.md rule 9; ``tests/test_session_release.py``
  checks it per session).

It serves on loopback only (load.py starts it with ``--host 127.0.0.1``).
"""

from __future__ import annotations

import asyncio
import collections
import gc
import json
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from shiny.session._session import AppSession  # noqa: E402
from shinychat import Chat  # noqa: E402

import app as reference  # noqa: E402 (the reference app lives at the repository's root)
from deputy_shiny import Agent  # noqa: E402
from deputy_shiny.sandbox import _cgroups  # noqa: E402

DIAGNOSTICS_PATH = "/__load/diagnostics"
ENABLED = os.environ.get("DEPUTY_LOAD_DIAGNOSTICS") == "1"
KEPT_ERRORS = 20

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class _Counter(logging.Handler):
    """Counts records by level name; keeps the first ERROR ones (with their traceback)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: collections.Counter[str] = collections.Counter()
        self.errors: list[str] = []
        self.warnings: collections.Counter[str] = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[record.levelname] += 1
        if record.levelno >= logging.ERROR and len(self.errors) < KEPT_ERRORS:
            text = f"{record.name}: {record.getMessage()}"
            if record.exc_info:
                text += "\n" + logging.Formatter().formatException(record.exc_info)
            self.errors.append(text)
        elif record.levelno < logging.ERROR:
            self.warnings[f"{record.name}: {record.getMessage()[:120]}"] += 1


COUNTER = _Counter()
if ENABLED:
    # uvicorn's loggers do not propagate to the root: count theirs too.
    for _name in ("", "uvicorn"):
        logging.getLogger(_name).addHandler(COUNTER)


def _children(pid: int) -> list[dict[str, Any]]:
    """Every descendant process of ``pid`` (Linux /proc): its pid and command name."""
    parents: dict[int, list[int]] = collections.defaultdict(list)
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        parents[ppid].append(int(entry.name))
        names[int(entry.name)] = comm
    found, queue = [], list(parents.get(pid, []))
    while queue:
        child = queue.pop()
        found.append({"pid": child, "name": names.get(child, "?")})
        queue.extend(parents.get(child, []))
    return found


def _call_cgroups() -> list[str]:
    """The sandbox's per-call cgroups of this process still on disk."""
    left = []
    for controller in ("pids", "memory"):
        parent = _cgroups._cgroup_parent(controller)
        if parent is not None:
            left += [str(p) for p in parent.glob(f"call-{os.getpid()}-*")]
    return sorted(set(left))


def _live(*kinds: type) -> list[int]:
    """How many live objects of each of ``kinds`` the collector tracks (one pass).

    By the type's MRO, not ``isinstance``: shiny's ``Session`` is an ABC, and an
    ``isinstance`` against it caches every other type it is asked about (a weakref and a
    builtin callback each, for good): the probe itself then showed as the growth of
    ``weakref.ReferenceType`` and ``builtin_function_or_method`` it was looking for.
    """
    counts = [0] * len(kinds)
    for obj in gc.get_objects():
        mro = type(obj).__mro__
        for index, kind in enumerate(kinds):
            if kind in mro:
                counts[index] += 1
    return counts


def _types(top: int = 300) -> dict[str, int]:
    """The most numerous kinds of object the collector tracks (a leak shows as growth)."""
    counts = collections.Counter(
        f"{type(obj).__module__}.{type(obj).__qualname__}" for obj in gc.get_objects()
    )
    return dict(counts.most_common(top))


def quick_diagnostics() -> dict[str, Any]:
    """Only what load.py polls for until the server is idle: the live sessions and the
    child processes (one pass over the objects, not :func:`diagnostics`' several)."""
    gc.collect()
    (sessions,) = _live(AppSession)
    return {"sessions": sessions, "children": _children(os.getpid())}


def diagnostics() -> dict[str, Any]:
    """What the process holds now (call on the event loop: it lists the loop's tasks)."""
    gc.collect()
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    children = _children(os.getpid())
    sessions, agents, chats = _live(AppSession, Agent, Chat)
    return {
        "tasks": sorted(_task_name(t) for t in tasks),
        "threads": sorted(t.name for t in threading.enumerate()),
        "children": children,
        "sandboxes": [c for c in children if c["name"] == "bwrap"],
        "cgroups": _call_cgroups(),
        "sessions": sessions,
        "agents": agents,
        "chats": chats,
        "types": _types(),
        "log_counts": dict(COUNTER.counts),
        "log_errors": COUNTER.errors,
        "log_warnings": dict(COUNTER.warnings.most_common(10)),
        **(__import__("leak_probe").census() if os.environ.get("LEAK_PROBE") else {}),
    }


def _task_name(task: asyncio.Task[Any]) -> str:
    coro = task.get_coro()
    code = getattr(coro, "__qualname__", None) or type(coro).__name__
    return f"{task.get_name()} {code}"


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The reference app, with the diagnostics route in front of it when enabled."""
    if ENABLED and scope["type"] == "http" and scope["path"] == DIAGNOSTICS_PATH:
        quick = scope.get("query_string", b"") == b"quick=1"
        body = json.dumps(quick_diagnostics() if quick else diagnostics()).encode()
        headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await reference.app(scope, receive, send)
