"""The kit's chat session (``_ChatSession``) without a browser or a Shiny server.

Each test builds one browser session's state as ``agent_chat_server`` does (the real
start helpers, the real modal queue, a real Agent on a ``ScriptedModel`` through
litellm), with fakes only where Shiny would be: the chat (it records what the chat
would show), the handle's reactive values (it records what they were set to) and the
Shiny session (it records the modals shown and the prompts' keys the kit's script would
get). Then it drives the transitions and checks the state and the chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from shiny import reactive

from deputy_shiny import Agent, Permissions
from deputy_shiny.events import AgentUsage
from deputy_shiny.persistence.approvals import approval_read
from deputy_shiny.shiny import KitPersistence, _session_conversation
from deputy_shiny.shiny._chat_session import BUSY_MESSAGE, _ChatSession
from deputy_shiny.shiny._chat_start import (
    AgentChatContext,
    chat_context,
    make_agent,
    new_workspace,
    open_conversation,
)
from deputy_shiny.shiny._mcp_session import SessionMcp
from deputy_shiny.shiny._prompts import PromptClosed, SessionPrompts
from deputy_shiny.shiny._session_asks import SessionAsks
from deputy_shiny.shiny._session_budget import session_budget
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file, tools_interactive
from tests.helpers import local_tool
from tests.helpers import wait_until as _wait_until


async def wait_until(predicate: Callable[[], bool], within: float = 60.0) -> None:
    """Generous: the first model request of the process imports litellm."""
    await _wait_until(predicate, within)


# --------------------------------------------------------------------------- fakes


@dataclass
class Shown:
    """One chat message as the browser would show it."""

    role: str
    text: str = ""
    blocks: list[dict[str, Any]] = field(default_factory=list)

    async def append(self, chunk: Any) -> None:  # a message stream's append
        self.add(chunk)

    def add(self, chunk: Any) -> None:
        if isinstance(chunk, str):
            self.text += chunk
        else:  # a shinychat ChatMessage carrying tool-card blocks
            self.text += str(chunk.content or "")
            self.blocks.extend(chunk.blocks or [])

    @property
    def plain(self) -> str:
        """The text without markdown escapes (the kit escapes its own notes)."""
        return self.text.replace("\\", "")


class FakeChat:
    """What ``_ChatSession`` uses of shinychat's Chat, recording what it would show."""

    def __init__(self) -> None:
        self.messages: list[Shown] = []
        self.streams: list[asyncio.Task[None]] = []
        self.input_updates: list[dict[str, Any]] = []

    async def append_message(self, message: Any) -> None:
        if isinstance(message, dict):
            self.messages.append(Shown(message["role"], str(message["content"])))
        else:
            self.messages.append(Shown("assistant", str(message)))

    async def append_message_stream(self, message: AsyncIterable[Any]) -> None:
        # As shinychat: the stream runs in a task of its own, and this returns at once.
        self.streams.append(asyncio.ensure_future(self._consume(message)))

    async def _consume(self, message: AsyncIterable[Any]) -> None:
        shown = Shown("assistant")
        self.messages.append(shown)
        async for chunk in message:
            shown.add(chunk)

    @contextlib.asynccontextmanager
    async def message_stream_context(self) -> AsyncIterator[Shown]:
        shown = Shown("assistant")
        self.messages.append(shown)
        yield shown

    def update_user_input(
        self,
        *,
        value: str | None = None,
        placeholder: str | None = None,
        submit: bool = False,
        focus: bool = False,
    ) -> None:
        update = {"value": value, "placeholder": placeholder, "submit": submit, "focus": focus}
        self.input_updates.append(update)

    async def settled(self) -> None:
        """Wait for every stream started so far (and any they start)."""
        while pending := [task for task in self.streams if not task.done()]:
            # As generous as wait_until: a first stream of the process imports litellm,
            # over 20 s on a loaded 2-core machine.
            await asyncio.wait_for(asyncio.gather(*pending), 60)
        for task in self.streams:
            task.result()  # a stream that raised fails the test

    def said(self) -> list[tuple[str, str]]:
        return [(m.role, m.plain) for m in self.messages]


