"""The kit picks up a reply whose process died (``_session_resume``), without a browser.

A process that dies mid-reply is simulated in one process: the first session's second
model request fails, and its run's journal never writes its end and stops renewing the
run's lease (as a killed process would), and its conversation is never saved (a killed
process saves nothing); the session ends. The next session of the same user opens the
conversation while the dead run's lease is still held (``LEASE_TTL`` is 6 s here), shows
what the journal holds, waits for the lease to lapse and resumes the run. The user's
Stop and a new message during that wait have the outcomes the guide documents.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, Permissions, tool, tool_annotations
from deputy_shiny.persistence import run_journal
from deputy_shiny.persistence.run_journal import RUN_KIND, StoreRunJournal
from deputy_shiny.shiny import AgentChatContext, KitPersistence
from deputy_shiny.shiny._chat_session import BUSY_MESSAGE
from deputy_shiny.shiny._session_resume import find_run
from deputy_shiny.shiny._strings import DEFAULT_STRINGS
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from tests.test_chat_session import Kit, cards, restored, start, wait_until

RESUMING = DEFAULT_STRINGS.run_resuming


@pytest.fixture
def persistence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(run_journal, "LEASE_TTL", 6.0)
    made = KitPersistence(
        tmp_path / "saved",
        trust_user_header=True,
        store=f"sqlite+aiosqlite:///{tmp_path / 'store.db'}",
    )
    yield made
    made.close()


def factory(ledger: list[str], reply: Any) -> Any:
    def record_step(step: str) -> str:
        "Record a step (not safe to repeat)."
        ledger.append(step)
        return f"recorded {step}"

    def make(ctx: AgentChatContext) -> Agent:
        return Agent(
            FunctionModel(reply),
            tools=[tool(record_step, annotations=tool_annotations(open_world_hint=False))],
            permissions=Permissions(tool_allowlist=("record_step",)),
            **ctx.agent_options(),
        )

    return make


def dying_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if messages[-1]["role"] == "tool":
        raise ConnectionError("the process dies here")
    return ScriptedReply(
        text="Recording. ", tool_calls=[ScriptedToolCall("record_step", {"step": "one"})]
    )


def finishing_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if messages[-1]["role"] == "tool":
        return "The rest of the reply."
    return f"You said: {messages[-1]['content']}"


async def died_mid_reply(
    tmp_path: Path, persistence: KitPersistence, ledger: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first session whose run dies after its tool ran, before its reply."""
    died = asyncio.Event()

    async def killed(self: StoreRunJournal, stop_reason: str) -> None:
        # What a SIGKILL leaves: no end written, the lease no longer renewed.
        self._ended = True
        if self._renewer is not None:
            self._renewer.cancel()
        died.set()

    with monkeypatch.context() as patch:
        patch.setattr(StoreRunJournal, "end", killed)
        first = start(tmp_path, factory(ledger, dying_reply), persistence=persistence)
        await restored(first)
        assert first.session.conversation is not None

        async def nothing(agent: Agent) -> None:
            return None

        patch.setattr(first.session.conversation, "save", nothing)  # a dead process saves nothing
        await first.session.submit("go")
        await asyncio.wait_for(died.wait(), 60)
        await first.chat.settled()
        await first.session.end()
    assert ledger == ["one"]


def resuming_note_shown(kit: Kit) -> bool:
    return any(RESUMING in m.plain for m in kit.chat.messages)


async def reopened_while_held(
    tmp_path: Path, persistence: KitPersistence, ledger: list[str], monkeypatch: pytest.MonkeyPatch
) -> Kit:
    """The next session, once it shows the note of a reply it waits to pick up."""
    await died_mid_reply(tmp_path, persistence, ledger, monkeypatch)
    second = start(tmp_path, factory(ledger, finishing_reply), persistence=persistence)
    await wait_until(lambda: resuming_note_shown(second), within=10)  # its lease is held yet
    return second


async def test_a_reply_whose_process_died_goes_on_in_the_next_session(
    tmp_path: Path, persistence: KitPersistence, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger: list[str] = []
    second = await reopened_while_held(tmp_path, persistence, ledger, monkeypatch)
    await restored(second)
    await second.chat.settled()
    user, reply = second.chat.messages
    assert (user.role, user.plain) == ("user", "go")
    # The journal's part (its text and the tool's card), the note, then the rest, live.
    assert reply.plain.startswith("Recording. ") and reply.plain.endswith("The rest of the reply.")
    assert cards(reply) == [("tool_request", "record_step"), ("tool_result", "success")]
    assert ledger == ["one"]  # replayed from the journal, not run again
    turns = second.agent.get_turns()
    assert [t.role for t in turns] == ["user", "assistant", "user", "assistant"]
    await second.session.end()

    third = start(tmp_path, factory(ledger, finishing_reply), persistence=persistence)
    await restored(third)
    assert [m.role for m in third.chat.messages] == ["user", "assistant"]  # saved whole
    assert third.chat.messages[1].plain.endswith("The rest of the reply.")
    assert await find_run(third.agent) is None and not third.session.streams
    await third.session.end()


async def test_a_message_sent_while_the_reply_is_picked_up_gets_the_busy_note(
    tmp_path: Path, persistence: KitPersistence, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger: list[str] = []
    second = await reopened_while_held(tmp_path, persistence, ledger, monkeypatch)
    await second.session.submit("hello?")
    assert second.chat.said()[-1] == ("assistant", BUSY_MESSAGE)
    await restored(second)
    await second.chat.settled()
    assert second.chat.messages[1].plain.endswith("The rest of the reply.")
    # The message was refused, not queued: the model never saw it.
    assert [t.text for t in second.agent.get_turns() if t.role == "user" and t.text] == ["go"]
    await second.session.end()


async def test_stop_while_the_reply_is_picked_up_ends_the_run_keeping_its_journal(
    tmp_path: Path, persistence: KitPersistence, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger: list[str] = []
    second = await reopened_while_held(tmp_path, persistence, ledger, monkeypatch)
    second.session.stop()
    await restored(second)
    await second.chat.settled()
    reply = second.chat.messages[1]
    assert "The rest of the reply." not in reply.plain and ledger == ["one"]
    # Ended, never to be resumed; the conversation keeps what was journaled.
    assert await find_run(second.agent) is None
    store = persistence_store(second)
    runs = await store.list_records(RUN_KIND)
    assert [r.status for r in runs] == ["stopped"]
    turns = second.agent.get_turns()
    assert [t.role for t in turns][:3] == ["user", "assistant", "user"]
    assert turns[2].contents[0].output == "recorded one"  # type: ignore[union-attr]
    await second.session.end()


def persistence_store(kit: Kit) -> Any:
    store = kit.agent.store
    assert store is not None
    return store
