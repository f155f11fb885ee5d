"""Files are opened as they were checked: a directory swapped for a symlink as fast as a
thread can swap it never lets a file tool (or a checkpoint rewind) read or write outside
the workspace, and never crashes the run.

The attacker is the strongest one a prompt-injected model has: a thread (another call of
the same response, or one a ``run_python`` cell left running) that atomically exchanges
a directory of the workspace with a symlink to a host directory holding a secret file
and an empty directory, over and over (``renameat2(RENAME_EXCHANGE)``: the name always
exists, as a directory or as a link).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, UsageLimits
from deputy_shiny.errors import CheckpointError, ToolInvocationError
from deputy_shiny.persistence import FileJournal
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import ToolContext, tool_context
from deputy_shiny.tools.bundles import tools_file
from deputy_shiny.tools.data import tool_read_csv

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_libc = ctypes.CDLL(None, use_errno=True)


def _exchange(a: Path, b: Path) -> None:
    """Swap two names atomically (Linux ``renameat2``)."""
    if _libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class Swapper(threading.Thread):
    """Exchanges ``work/d`` (a real directory) with a symlink to ``outside``, forever.

    After every full cycle ``d`` is the real directory again; :meth:`paused` holds it
    there (the test sets things up through it, as the model's earlier calls would).
    """

    def __init__(self, work: Path, outside: Path) -> None:
        super().__init__(daemon=True, name="swapper")
        self.d = work / "d"
        self.link = work / ".link"
        os.symlink(outside, self.link, target_is_directory=True)
        self.cv = threading.Condition()
        self.stopping = False
        self.pause_requests = 0
        self.is_paused = False
        self.swaps = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while True:
                with self.cv:
                    if self.stopping:
                        return
                    if self.pause_requests:
                        self.is_paused = True
                        self.cv.notify_all()
                        self.cv.wait_for(lambda: not self.pause_requests or self.stopping)
                        self.is_paused = False
                        continue
                _exchange(self.d, self.link)  # d is the link now
                _exchange(self.d, self.link)  # and the directory again
                self.swaps += 2
        except BaseException as exc:  # pragma: no cover - reported by stop()
            self.error = exc

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self.cv:
            self.pause_requests += 1
            assert self.cv.wait_for(lambda: self.is_paused, timeout=10)
        try:
            yield
        finally:
            with self.cv:
                self.pause_requests -= 1
                self.cv.notify_all()

    def stop(self) -> None:
        with self.cv:
            self.stopping = True
            self.cv.notify_all()
        self.join(timeout=10)
        assert not self.is_alive()
        if self.error is not None:
            raise self.error
        assert self.d.is_dir() and not self.d.is_symlink()


@pytest.fixture
def arena(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """work/ (the workspace, with d/) and outside/ (secret.txt, an empty target/)."""
    # Durability is not what is tested here, and a few hundred fsyncs take most of the
    # time on a busy disk.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    marker = f"TOPSECRET-{uuid.uuid4().hex}"
    work = tmp_path / "work"
    outside = tmp_path / "outside"
    (outside / "target").mkdir(parents=True)
    (outside / "secret.txt").write_text(f"{marker}\n")
    (outside / "data.csv").write_text(f"secret\n{marker}\n")
    (outside / "doc.md").write_text(f"# {marker}\n")
    (work / "d" / "target").mkdir(parents=True)
    (work / "d" / "secret.txt").write_text("benign\n")
    (work / "d" / "data.csv").write_text("a,b\n1,2\n")
    (work / "d" / "doc.md").write_text("# benign\n")
    before = _snapshot(outside)
    swapper = Swapper(work.resolve(), outside.resolve())
    yield {
        "work": work.resolve(),
        "outside": outside,
        "marker": marker,
        "swapper": swapper,
        "before": before,
    }
    if swapper.is_alive():
        swapper.stop()


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every path below ``directory`` with its contents and mtime (directories: b"")."""
    found: dict[str, tuple[bytes, int]] = {}
    for path in sorted(directory.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if path.is_file() else b""
        found[str(path.relative_to(directory))] = (data, info.st_mtime_ns)
    return found


def _calls() -> list[ScriptedToolCall]:
    reads: list[ScriptedToolCall] = []
    writes: list[ScriptedToolCall] = []
    for i in range(200):
        kind = i % 4
        if kind == 0:
            reads.append(ScriptedToolCall("read_file", {"path": "d/secret.txt", "limit": i + 1}))
        elif kind == 1:
            reads.append(
                ScriptedToolCall(
                    "grep_files", {"pattern": "SECRET|benign|a,b", "path": "d", "max_results": i}
                )
            )
        elif kind == 2:
            reads.append(
                ScriptedToolCall("list_files", {"path": "d", "recursive": True, "max_entries": i})
            )
        else:
            reads.append(
                ScriptedToolCall(
                    "grep_files", {"pattern": "SECRET", "path": "d/secret.txt", "max_results": i}
                )
            )
        kind = i % 4
        if kind == 0:
            writes.append(
                ScriptedToolCall("write_file", {"path": f"d/target/w{i}.txt", "content": "w"})
            )
        elif kind == 1:
            writes.append(
                ScriptedToolCall(
                    "write_file",
                    {"path": f"d/target/n{i}/deep.txt", "content": "x", "mode": "append"},
                )
            )
        elif kind == 2:
            writes.append(
                ScriptedToolCall(
                    "edit_file",
                    {"path": "d/secret.txt", "old_string": "\n", "new_string": f"{i}\n"},
                )
            )
        else:
            writes.append(
                ScriptedToolCall("write_file", {"path": "d/secret.txt", "content": f"benign {i}\n"})
            )
    mixed = [call for pair in zip(reads, writes, strict=True) for call in pair]
    return mixed


async def test_a_swapped_directory_never_leaks_nor_escapes_through_the_file_tools(
    arena: dict[str, Any],
) -> None:
    work, marker, swapper = arena["work"], arena["marker"], arena["swapper"]
    calls = _calls()
    model = ScriptedModel([ScriptedReply(tool_calls=calls), "done"])
    agent = Agent(
        model,
        tools=tools_file(),
        working_dir=work,
        enable_file_checkpointing=True,
        usage_limits=UsageLimits(max_requests=5, max_tool_calls=1000),
    )
    swapper.start()
    started = time.monotonic()
    try:
        result = await asyncio.wait_for(agent.run_async("go"), timeout=120)
    finally:
        swapper.stop()
    elapsed = time.monotonic() - started
    ends = [e for e in result.events if e.type == "tool_end"]
    assert result.stop_reason == "complete", result.events[-1]
    assert len(ends) == 400  # every call is a result, error or not: no crashed run
    outputs = [e.output for e in ends]
    assert not [o for o in outputs if marker in o], "a host file was read"
    assert marker not in str(result.response)
    assert _snapshot(arena["outside"]) == arena["before"], "something was written outside"
    # The race really ran: calls met the link (refused), and others went through.
    assert swapper.swaps > 100
    assert any("symbolic link" in o for o in outputs)
    assert any(not e.is_error for e in ends)
    assert elapsed < 120


def _call_tool(ctx: ToolContext, tool: Any, arguments: dict[str, Any]) -> str:
    with tool_context(ctx):
        try:
            return str(asyncio.run(tool.invoke(tool.parse_arguments(arguments))))
        except ToolInvocationError as exc:  # an error result; anything else is a crash
            return f"error: {exc}"


def test_every_file_tool_function_holds_under_the_swap(arena: dict[str, Any]) -> None:
    """read_markdown, read_csv, glob_files and multi_edit too, from many threads at once."""
    work, marker, swapper = arena["work"], arena["marker"], arena["swapper"]
    tools = {t.name: t for t in [*tools_file(), tool_read_csv()]}
    ctx = ToolContext(working_dir=work, read_roots=(work,), write_roots=(work,))
    jobs: list[tuple[str, dict[str, Any]]] = []
    for i in range(50):
        jobs += [
            ("read_markdown", {"path": "d/doc.md"}),
            ("read_csv", {"path": "d/data.csv"}),
            ("glob_files", {"pattern": "d/**/*", "max_results": 100 + i}),
            ("read_file", {"path": "d/secret.txt", "offset": 0, "limit": 5 + i}),
            (
                "multi_edit",
                {
                    "path": "d/secret.txt",
                    "edits": [{"old_string": "\n", "new_string": f"{i}\n"}],
                },
            ),
            ("write_file", {"path": f"d/target/m{i}/f.txt", "content": "m"}),
        ]
    outputs: list[str] = []
    failures: list[BaseException] = []

    def worker(chunk: list[tuple[str, dict[str, Any]]]) -> None:
        try:
            for name, arguments in chunk:
                outputs.append(_call_tool(ctx, tools[name], arguments))
        except BaseException as exc:
            failures.append(exc)

    swapper.start()
    threads = [threading.Thread(target=worker, args=(jobs[k::6],)) for k in range(6)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        swapper.stop()
    assert not any(t.is_alive() for t in threads)
    assert not failures, failures
    assert len(outputs) == len(jobs)
    assert not [o for o in outputs if marker in o], "a host file was read"
    assert _snapshot(arena["outside"]) == arena["before"], "something was written outside"
    assert any("symbolic link" in o for o in outputs)


def test_a_checkpoint_rewind_under_the_swap_never_writes_outside(arena: dict[str, Any]) -> None:
    work, swapper = arena["work"], arena["swapper"]
    journal = FileJournal(work)
    outcomes = {"rewound": 0, "refused": 0}
    swapper.start()
    try:
        deadline = time.monotonic() + 120
        for i in range(100):  # 300 files restored or deleted under the swap
            assert time.monotonic() < deadline
            with swapper.paused():  # the model's earlier calls, with d a real directory
                first = journal.checkpoint(f"round {i}")
                for rel, content in (
                    ("d/secret.txt", f"changed {i}\n"),
                    ("d/target/keep.txt", f"changed {i}\n"),
                    (f"d/target/new{i}.txt", "new\n"),
                ):
                    journal.record(work / rel)
                    (work / rel).write_text(content)
                (work / "d/target/keep.txt").unlink()  # the rewind must create it again
            try:
                journal.rewind(first.id)  # restores secret.txt and keep.txt, deletes new
                outcomes["rewound"] += 1
            except CheckpointError:  # refused: a link met on the way (typed, not a crash)
                outcomes["refused"] += 1
    finally:
        swapper.stop()
    assert _snapshot(arena["outside"]) == arena["before"], "the rewind wrote outside"
    assert outcomes["rewound"] + outcomes["refused"] == 100
    assert outcomes["refused"] > 0  # the race ran