@dataclass
class FakeValues:
    """The handle's reactive values: every value they were set to, in order."""

    running: list[bool] = field(default_factory=list)
    usage: list[AgentUsage] = field(default_factory=list)
    tool_events: list[int] = field(default_factory=list)
    budget: list[str] = field(default_factory=list)

    async def set_running(self, running: bool) -> None:
        self.running.append(running)

    async def set_usage(self, usage: AgentUsage) -> None:
        self.usage.append(usage)

    async def set_tool_events(self, count: int) -> None:
        self.tool_events.append(count)

    async def set_budget(self, line: str) -> None:
        self.budget.append(line)


class _Connection:
    headers: dict[str, str] = {}  # noqa: RUF012


class FakeBrowser:
    """What the kit uses of a Shiny session: it records the modals shown, the prompts'
    keys (what the kit's script keeps) and whether it was closed."""

    _count = 0

    def __init__(self, user: str | None = None) -> None:
        FakeBrowser._count += 1
        self.id = f"session-{FakeBrowser._count}"
        self.ns = ""
        self.user = user
        self.http_conn = _Connection()
        self.modals: list[str] = []
        self.keys: dict[str, str] = {}
        self.closed = False

    def root_scope(self) -> FakeBrowser:
        return self

    def on_ended(self, callback: Any) -> None:
        pass

    def _process_ui(self, ui: object) -> str:
        return str(ui)

    def _send_message_sync(self, message: dict[str, Any]) -> None:
        if message["modal"]["type"] == "show":
            self.modals.append(str(message["modal"]["message"]))

    async def send_custom_message(self, kind: str, message: dict[str, str]) -> None:
        if kind == "deputy-prompt-key":
            self.keys[message["request_id"]] = message["key"]

    async def close(self) -> None:
        self.closed = True


# --------------------------------------------------------------------------- a session


@dataclass
class Kit:
    """One browser session's chat, as ``agent_chat_server`` builds it."""

    session: _ChatSession
    chat: FakeChat
    values: FakeValues
    browser: FakeBrowser

    @property
    def agent(self) -> Agent:
        return self.session.agent

    @property
    def prompts(self) -> SessionPrompts:
        return self.session.prompts

    def click(self, action: str, **fields: Any) -> bool:
        """The user clicks ``action`` in the modal on screen (a real click: its key)."""
        request_id = self.prompts.showing
        assert request_id is not None, "no modal on screen"
        key = self.browser.keys[request_id]
        answer = {"request_id": request_id, "action": action, "key": key, **fields}
        return self.prompts.answer(answer)


Factory = Callable[[AgentChatContext], Agent]


def start(
    tmp_path: Path,
    factory: Factory,
    *,
    persistence: KitPersistence | None = None,
    user: str | None = "alice",
    keep_workspace: bool = False,
    wait_seconds: float | None = None,
) -> Kit:
    browser = FakeBrowser(user)
    prompts = SessionPrompts(browser)  # type: ignore[arg-type]
    asks = SessionAsks(prompts, wait_seconds)
    conversation, not_saved = open_conversation(persistence, browser)  # type: ignore[arg-type]
    if conversation is not None:
        working_dir = conversation.folder.workspace
    else:
        working_dir = new_workspace(tmp_path / "workspaces")
    mcp = SessionMcp(None)
    ctx = chat_context(browser, working_dir, asks, mcp, conversation)  # type: ignore[arg-type]
    agent = make_agent(factory, ctx, persistent=conversation is not None)
    chat, values = FakeChat(), FakeValues()
    session = _ChatSession(
        agent=agent,
        chat=chat,
        values=values,
        asks=asks,
        mcp=mcp,
        conversation=conversation,
        working_dir=working_dir,
        budget=session_budget(persistence, browser, conversation),  # type: ignore[arg-type]
        keep_workspace=keep_workspace,
        close_session=browser.close,
    )
    session.start((), not_saved)
    return Kit(session, chat, values, browser)


WRITE = ScriptedToolCall("write_file", {"path": "a.txt", "content": "A"})


