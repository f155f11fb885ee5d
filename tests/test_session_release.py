"""Rule 9 (ARCHITECTURE.md): an ended browser session frees everything it held.

Each test serves a Shiny app in this process (uvicorn on loopback, in the test's own
event loop), opens one session over Shiny's websocket protocol (no browser), holds
weak references to the session, its Agent and its Chat, and ends the session by
closing the socket. Once the server is idle again (the session is gone and every task
it started has finished), ``gc.collect()`` must leave each reference dead. A failure
prints the chain of references from a process-wide root to what stayed alive.

Two apps: the reference app (``app.py``, on the offline demo model) and a minimal host
app built from the kit's modules with a ``FunctionModel``. Four ways to end: a session
that never chatted, one whose run called a tool, one that ended while an approval
waited (with the default 600 s approval timeout), and one that ended mid-stream.

Anything a later feature keeps per session belongs under this guard: record a weak
reference to it in the apps below and it is checked in every scenario.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import json
import socket
import sys
import tempfile
import threading
import types
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
import websockets
from shiny import App, Inputs, Outputs, Session, ui
from shiny.reactive import _core as reactive_core
from shiny.session import get_current_session
from shinychat import Chat

from deputy_shiny import Agent, Permissions
from deputy_shiny.shiny import (
    AgentChatContext,
    KitPersistence,
    _chat_module,
    agent_chat_server,
    agent_chat_ui,
    permission_mode_server,
    permission_mode_ui,
)
from deputy_shiny.shiny._chat_session import _ChatSession
from deputy_shiny.shiny._warm import warm_up_in_background
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file
from tests.helpers import local_tool

IDLE_TIMEOUT = 60.0  # seconds to wait for the server to go idle (litellm's first import)


# --------------------------------------------------------------------------- recording


@dataclass
class Held:
    """Weak references to what one session held, recorded on the server side."""

    refs: dict[str, list[weakref.ref[Any]]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )

    def add(self, kind: str, obj: object) -> None:
        self.refs[kind].append(weakref.ref(obj))

    def one(self, kind: str) -> Any:
        """The single live object of ``kind`` (fails if there is not exactly one)."""
        alive = [obj for ref in self.refs[kind] if (obj := ref()) is not None]
        assert len(alive) == 1, f"expected one live {kind}, found {len(alive)}"
        return alive[0]

    def record_session(self) -> None:
        """Record the current session (call inside a server function)."""
        session = get_current_session()
        assert session is not None
        self.add("session", session.root_scope())


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Held:
    """A fresh record; every Chat the kit makes while the test runs is recorded in it."""
    record = Held()

    class RecordedChat(Chat):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            record.add("chat", self)

    class RecordedChatSession(_ChatSession):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            record.add("chat_session", self)

    monkeypatch.setattr(_chat_module, "Chat", RecordedChat)
    monkeypatch.setattr(_chat_module, "_ChatSession", RecordedChatSession)
    # Shiny's one reactive lock is an asyncio.Lock, bound to the first event loop that
    # waits on it; each test here serves in its own loop, so each gets a fresh lock.
    monkeypatch.setattr(reactive_core._reactive_environment, "_lock", None)
    return record


# --------------------------------------------------------------------------- apps


async def take_note(text: str) -> str:
    """Note ``text`` (a read-only test tool).

    Args:
        text: What to note.
    """
    return f"noted {text}"


def _minimal_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    last = messages[-1]
    if last["role"] == "tool":
        return f"Tool said: {last['content']}"
    text = str(last["content"])
    if text == "tool":
        return ScriptedReply(tool_calls=[ScriptedToolCall("take_note", {"text": "hi"})])
    if text == "write":
        return ScriptedReply(
            tool_calls=[ScriptedToolCall("write_file", {"path": "a.txt", "content": "x"})]
        )
    if text == "slow":
        words = " ".join(f"word{i:04d}" for i in range(2000))
        return ScriptedReply(words, chunk_size=9, delay=0.05)
    return f"You said: {text}"


def minimal_app(held: Held) -> App:
    """A host app built from the kit's modules: the chat and the permission-mode switcher."""

    def make_agent(ctx: AgentChatContext) -> Agent:
        agent = Agent(
            FunctionModel(_minimal_reply),
            tools=[tool_write_file(), local_tool(take_note)],
            working_dir=ctx.working_dir,
            approval_handler=ctx.approval_handler,
            permissions=Permissions(approval_tools=("write_file",)),
        )
        held.add("agent", agent)
        return agent

    def server(input: Inputs, output: Outputs, session: Session) -> None:
        held.record_session()
        handle = agent_chat_server("agent", make_agent)
        permission_mode_server("mode", lambda: handle.agent)

    page = ui.page_fillable(permission_mode_ui("mode"), agent_chat_ui("agent"))
    return App(page, server)


