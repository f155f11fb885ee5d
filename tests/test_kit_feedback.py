"""The kit's side of feedback (shiny/_feedback.py), without a browser: a session's runs
become replies that may be rated, a rating is checked (a forged one is refused and
stored nowhere), stored per user, handed to ``on_feedback`` callbacks and traced; the
sweep keeps the ratings; the command reads what the kit stored in files."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deputy_shiny import Agent
from deputy_shiny.cli import main as deputy
from deputy_shiny.feedback import FeedbackRecord, load_feedback, save_feedback
from deputy_shiny.persistence import FileStore
from deputy_shiny.shiny import KitPersistence
from deputy_shiny.shiny import _feedback as feedback_module
from deputy_shiny.shiny._conversations import kit_store
from deputy_shiny.shiny._feedback import (
    FEEDBACK_REPLY_MESSAGE,
    FEEDBACK_SAVED_MESSAGE,
    FeedbackIdentity,
    SessionFeedback,
    feedback_identity,
)
from deputy_shiny.shiny._kit_store import KitStore
from deputy_shiny.shiny._stored_conversations import sweep_store
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_list_files
from tests.test_chat_session import Kit, start, wait_until
from tests.test_kit_conversations import FakeSession
from tests.test_secrets_out import spans  # noqa: F401 - the tracing fixture, shared

KEY = "ab" * 32


class Browser:
    """Where a SessionFeedback sends its messages (the kit's script)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def send(self, kind: str, message: dict[str, Any]) -> None:
        self.sent.append((kind, message))

    def replies(self) -> list[str]:
        return [m["reply"] for kind, m in self.sent if kind == FEEDBACK_REPLY_MESSAGE]

    def saved(self) -> list[str]:
        return [m["reply"] for kind, m in self.sent if kind == FEEDBACK_SAVED_MESSAGE]


@pytest.fixture
def link(tmp_path: Path) -> Iterator[KitStore]:
    made = KitStore(FileStore(tmp_path / "store", key=KEY))
    yield made
    made.close()


def feedback_for(
    browser: Browser, link: KitStore | None, user: str = "user-alice"
) -> SessionFeedback:
    return SessionFeedback(
        chat="chat",
        identity=FeedbackIdentity(user, "alice"),
        link=link,
        send=browser.send,
        input_id="chat-feedback",
        chat_id="chat-chat",
        agent_id="agent-1",
        session_id="session-1",
    )


def tool_agent(ctx: Any) -> Agent:
    replies: list[str | ScriptedReply] = [
        ScriptedReply(tool_calls=[ScriptedToolCall("list_files", {})], cost=0.01),
        ScriptedReply("There are no files.", cost=0.02),
        "Second answer.",
    ]
    return Agent(
        ScriptedModel(replies),
        tools=[tool_list_files()],
        working_dir=ctx.working_dir,
        approval_handler=ctx.approval_handler,
    )


async def rated_session(
    tmp_path: Path, link: KitStore | None
) -> tuple[Kit, Browser, SessionFeedback]:
    """A session with feedback whose first message ran a tool; its reply's id was sent."""
    kit = start(tmp_path, tool_agent)
    browser = Browser()
    feedback = kit.session.feedback = feedback_for(browser, link)
    await kit.session.submit("What files are there?")
    await kit.chat.settled()
    await wait_until(lambda: len(browser.replies()) == 1)
    return kit, browser, feedback


def stored(link: KitStore) -> list[FeedbackRecord]:
    return link.wait(lambda store: load_feedback(store), timeout=10)


async def test_a_reply_is_rated_with_what_made_it(tmp_path: Path, link: KitStore) -> None:
    kit, browser, feedback = await rated_session(tmp_path, link)
    [reply_id] = browser.replies()
    assert browser.sent[0][1] == {"reply": reply_id, "chat": "chat-chat", "input": "chat-feedback"}
    seen: list[FeedbackRecord] = []
    feedback.on_feedback(seen.append)

    record = feedback.receive({"reply": reply_id, "rating": "down", "comment": "Say more"})
    assert record is not None
    await wait_until(lambda: browser.saved() == [reply_id])
    assert seen == [record]
    [saved] = stored(link)
    assert saved == record
    assert (saved.rating, saved.comment, saved.user_id, saved.user) == (
        "down",
        "Say more",
        "user-alice",
        "alice",
    )
    assert saved.run_id == kit.agent.last_run().run_id  # type: ignore[union-attr]
    assert saved.tools == ["list_files"] and saved.model
    assert saved.usage["requests"] == 2 and saved.cost == pytest.approx(0.03)
    assert saved.prompt == "What files are there?" and saved.reply == "There are no files."
    assert [t["role"] for t in saved.turns] == ["user", "assistant", "user", "assistant"]

    # The next run is a reply of its own; its record holds the conversation up to it.
    await kit.session.submit("And now?")
    await kit.chat.settled()
    await wait_until(lambda: len(browser.replies()) == 2)
    second = feedback.receive({"reply": browser.replies()[1], "rating": "up"})
    assert second is not None and second.reply == "Second answer." and second.tools == []
    assert len(second.turns) == 6 and second.usage["requests"] == 1
    await wait_until(lambda: len(stored(link)) == 2)
    await kit.session.end()


async def test_a_forged_rating_is_refused_and_stored_nowhere(
    tmp_path: Path, link: KitStore, caplog: pytest.LogCaptureFixture
) -> None:
    kit, browser, feedback = await rated_session(tmp_path, link)
    [reply_id] = browser.replies()
    # Another session's reply: its id exists, but not in this session.
    other = feedback_for(Browser(), link, user="user-mallory")
    seen: list[FeedbackRecord] = []
    other.on_feedback(seen.append)
    bad: list[object] = [
        {"reply": "a-reply-that-never-was", "rating": "down"},
        {"reply": reply_id, "rating": "down", "comment": "x" * 2001},
        {"reply": reply_id, "rating": "meh"},
        {"reply": reply_id, "rating": "up", "comment": 5},
        {"reply": reply_id, "rating": "up", "user_id": "user-bob"},
        [reply_id, "up"],
        "up",
    ]
    with caplog.at_level(logging.WARNING, logger="deputy_shiny.shiny._feedback"):
        assert other.receive({"reply": reply_id, "rating": "down"}) is None
        for value in bad:
            assert feedback.receive(value) is None, value
    refused = [r.getMessage() for r in caplog.records if "a rating was refused" in r.message]
    assert len(refused) == 1 + len(bad)
    assert refused[0] == "a rating was refused: no such reply in this session"
    await asyncio.sleep(0.2)
    assert stored(link) == [] and seen == [] and browser.saved() == []
    await kit.session.end()


async def test_a_session_gives_a_bounded_number_of_ratings(
    tmp_path: Path, link: KitStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feedback_module, "MAX_RATINGS", 2)
    kit, browser, feedback = await rated_session(tmp_path, link)
    [reply_id] = browser.replies()
    ratings = [feedback.receive({"reply": reply_id, "rating": r}) for r in ("up", "down", "up")]
    assert [r is not None for r in ratings] == [True, True, False]
    await wait_until(lambda: len(browser.saved()) == 2)
    [record] = stored(link)  # the second rating of a reply replaced the first
    assert record.rating == "down"
    await kit.session.end()


async def test_a_long_conversation_keeps_its_newest_turns(
    tmp_path: Path, link: KitStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feedback_module, "MAX_TURN_CHARS", 300)
    kit, browser, feedback = await rated_session(tmp_path, link)
    record = feedback.receive({"reply": browser.replies()[0], "rating": "up"})
    assert record is not None
    assert 0 < len(record.turns) < 4 and record.truncated_turns == 4 - len(record.turns)
    assert record.turns[-1]["role"] == "assistant"
    assert record.prompt == "What files are there?"  # from the whole conversation
    await kit.session.end()


async def test_callbacks_sync_async_and_failing(tmp_path: Path) -> None:
    kit, browser, feedback = await rated_session(tmp_path, None)  # no store: callbacks only
    got: list[str] = []

    async def later(record: FeedbackRecord) -> None:
        await asyncio.sleep(0)
        got.append("async " + record.rating)

    def broken(record: FeedbackRecord) -> None:
        raise RuntimeError("the app's bug")

    feedback.on_feedback(broken)
    feedback.on_feedback(later)
    stop = feedback.on_feedback(lambda record: got.append("sync " + record.rating))
    feedback.receive({"reply": browser.replies()[0], "rating": "up"})
    await wait_until(lambda: len(got) == 2)
    assert sorted(got) == ["async up", "sync up"]
    stop()
    feedback.receive({"reply": browser.replies()[0], "rating": "down"})
    await wait_until(lambda: len(got) == 3)
    assert got[-1] == "async down"
    await kit.session.end()


async def test_a_run_that_gave_no_reply_cannot_be_rated(tmp_path: Path) -> None:
    kit = start(tmp_path, tool_agent)
    browser = Browser()
    feedback = kit.session.feedback = feedback_for(browser, None)
    assert await feedback.reply_done(kit.agent.get_turns()) is None  # nothing ran
    assert browser.sent == []
    await kit.session.end()


async def test_a_rating_is_a_trace_event_when_tracing_is_on(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    exporter: InMemorySpanExporter = request.getfixturevalue("spans")  # tracing on
    kit, browser, feedback = await rated_session(tmp_path, None)
    feedback.receive({"reply": browser.replies()[0], "rating": "down", "comment": "secret plan"})
    await wait_until(lambda: any(s.name == "feedback" for s in exporter.get_finished_spans()))
    [span] = [s for s in exporter.get_finished_spans() if s.name == "feedback"]
    [event] = span.events
    assert event.name == "gen_ai.evaluation.result"
    attributes = dict(event.attributes or {})
    assert attributes["gen_ai.evaluation.score.label"] == "down"
    assert attributes["gen_ai.evaluation.score.value"] == 0.0
    assert attributes["deputy.feedback.has_comment"] is True
    assert attributes["deputy.run.id"] == kit.agent.last_run().run_id  # type: ignore[union-attr]
    # Never content: neither the comment nor the reply reaches the trace.
    assert "secret plan" not in json.dumps({k: str(v) for k, v in attributes.items()})
    await kit.session.end()


async def test_tracing_off_emits_nothing(tmp_path: Path) -> None:
    from deputy_shiny.observability import feedback_event, tracing

    assert not tracing()
    assert feedback_event({"gen_ai.evaluation.score.label": "up"}) is False


def test_the_rater_is_the_kits_user(tmp_path: Path) -> None:
    signed_in = KitPersistence(tmp_path / "a", trust_user_header=True)
    alice = feedback_identity(signed_in, FakeSession("alice"))  # type: ignore[arg-type]
    assert alice.user == "alice" and alice.user_id.startswith("user-")
    again = feedback_identity(signed_in, FakeSession("alice"))  # type: ignore[arg-type]
    assert again == alice  # the same pseudonym in every session
    # A name the deployment does not vouch for is not taken: anonymous, no name.
    untrusted = KitPersistence(tmp_path / "b", trust_user_header=False, anonymous=False)
    mallory = feedback_identity(untrusted, FakeSession("alice"))  # type: ignore[arg-type]
    assert mallory.user is None and mallory.user_id != alice.user_id


async def test_the_sweep_keeps_the_ratings(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path / "root")
    async with FileStore(tmp_path / "store", key=KEY) as store:
        record = FeedbackRecord(feedback_id="r1", rating="up", user_id="u", chat="chat")
        await save_feedback(store, record)
        await store.put("note", "n1", {"old": True}, scope="an-old-conversation")
        far_future = 10**10
        await sweep_store(persistence, store, set(), far_future)
        assert await store.get("note", "n1") is None  # swept
        assert [r.feedback_id for r in await load_feedback(store)] == ["r1"]  # kept


async def test_ratings_kept_in_files_are_what_the_command_exports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPUTY_RECORD_KEY", KEY)
    persistence = KitPersistence(tmp_path / "root")
    link = kit_store(persistence, local=True)
    assert link is not None and kit_store(persistence) is None  # conversations stay files
    record = FeedbackRecord(feedback_id="r1", rating="down", user_id="u", chat="chat")
    await link.run(lambda store: save_feedback(store, record))
    persistence.close()

    def export() -> tuple[int, str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = deputy(["feedback", "export", "--root", str(tmp_path / "root")])
        return status, out.getvalue()

    status, text = await asyncio.to_thread(export)
    assert status == 0 and json.loads(text)["feedback_id"] == "r1"


async def test_the_store_is_opened_at_the_first_rating_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPUTY_RECORD_KEY", KEY)
    persistence = KitPersistence(tmp_path / "root")
    kit = start(tmp_path, tool_agent)
    browser = Browser()
    opens = functools.partial(kit_store, persistence, local=True)
    feedback = kit.session.feedback = SessionFeedback(
        chat="chat",
        identity=FeedbackIdentity("user-alice"),
        link=opens,
        send=browser.send,
        input_id="chat-feedback",
        chat_id="chat-chat",
    )
    await kit.session.submit("What files are there?")
    await kit.chat.settled()
    await wait_until(lambda: len(browser.replies()) == 1)
    assert persistence._link is None  # an app whose users never rate opens nothing for it
    feedback.receive({"reply": browser.replies()[0], "rating": "up"})
    await wait_until(lambda: len(browser.saved()) == 1)
    assert persistence._link is not None and len(stored(persistence._link)) == 1
    await kit.session.end()
    persistence.close()