def approving_agent(replies: list[Any]) -> Factory:
    """Agents that write files, each write approved by the user (a live approval)."""

    def factory(ctx: AgentChatContext) -> Agent:
        return Agent(
            ScriptedModel(list(replies)),
            tools=[tool_write_file()],
            working_dir=ctx.working_dir,
            approval_handler=ctx.approval_handler,
            permissions=Permissions(approval_tools=("write_file",)),
        )

    return factory


def persistent_agent(replies: list[Any]) -> Factory:
    """Agents of a saved conversation: approvals wait durably, in the user's folder."""

    def factory(ctx: AgentChatContext) -> Agent:
        return Agent(
            ScriptedModel(list(replies)),
            tools=[tool_write_file()],
            working_dir=ctx.working_dir,
            session_id=ctx.session_id,
            agent_id=ctx.agent_id,
            approval_dir=ctx.approval_dir,
            store=ctx.store,
            approval_handler=ctx.approval_handler,
            permissions=Permissions(approval_tools=("write_file",)),
        )

    return factory


def options_agent(replies: list[Any]) -> Factory:
    """As ``persistent_agent``, with what the session owns passed as ``ctx.agent_options``."""

    def factory(ctx: AgentChatContext) -> Agent:
        return Agent(
            ScriptedModel(list(replies)),
            tools=[tool_write_file()],
            permissions=Permissions(approval_tools=("write_file",)),
            **ctx.agent_options(file_checkpointing=True),
        )

    return factory


def pending(kit: Kit) -> int:
    """The handle's ``pending_approvals`` as a reactive read would see it."""
    with reactive.isolate():
        return kit.prompts.pending()


def cards(shown: Shown) -> list[tuple[str, str]]:
    """The tool cards' blocks of a message: (type, status or tool name)."""
    return [(b["type"], b.get("status") or b["tool_name"]) for b in shown.blocks]


# --------------------------------------------------------------------------- runs


async def test_a_message_streams_its_run_into_the_chat(tmp_path: Path) -> None:
    kit = start(tmp_path, approving_agent(["Hello from the model."]))
    await kit.session.submit("hi")
    assert kit.session.streams == 0  # the stream runs in a task of its own, as in shinychat
    await kit.chat.settled()
    assert kit.chat.said() == [("assistant", "Hello from the model.")]
    assert kit.values.running == [True, False]
    assert kit.values.usage[-1].requests == 1
    assert kit.session.streams == 0 and not kit.agent.running
    assert [t.role for t in kit.agent.get_turns()] == ["user", "assistant"]


async def test_a_second_message_while_running_is_refused_not_queued(tmp_path: Path) -> None:
    slow = ScriptedReply(" ".join(f"w{i:03d}" for i in range(400)), chunk_size=4, delay=0.01)
    kit = start(tmp_path, approving_agent([slow, "second reply"]))
    await kit.session.submit("first")
    await wait_until(lambda: kit.session.streams == 1)
    await kit.session.submit("second")
    assert kit.chat.said()[-1] == ("assistant", BUSY_MESSAGE)
    kit.session.stop()
    await kit.chat.settled()
    # Only the first message ran; the second was told to wait, and never ran later.
    user_turns = [t for t in kit.agent.get_turns() if t.role == "user"]
    assert [t.text for t in user_turns] == ["first"]
    assert len(kit.chat.streams) == 1


async def test_stop_interrupts_the_run_mid_stream(tmp_path: Path) -> None:
    words = " ".join(f"word{i:04d}" for i in range(500))
    kit = start(tmp_path, approving_agent([ScriptedReply(words, chunk_size=9, delay=0.01)]))
    await kit.session.submit("go")
    await wait_until(lambda: bool(kit.chat.messages) and "word0003" in kit.chat.messages[0].text)
    kit.session.stop()
    await kit.chat.settled()
    reply = kit.chat.messages[0].plain
    # No note of the kit's: shinychat marks the reply "Response cancelled" itself.
    assert "Stopped" not in reply and ">" not in reply
    assert "word0499" not in reply  # it stopped before the end
    assert not kit.agent.running and kit.values.running[-1] is False