def reference_app(held: Held, monkeypatch: pytest.MonkeyPatch) -> App:
    """``app.py`` on the demo model, its agents and sessions recorded."""
    monkeypatch.delenv("DEPUTY_MODEL", raising=False)
    import app as reference

    assert reference.MODEL_CHECK.current().is_demo
    build = reference.build_agent

    def recorded_build(ctx: AgentChatContext, model: str, requester: str | None = None) -> Agent:
        held.record_session()
        agent = build(ctx, model, requester)
        held.add("agent", agent)
        return agent

    monkeypatch.setattr(reference, "build_agent", recorded_build)
    # Its saved conversations go to a folder of the test's own.
    folder = tempfile.mkdtemp(prefix="deputy-release-")
    monkeypatch.setattr(reference, "CONVERSATIONS", KitPersistence(folder))
    return reference.app


# --------------------------------------------------------------------------- server, client


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # leave pytest's signal handlers alone
        yield


@contextlib.asynccontextmanager
async def serve(app: App) -> AsyncIterator[int]:
    """Serve ``app`` on a free loopback port in this event loop; yield the port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, log_level="error")
    server = _Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        await task


class ShinyClient:
    """One browser session, spoken over Shiny's websocket protocol."""

    def __init__(self, ws: Any, chat_input: str) -> None:
        self.ws = ws
        self.chat_input = chat_input

    async def next_message(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(await asyncio.wait_for(self.ws.recv(), IDLE_TIMEOUT))
        return message

    async def until(self, found: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            message = await self.next_message()
            if found(message):
                return message

    async def send_chat(self, text: str) -> None:
        data = {self.chat_input: {"text": text, "attachments": []}}
        await self.ws.send(json.dumps({"method": "update", "data": data}))


def chat_action(kind: str) -> Callable[[dict[str, Any]], bool]:
    """Matches a shinychat stream message of type ``kind`` (with content for ``chunk``)."""

    def found(message: dict[str, Any]) -> bool:
        action = message.get("custom", {}).get("shinyChatMessage", {}).get("action", {})
        return bool(action.get("type") == kind and (kind != "chunk" or action.get("content")))

    return found


def modal_shown(message: dict[str, Any]) -> bool:
    return bool(message.get("modal", {}).get("type") == "show")


@contextlib.asynccontextmanager
async def open_session(port: int, chat_input: str) -> AsyncIterator[ShinyClient]:
    """Open a session and wait for its first outputs; closing the socket ends it."""
    async with websockets.connect(f"ws://127.0.0.1:{port}/websocket/", max_size=None) as ws:
        client = ShinyClient(ws, chat_input)
        await ws.send(json.dumps({"method": "init", "data": {}}))
        await client.until(lambda message: "values" in message)
        yield client


async def wait_idle(baseline: set[asyncio.Task[Any]]) -> None:
    """Wait until only the tasks of ``baseline`` remain: the session has fully ended.

    (A sync tool's worker thread is awaited by a task, so it is covered too.)
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + IDLE_TIMEOUT
    while True:
        tasks = asyncio.all_tasks() - baseline
        if not tasks:
            return
        if loop.time() > deadline:
            raise AssertionError(f"the server did not go idle; still running: {tasks}")
        await asyncio.sleep(0.02)


# --------------------------------------------------------------------------- diagnosis


def _describe(obj: object) -> str:
    if isinstance(obj, types.FunctionType):
        return f"function {obj.__qualname__}"
    if isinstance(obj, dict):
        return f"dict {list(obj)[:5]!r:.120}"
    if isinstance(obj, types.FrameType):
        return f"frame {obj.f_code.co_qualname} ({obj.f_code.co_filename}:{obj.f_lineno})"
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


_ROOT_TYPES = (types.ModuleType, asyncio.AbstractEventLoop, threading.Thread)


def referrer_chain(target: object, ignore: list[object]) -> str:
    """The shortest chain of referrers from ``target`` to a module, a loop or a thread."""
    stacks = {id(frame) for frame in sys._current_frames().values()}
    skip = {id(obj) for obj in ignore} | {id(sys._getframe())}
    seen = {id(target)} | skip
    queue: collections.deque[list[object]] = collections.deque([[target]])
    skip.add(id(queue))
    while queue:
        path = queue.popleft()
        if len(path) > 40:
            continue
        skip.add(id(path))
        for referrer in gc.get_referrers(path[-1]):
            if id(referrer) in seen or id(referrer) in skip:
                continue
            seen.add(id(referrer))
            found = [*path, referrer]
            if (
                isinstance(referrer, _ROOT_TYPES)
                or id(referrer) in stacks
                or (isinstance(referrer, dict) and "__builtins__" in referrer)
            ):
                return "\n  <- ".join(_describe(obj) for obj in found)
            queue.append(found)
    return f"{_describe(target)} (no root found: kept by an object gc does not track)"


def assert_released(held: Held) -> None:
    gc.collect()
    alive = {kind: [r for r in refs if r() is not None] for kind, refs in held.refs.items()}
    alive = {kind: refs for kind, refs in alive.items() if refs}
    if alive:
        kind = next(k for k in ("agent", "chat", *alive) if k in alive)
        target = alive[kind][0]()
        chain = referrer_chain(target, [alive, held.refs])
        pytest.fail(f"still alive after the session ended: {sorted(alive)}\n  {chain}")


# --------------------------------------------------------------------------- scenarios


SCENARIOS = ["never_chatted", "tool_call", "approval_waiting", "mid_stream"]


async def drive(client: ShinyClient, held: Held, scenario: str, messages: dict[str, str]) -> None:
    """Bring the session to ``scenario``'s state and check that it got there."""
    if scenario == "never_chatted":
        assert held.one("agent").usage().requests == 0
        return
    await client.send_chat(messages[scenario])
    if scenario == "tool_call":
        await client.until(chat_action("chunk_end"))
        agent = held.one("agent")
        assert agent.usage().tool_calls == 1
        assert not agent.running
    elif scenario == "approval_waiting":
        await client.until(modal_shown)
        # A live approval waits inside the run; with the reference app's persistence,
        # the run paused and the approval waits on disk while its modal is shown.
        agent = held.one("agent")
        assert agent.running or agent.pending_approval() is not None
    elif scenario == "mid_stream":
        await client.until(chat_action("chunk"))
        assert held.one("agent").running


async def check_release(
    app: App, held: Held, chat_input: str, scenario: str, messages: dict[str, str]
) -> None:
    async with serve(app) as port:
        baseline = asyncio.all_tasks()
        async with open_session(port, chat_input) as client:
            await drive(client, held, scenario, messages)
            for kind in ("session", "agent", "chat", "chat_session"):
                assert held.one(kind) is not None  # alive while the session is open
        await wait_idle(baseline)
        assert_released(held)


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_minimal_app_session_frees_its_objects(held: Held, scenario: str) -> None:
    messages = {"tool_call": "tool", "approval_waiting": "write", "mid_stream": "slow"}
    await check_release(
        minimal_app(held), held, "agent-chat_user_input:shinychat.userInput", scenario, messages
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_reference_app_session_frees_its_objects(
    held: Held, monkeypatch: pytest.MonkeyPatch, scenario: str
) -> None:
    messages = {
        "tool_call": "list files",
        "approval_waiting": "write a note",
        "mid_stream": "hello",  # the first reply: the demo's long introduction
    }
    app = reference_app(held, monkeypatch)
    await check_release(app, held, "chat-chat_user_input:shinychat.userInput", scenario, messages)


# --------------------------------------------------------------------------- without the collector

# Shiny's session (its outputs, effects, values) and shinychat's Chat are reference
# cycles of theirs, freed only by a full collection, which with litellm's start-up heap
# runs every 15-25 s under load and walks ~0.5 s. What the kit holds per session (its
# _ChatSession, the Agent, its runs and their litellm streams) must not wait for that:
# at session end the kit cuts its own edges from Shiny's objects, so reference counting
# frees them as the cleanup finishes (rather than ended sessions piling up beside the
# live ones, and every collection running their finalizers).
APP_INPUTS = {
    "minimal": ("agent-chat_user_input:shinychat.userInput", "tool"),
    "reference": ("chat-chat_user_input:shinychat.userInput", "list files"),
}


@pytest.mark.parametrize("app_name", sorted(APP_INPUTS))
async def test_an_ended_session_is_freed_without_the_collector(
    held: Held, monkeypatch: pytest.MonkeyPatch, app_name: str
) -> None:
    chat_input, text = APP_INPUTS[app_name]
    app = minimal_app(held) if app_name == "minimal" else reference_app(held, monkeypatch)
    async with serve(app) as port:
        baseline = asyncio.all_tasks()
        warm_up_in_background().join()  # its one full collection would hide a cycle
        gc.collect()
        gc.disable()
        try:
            async with open_session(port, chat_input) as client:
                await drive(client, held, "tool_call", {"tool_call": text})
                assert held.one("chat_session") is not None
            await wait_idle(baseline)
            alive = sorted(
                kind
                for kind in ("agent", "chat_session")
                for ref in held.refs[kind]
                if ref() is not None
            )
        finally:
            gc.enable()
    assert alive == [], f"left for the garbage collector: {alive}"
