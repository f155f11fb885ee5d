"""A host's tool scope (``tools/_scope.py``): made on the loop as each call starts,
entered where the tool's function runs (the worker thread of a sync tool, the call's task
of an async one), one per call, parallel calls included; and the kit's scope for the
app's own tools (``shiny/_app_tools.py``): which tools it takes, and the session's sends
made safe from a worker thread."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from shiny.module import ResolvedId

from deputy_shiny import Agent
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import Tool, tool, tool_read_file
from deputy_shiny.tools._scope import tool_scope

from .helpers import collect, local_tool

where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="outside")


class Recorder:
    """A scope that records where it was made and entered, and sets ``where``."""

    def __init__(self) -> None:
        self.made: list[tuple[str, int]] = []
        self.entered: list[tuple[str, int]] = []

    def __call__(self, tool: Tool) -> AbstractContextManager[object] | None:
        if tool.name == "unscoped":
            return None
        self.made.append((tool.name, threading.get_ident()))
        return self._enter(tool.name)

    @contextmanager
    def _enter(self, name: str) -> Iterator[None]:
        self.entered.append((name, threading.get_ident()))
        token = where.set(f"in {name}'s scope")
        try:
            yield
        finally:
            where.reset(token)


def seen_in_sync(label: str) -> str:
    """Say where it runs."""
    return f"{label}: {where.get()} on {threading.get_ident()}"


async def seen_in_async(label: str) -> str:
    """Say where it runs."""
    await asyncio.sleep(0.01)
    return f"{label}: {where.get()} on {threading.get_ident()}"


def unscoped() -> str:
    """Say where it runs."""
    return where.get()


def _results(agent: Agent) -> dict[str, str]:
    turns = agent.get_turns()
    return {r.call_id: str(r.output) for t in turns for r in t.tool_results}


async def test_each_call_makes_its_scope_on_the_loop_and_enters_it_where_it_runs() -> None:
    loop_thread = threading.get_ident()
    calls = [
        ScriptedToolCall("seen_in_sync", {"label": "s1"}, id="s1"),
        ScriptedToolCall("seen_in_sync", {"label": "s2"}, id="s2"),
        ScriptedToolCall("seen_in_async", {"label": "a1"}, id="a1"),
        ScriptedToolCall("unscoped", {}, id="u"),
    ]
    agent = Agent(
        ScriptedModel([ScriptedReply(tool_calls=calls), "Done."]),
        tools=[local_tool(seen_in_sync), local_tool(seen_in_async), local_tool(unscoped)],
    )
    scope = Recorder()
    with tool_scope(scope):
        await collect(agent.run("go"))
    assert where.get() == "outside"  # nothing leaks out of the block
    results = _results(agent)
    assert results["u"] == "outside"  # the scope gave it none
    sync_threads = set()
    for call in ("s1", "s2"):
        label, _, thread = results[call].partition(" on ")
        assert label == f"{call}: in seen_in_sync's scope"
        assert int(thread) != loop_thread  # a worker thread
        sync_threads.add(int(thread))
    assert results["a1"] == f"a1: in seen_in_async's scope on {loop_thread}"
    # Made on the loop, once per call; entered in the thread the sync function ran in.
    assert [thread for _, thread in scope.made] == [loop_thread] * 3
    assert sorted(name for name, _ in scope.made) == [
        "seen_in_async",
        "seen_in_sync",
        "seen_in_sync",
    ]
    entered_sync = {thread for name, thread in scope.entered if name == "seen_in_sync"}
    assert entered_sync == sync_threads


async def test_without_a_scope_tools_run_as_before() -> None:
    result = await local_tool(seen_in_sync).invoke({"label": "x"})
    assert result.startswith("x: outside on ")


def test_the_kit_scopes_only_the_apps_own_tools() -> None:
    from deputy_shiny.shiny._app_tools import is_app_tool

    def set_region(region: str) -> str:
        """Set the region."""
        return region

    assert is_app_tool(tool(set_region))
    assert not is_app_tool(tool_read_file())  # a built-in keeps the kit's namespace

    def delegate(task: str) -> str:
        """The kit's own delegation tools are functions of this package."""
        return task

    delegate.__module__ = "deputy_shiny.delegation._manager"
    assert not is_app_tool(tool(delegate))


class FakeRoot:
    """The parts of a Shiny root session the kit's sends wrap."""

    ns = ResolvedId("")

    def __init__(self) -> None:
        self.inputs: list[tuple[str, int]] = []
        self.messages: list[tuple[dict[str, object], int]] = []
        self.ended: list[Any] = []

    def send_input_message(self, id: str, message: dict[str, object]) -> None:
        self.inputs.append((id, threading.get_ident()))

    def _send_message_sync(self, message: dict[str, object]) -> None:
        self.messages.append((message, threading.get_ident()))

    def on_ended(self, fn: Any) -> Any:
        self.ended.append(fn)
        return lambda: None

    def root_scope(self) -> FakeRoot:
        return self


async def test_a_worker_threads_sends_go_out_on_the_loop_in_order_then_flush() -> None:
    from deputy_shiny.shiny import _app_tools

    loop_thread = threading.get_ident()
    root = FakeRoot()
    session: Any = root  # a Shiny session, as far as the kit looks
    scope = _app_tools.app_tool_scope(session)
    assert _app_tools.app_tool_scope(session) is not scope  # a second chat: one install
    assert len(root.ended) == 1
    flushes: list[int] = []
    sends = vars(root)["_deputy_loop_sends"]

    async def counted_flush() -> None:
        sends.flush_scheduled = False
        flushes.append(threading.get_ident())

    sends._flush = counted_flush

    def app_tool() -> None:
        """Set three inputs and notify."""
        for n in range(3):
            root.send_input_message(f"x{n}", {})
        root._send_message_sync({"notification": "hi"})

    with tool_scope(scope):
        await tool(app_tool).invoke({})
    await asyncio.sleep(0.05)
    assert root.inputs == [(f"x{n}", loop_thread) for n in range(3)]  # in order, on the loop
    assert root.messages == [({"notification": "hi"}, loop_thread)]
    assert flushes == [loop_thread]  # coalesced: one flush for the three
    root.send_input_message("outside", {})  # the app's own effects: as shiny made it
    await asyncio.sleep(0.01)
    assert root.inputs[-1] == ("outside", loop_thread) and len(flushes) == 1
    root.ended[0]()  # the session ended: shiny's own methods again
    assert "send_input_message" not in vars(root)
    assert "_deputy_loop_sends" not in vars(root)