async def slow_lookup(seconds: float) -> str:
    """Wait, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


def slow_tool_agent(ctx: AgentChatContext) -> Agent:
    calls = [ScriptedToolCall("slow_lookup", {"seconds": 30}, id="slow")]
    return Agent(
        ScriptedModel([ScriptedReply("Looking.", tool_calls=calls), "never"]),
        tools=[local_tool(slow_lookup)],
        working_dir=ctx.working_dir,
        approval_handler=ctx.approval_handler,
    )


async def test_stop_during_a_tool_resolves_its_card_as_stopped(tmp_path: Path) -> None:
    kit = start(tmp_path, slow_tool_agent)
    await kit.session.submit("look it up")
    await wait_until(lambda: bool(kit.chat.messages) and bool(kit.chat.messages[0].blocks))
    kit.session.stop()
    await kit.chat.settled()
    [reply] = kit.chat.messages
    # The card no longer spins: its request has a result, and it says it was stopped.
    assert cards(reply) == [("tool_request", "slow_lookup"), ("tool_result", "error")]
    request, result = reply.blocks
    assert result["request_id"] == request["request_id"]
    assert result["value"].startswith("Stopped")
    assert result["title"] == "Stopped: slow_lookup"
    assert reply.plain.strip() == "Looking."  # one stop line: shinychat's, not the kit's
    assert not kit.agent.running and kit.values.running[-1] is False


async def test_a_run_interrupted_otherwise_still_says_stopped(tmp_path: Path) -> None:
    kit = start(tmp_path, slow_tool_agent)
    await kit.session.submit("look it up")
    await wait_until(lambda: bool(kit.chat.messages) and bool(kit.chat.messages[0].blocks))
    kit.agent.interrupt()  # not the stop button: shinychat shows nothing, so the kit does
    await kit.chat.settled()
    [reply] = kit.chat.messages
    assert cards(reply) == [("tool_request", "slow_lookup"), ("tool_result", "error")]
    assert reply.plain.rstrip().endswith("> Stopped.")


# --------------------------------------------------------------------------- approvals


async def test_an_approved_call_runs_and_its_card_shows(tmp_path: Path) -> None:
    kit = start(tmp_path, approving_agent([ScriptedReply(tool_calls=[WRITE]), "Written."]))
    await kit.session.submit("write it")
    await wait_until(lambda: kit.prompts.showing is not None)
    assert "write_file" in kit.browser.modals[-1] and pending(kit) == 1
    assert not (kit.session.working_dir / "a.txt").exists()  # nothing runs before approval
    assert kit.click("approve", values={})
    await kit.chat.settled()
    assert (kit.session.working_dir / "a.txt").read_text() == "A"
    [reply] = kit.chat.messages
    assert cards(reply) == [("tool_request", "write_file"), ("tool_result", "success")]
    assert reply.plain.endswith("Written.")
    await wait_until(lambda: kit.values.tool_events == [1])  # views of the workspace refresh
    assert kit.prompts.showing is None and pending(kit) == 0


async def test_a_denied_call_does_not_run_and_shows_as_denied(tmp_path: Path) -> None:
    kit = start(tmp_path, approving_agent([ScriptedReply(tool_calls=[WRITE]), "Fine."]))
    await kit.session.submit("write it")
    await wait_until(lambda: kit.prompts.showing is not None)
    assert kit.click("deny", message="not <b>now</b>")
    await kit.chat.settled()
    assert not (kit.session.working_dir / "a.txt").exists()
    [reply] = kit.chat.messages
    result = reply.blocks[-1]
    assert result["type"] == "tool_result" and result["status"] == "error"
    assert result["title"].startswith("Denied: ") and "<b>" not in result["title"]  # escaped
    assert "not &lt;b&gt;now" in result["title"]


async def test_a_decision_for_an_unknown_or_another_sessions_prompt_is_refused(
    tmp_path: Path,
) -> None:
    one = start(tmp_path / "one", approving_agent([ScriptedReply(tool_calls=[WRITE]), "1"]))
    two = start(tmp_path / "two", approving_agent([ScriptedReply(tool_calls=[WRITE]), "2"]))
    await one.session.submit("write")
    await two.session.submit("write")
    await wait_until(lambda: None not in (one.prompts.showing, two.prompts.showing))
    mine, theirs = one.prompts.showing, two.prompts.showing
    assert mine != theirs and len(str(mine)) >= 20  # per session, unguessable
    forged = [
        {"request_id": theirs, "action": "approve", "key": two.browser.keys[str(theirs)]},
        {"request_id": "not-a-prompt", "action": "approve", "key": one.browser.keys[str(mine)]},
        {"request_id": mine, "action": "approve"},  # the id read from the page, no key
        {"request_id": mine, "action": "approve", "key": two.browser.keys[str(theirs)]},
    ]
    assert [one.prompts.answer(answer) for answer in forged] == [False] * 4
    await asyncio.sleep(0.05)
    assert one.prompts.showing == mine and two.prompts.showing == theirs  # still waiting
    assert not (one.session.working_dir / "a.txt").exists()
    assert one.click("approve", values={}) and two.click("deny")
    await one.chat.settled()
    await two.chat.settled()
    assert (one.session.working_dir / "a.txt").exists()
    assert not (two.session.working_dir / "a.txt").exists()


async def test_a_question_is_answered_in_a_modal(tmp_path: Path) -> None:
    question = {
        "header": "Colour",
        "question": "Which colour?",
        "options": [{"label": "red", "description": "Red"}, {"label": "blue", "description": ""}],
        "multi_select": False,
    }
    asked = ScriptedToolCall("ask_user", {"questions": [question]})
    model = ScriptedModel([ScriptedReply(tool_calls=[asked]), "Blue it is."])

    def factory(ctx: AgentChatContext) -> Agent:
        tools = tools_interactive(callback=ctx.ask_user)
        return Agent(model, tools=tools, working_dir=ctx.working_dir)

    kit = start(tmp_path, factory)
    await kit.session.submit("pick one")
    await wait_until(lambda: kit.prompts.showing is not None)
    assert "Which colour?" in kit.browser.modals[-1]
    assert kit.click("submit", answers=[["blue"]])
    await kit.chat.settled()
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "blue" in tool_message["content"]
    assert kit.chat.messages[0].plain.endswith("Blue it is.")


# --------------------------------------------------------------------------- end


async def test_end_interrupts_denies_what_waits_and_releases_agent_and_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kit = start(tmp_path, approving_agent([ScriptedReply(tool_calls=[WRITE]), "After."]))
    released: list[str] = []

    async def agent_closed() -> None:
        released.append("agent")

    async def mcp_closed() -> None:
        released.append("mcp")

    monkeypatch.setattr(kit.agent, "aclose", agent_closed)
    monkeypatch.setattr(kit.session.mcp, "aclose", mcp_closed)
    await kit.session.submit("write it")
    await wait_until(lambda: kit.prompts.showing is not None)
    workspace = kit.session.working_dir
    assert workspace.is_dir()
    await kit.session.end()
    await kit.chat.settled()
    assert released == ["mcp", "agent"]
    assert not workspace.exists() and not kit.agent.running
    assert not (tmp_path / "workspaces" / "a.txt").exists()
    # Interrupted first, so the chat says it stopped; the call was denied, never run.
    assert kit.chat.said() == [("assistant", "\n\n> Stopped.\n")]
    [result] = [r for t in kit.agent.get_turns() for r in t.tool_results]
    assert result.is_error
    with pytest.raises(PromptClosed):  # nothing more can be asked in this session
        await kit.prompts.ask("late", "<p>late</p>", None)  # type: ignore[arg-type]


async def test_end_keeps_the_workspace_when_asked(tmp_path: Path) -> None:
    kit = start(tmp_path, approving_agent(["hi"]), keep_workspace=True)
    await kit.session.end()
    assert kit.session.working_dir.is_dir()


# --------------------------------------------------------------------------- restore


async def restored(kit: Kit) -> None:
    """Wait until the session's restore (a background task) has finished."""
    assert kit.session.conversation is not None
    await asyncio.wait_for(kit.session.conversation.ready.wait(), 10)
    await asyncio.wait_for(asyncio.gather(*kit.session.background), 10)


async def test_a_saved_conversation_comes_back_on_reload(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path / "saved", trust_user_header=True)
    first = start(tmp_path, persistent_agent(["hello there"]), persistence=persistence)
    await restored(first)  # nothing saved yet: an empty chat
    assert first.chat.said() == []
    await first.session.submit("hi")
    await first.chat.settled()
    await first.session.end()

    second = start(tmp_path, persistent_agent([]), persistence=persistence)
    await restored(second)
    assert second.chat.said() == [("user", "hi"), ("assistant", "hello there")]
    assert second.values.usage[-1].requests == 1 and second.values.tool_events == [-1]
    assert not second.session.restored_waiting and second.prompts.showing is None
    await second.session.end()
    assert _session_conversation._in_use == {}  # both let go of the folder


async def test_a_waiting_approval_comes_back_on_reload_and_is_decided_once(
    tmp_path: Path,
) -> None:
    persistence = KitPersistence(tmp_path / "saved", trust_user_header=True)
    first = start(
        tmp_path, persistent_agent([ScriptedReply(tool_calls=[WRITE])]), persistence=persistence
    )
    await restored(first)
    await first.session.submit("write it")
    await wait_until(lambda: first.prompts.showing is not None)
    await first.session.end()  # the browser leaves with the approval on screen
    await first.chat.settled()
    folder = first.session.conversation.folder  # type: ignore[union-attr]
    assert not (folder.workspace / "a.txt").exists()

    second = start(tmp_path, persistent_agent(["written"]), persistence=persistence)
    await wait_until(lambda: second.prompts.showing is not None, within=10)
    assert second.session.restored_waiting
    # The transcript (the user's message; the waiting call's card is held back), then
    # the approval's own stream, which the resumed run continues.
    assert [m.role for m in second.chat.messages] == ["user", "assistant"]
    assert second.chat.messages[0].text == "write it" and cards(second.chat.messages[1]) == []
    assert "write_file" in second.browser.modals[-1]
    await second.session.submit("something else")  # the approval is decided first
    assert second.chat.said()[-1] == ("assistant", BUSY_MESSAGE)
    assert second.click("approve", values={})
    await second.chat.settled()
    assert (folder.workspace / "a.txt").read_text() == "A"
    resumed = second.chat.messages[1]
    assert resumed.plain.endswith("written") and ("tool_result", "success") in cards(resumed)
    assert not second.session.restored_waiting and second.agent.pending_approval() is None
    await second.session.end()


async def test_stop_while_a_durable_approval_waits_closes_it_as_stopped(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path / "saved", trust_user_header=True)
    replies = [ScriptedReply(tool_calls=[WRITE]), "never asked", "You said hi."]
    kit = start(tmp_path, persistent_agent(replies), persistence=persistence)
    await restored(kit)
    await kit.session.submit("write it")
    await wait_until(lambda: kit.prompts.showing is not None)
    # The run paused and ended: the approval waits outside it, durably.
    assert not kit.agent.running and kit.session.streams == 1
    saved = kit.agent.pending_approval()
    assert saved is not None
    kit.session.stop()
    await kit.chat.settled()
    # The modal closed, the stream ended (the composer is free), the call never ran,
    # and its record is closed as stopped: nothing is left pending for a reload.
    assert kit.prompts.showing is None and pending(kit) == 0
    assert kit.session.streams == 0 and kit.values.running[-1] is False
    assert not (kit.session.working_dir / "a.txt").exists()
    assert approval_read(saved.source.path).status == "stopped"
    assert kit.agent.pending_approval() is None and await kit.session.current_pending() is None
    assert kit.agent.usage().requests == 1  # stopped: no further request
    # The next message runs.
    await kit.session.submit("hi")
    await kit.chat.settled()
    assert kit.chat.said()[-1] == ("assistant", "never asked")
    await kit.session.end()


async def test_a_stop_before_the_durable_modal_shows_is_not_lost(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path / "saved", trust_user_header=True)
    kit = start(
        tmp_path, persistent_agent([ScriptedReply(tool_calls=[WRITE])]), persistence=persistence
    )
    await restored(kit)
    # The run pauses; the stop comes before the kit puts the approval to the user.
    async for _ in kit.agent.run("write it"):
        pass
    saved = kit.agent.pending_approval()
    assert saved is not None
    kit.session.stop()
    events = await asyncio.wait_for(kit.session.decide_pending(), 10)
    assert events is not None and kit.browser.modals == []  # never shown
    async for _ in events:
        pass
    assert approval_read(saved.source.path).status == "stopped"
    assert not (kit.session.working_dir / "a.txt").exists()
    await kit.session.end()


async def test_stop_ends_only_its_own_chats_prompts(tmp_path: Path) -> None:
    browser = FakeBrowser()
    prompts = SessionPrompts(browser)  # type: ignore[arg-type]
    mine, other = SessionAsks(prompts, None, "mine"), SessionAsks(prompts, None, "other")
    theirs = asyncio.ensure_future(other.prompts.ask("theirs", "<p>theirs</p>", None))  # type: ignore[arg-type]
    asked = asyncio.ensure_future(mine._ask("m1", lambda waiting: "<p>m1</p>", "run"))  # type: ignore[arg-type,return-value]
    await wait_until(lambda: len(prompts._queue) == 1)
    assert mine.waiting == {"m1"} and prompts.showing == "theirs"
    assert mine.stop() == 1
    assert await asked == {"action": "stop", "request_id": "m1"}
    assert mine.waiting == set() and mine.stop() == 0
    assert not theirs.done() and prompts.showing == "theirs"  # the other chat's still waits
    prompts.close()
    with pytest.raises(PromptClosed):
        await theirs


async def test_agent_options_alone_bring_a_conversation_and_its_files_back(
    tmp_path: Path,
) -> None:
    persistence = KitPersistence(tmp_path / "saved", trust_user_header=True)
    first = start(
        tmp_path,
        options_agent([ScriptedReply(tool_calls=[WRITE]), "Written."]),
        persistence=persistence,
    )
    await restored(first)
    await first.session.submit("write it")
    await wait_until(lambda: first.prompts.showing is not None)  # a durable approval
    assert first.agent.approval_handler is None and first.agent.pending_approval() is not None
    assert first.click("approve", values={})
    await first.chat.settled()
    await first.session.end()
    folder = first.session.conversation.folder  # type: ignore[union-attr]
    assert (folder.workspace / "a.txt").read_text() == "A"
    assert (folder.checkpoints / "index.json").is_file()  # the journal is the user's

    second = start(tmp_path, options_agent([]), persistence=persistence)
    await restored(second)
    assert second.chat.said()[0] == ("user", "write it")
    assert second.chat.said()[-1][1].endswith("Written.")
    assert (second.agent.agent_id, second.agent.session_id) == (folder.agent_id, folder.session_id)
    # The run's checkpoints came back from the user's journal: the write can be undone.
    checkpoints = second.agent.list_checkpoints()
    assert sum(c.changes for c in checkpoints) == 1
    second.agent.rewind_files(checkpoints[0].id)
    assert not (folder.workspace / "a.txt").exists()
    await second.session.end()


async def test_an_older_window_is_closed_when_a_newer_takes_the_conversation(
    tmp_path: Path,
) -> None:
    persistence = KitPersistence(tmp_path / "saved", trust_user_header=True)
    older = start(tmp_path, persistent_agent([]), persistence=persistence)
    await restored(older)

    async def closing() -> None:  # what Shiny does: closing the session ends it
        older.browser.closed = True
        await older.session.end()

    older.session._close_session = closing
    newer = start(tmp_path, persistent_agent([]), persistence=persistence)
    await restored(newer)
    assert older.browser.closed and newer.session.conversation is not None
    assert newer.session.conversation.usable
    assert re.search("continues there", older.chat.said()[-1][1])
    await newer.session.end()
