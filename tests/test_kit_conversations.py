"""Saved kit conversations (KitPersistence) without a browser: folders, keys, expiry,
takeover, restore and the rebuilt transcript. The browser tests are in
``tests/e2e/test_conversations.py``."""

from __future__ import annotations

import asyncio
import gc
import os
import time
import weakref
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from deputy_shiny import Agent, ApprovalDecision, Permissions
from deputy_shiny.errors import ConfigurationError
from deputy_shiny.persistence.approvals import continues_conversation
from deputy_shiny.shiny import KitPersistence, _session_conversation
from deputy_shiny.shiny._chat_module import AgentChatContext, _check_persistent_agent
from deputy_shiny.shiny._conversations import (
    COOKIE,
    check_key,
    is_browser_token,
    new_browser_token,
    open_folder,
    sweep_expired,
)
from deputy_shiny.shiny._mcp_session import SessionMcp
from deputy_shiny.shiny._session_conversation import (
    RELOAD_MESSAGE,
    TOKEN_MESSAGE,
    SessionConversation,
)
from deputy_shiny.shiny._transcript import transcript_messages
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file

DAY = 24 * 3600


class _Cookies:
    def __init__(self, cookies: dict[str, str]) -> None:
        self.cookies = cookies


class FakeSession:
    """What SessionConversation uses of a Shiny session."""

    _count = 0

    def __init__(self, user: str | None = None, cookie: str | None = None) -> None:
        FakeSession._count += 1
        self.id = f"session-{FakeSession._count}"
        self.user = user
        self.http_conn = _Cookies({} if cookie is None else {COOKIE: cookie})
        self.sent: list[tuple[str, Any]] = []
        self.ended: list[Any] = []

    def root_scope(self) -> FakeSession:
        return self

    def on_ended(self, callback: Any) -> None:
        self.ended.append(callback)

    async def send_custom_message(self, kind: str, message: Any) -> None:
        self.sent.append((kind, message))


def conversation(root: Path, session: FakeSession, **options: Any) -> SessionConversation:
    return SessionConversation(KitPersistence(root, **options), session, "chat")  # type: ignore[arg-type]


# ------------------------------------------------------------------------ folders


def test_each_user_has_a_folder_named_by_a_hash_with_stable_ids(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path)
    alice = open_folder(persistence, "user", "alice", "chat")
    again = open_folder(persistence, "user", "alice", "chat")
    token_alice = open_folder(persistence, "token", "alice", "chat")
    other_chat = open_folder(persistence, "user", "alice", "second")
    assert alice == again  # the same ids after a reload: approvals can be resumed
    assert len({alice.directory, token_alice.directory, other_chat.directory}) == 3
    assert "alice" not in str(alice.directory)  # no key reaches the file system
    assert {p.name for p in alice.directory.iterdir()} == {
        "conversation.json",
        "workspace",
        "approvals",
        "checkpoints",
    }
    assert oct(alice.directory.stat().st_mode & 0o777) == "0o700"


def age(directory: Path, seconds: float) -> None:
    then = time.time() - seconds
    for path in (directory, directory / "session.json"):
        if path.exists():
            os.utime(path, (then, then))


def test_an_expired_conversation_is_deleted_when_its_user_comes_back(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path, ttl=timedelta(days=7))
    first = open_folder(persistence, "user", "alice", "chat")
    (first.workspace / "draft.md").write_text("old")
    (first.session_file).write_text("{}")
    age(first.directory, 6 * DAY)
    assert open_folder(persistence, "user", "alice", "chat") == first  # not yet expired
    age(first.directory, 8 * DAY)
    fresh = open_folder(persistence, "user", "alice", "chat")
    assert fresh.session_id != first.session_id
    assert list(fresh.workspace.iterdir()) == []
    assert not fresh.session_file.exists()


def test_the_sweep_deletes_expired_folders_but_not_those_in_use(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path, ttl=timedelta(days=1))
    old = open_folder(persistence, "user", "old", "chat")
    busy = open_folder(persistence, "user", "busy", "chat")
    fresh = open_folder(persistence, "user", "fresh", "chat")
    age(old.directory, 2 * DAY)
    age(busy.directory, 2 * DAY)
    leftover = tmp_path / ".expired-crashed"
    leftover.mkdir()
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / "link").symlink_to(outside)
    assert sweep_expired(persistence, {busy.directory}) == 1
    assert not old.directory.exists() and not leftover.exists()
    assert busy.directory.is_dir() and fresh.directory.is_dir()
    assert outside.is_dir()  # a symlink is never followed


def test_a_damaged_ids_file_is_kept_aside_and_a_new_conversation_starts(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path)
    first = open_folder(persistence, "user", "alice", "chat")
    first.session_file.write_text("saved")
    ids = first.directory / "conversation.json"
    ids.write_text(ids.read_text().replace("session_", "sessioX_"))
    second = open_folder(persistence, "user", "alice", "chat")
    assert second.session_id != first.session_id
    kept = sorted(p.name.split(".damaged-")[0] for p in first.directory.glob("*.damaged-*"))
    assert kept == ["conversation.json", "session.json"]  # nothing deleted


def test_keys_and_settings_are_checked() -> None:
    token = new_browser_token()
    assert is_browser_token(token) and token != new_browser_token()
    for bad in ["../../etc/passwd", token[:-1], token + "x", token[:-1] + "/", None, 42]:
        assert not is_browser_token(bad)
    assert check_key("alice") == "alice"
    assert check_key("") is None and check_key(None) is None
    with pytest.raises(ConfigurationError, match="string or None"):
        check_key(42)
    with pytest.raises(ValidationError, match="ttl must be positive"):
        KitPersistence("/tmp/x", ttl=timedelta(0))
    persistence = KitPersistence("relative/dir")
    assert persistence.root.is_absolute()
    with pytest.raises(ValidationError):
        persistence.ttl = timedelta(days=1)  # type: ignore[misc]


# ---------------------------------------------------------------------------- keys


def test_the_user_is_connects_user_else_the_browsers_token(tmp_path: Path) -> None:
    signed_in = conversation(tmp_path, FakeSession(user="alice", cookie=new_browser_token()))
    assert signed_in.kind == "user"

    token = new_browser_token()
    returning = conversation(tmp_path, FakeSession(cookie=token))
    again = conversation(tmp_path, FakeSession(cookie=token))
    assert returning.kind == "token" and returning.folder == again.folder

    forged = FakeSession(cookie="../" + token[3:])
    newcomer = conversation(tmp_path, forged)
    assert newcomer.folder != returning.folder
    asyncio.run(newcomer.send_token())
    [(kind, message)] = forged.sent
    assert kind == TOKEN_MESSAGE and is_browser_token(message["token"])
    # The token a browser gets leads back to the same folder.
    assert conversation(tmp_path, FakeSession(cookie=message["token"])).folder == newcomer.folder

    custom = conversation(tmp_path, FakeSession(user="alice"), key=lambda s: "team-7")
    assert custom.kind == "custom" and custom.folder != signed_in.folder
    fallback = conversation(tmp_path, FakeSession(user="alice"), key=lambda s: None)
    assert fallback.folder == signed_in.folder


# ------------------------------------------------------------- takeover and restore


async def test_a_newer_session_takes_the_conversation_over(tmp_path: Path) -> None:
    older = conversation(tmp_path, FakeSession(user="alice"))
    newer = conversation(tmp_path, FakeSession(user="alice"))
    closed: list[str] = []

    async def close_older() -> None:
        closed.append("older")
        await asyncio.sleep(0.01)
        older.release()  # what the older session's end does

    assert await older.take_over(close_older)
    assert await newer.take_over(lambda: asyncio.sleep(0))
    assert closed == ["older"] and newer.usable and not older.usable
    newer.release()
    assert _session_conversation._in_use == {}


async def test_the_table_of_folders_in_use_keeps_no_session_alive(tmp_path: Path) -> None:
    """ARCHITECTURE rule 9: a session that ended without letting go (its end failed)
    is neither kept alive by the table nor in the way of the next one."""
    gone = conversation(tmp_path, FakeSession(user="alice"))
    assert await gone.take_over(lambda: asyncio.sleep(0))
    collected = weakref.ref(gone)
    del gone
    gc.collect()
    assert collected() is None
    newer = conversation(tmp_path, FakeSession(user="alice"))
    assert await asyncio.wait_for(newer.take_over(lambda: asyncio.sleep(0)), 1)
    newer.release()
    assert _session_conversation._in_use == {}


async def test_a_session_that_does_not_let_go_is_not_taken_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_session_conversation, "TAKEOVER_SECONDS", 0.05)
    stuck = conversation(tmp_path, FakeSession(user="alice"))
    assert await stuck.take_over(lambda: asyncio.sleep(0))
    late = conversation(tmp_path, FakeSession(user="alice"))
    assert not await late.take_over(lambda: asyncio.sleep(0))
    assert not late.usable
    # It saves nothing: the conversation is the other session's.
    assert await late.save(Agent(ScriptedModel([]))) is None
    assert not late.folder.session_file.exists()
    stuck.release()


async def hold(held: SessionConversation, agent: Agent) -> None:
    """What a session does as it starts: take the folder, load what was saved."""
    assert await held.take_over(lambda: asyncio.sleep(0))
    assert await held.load(agent) is None


def agent_for(folder_conversation: SessionConversation, replies: list[Any]) -> Agent:
    folder = folder_conversation.folder
    return Agent(
        ScriptedModel(replies),
        tools=[tool_write_file()],
        working_dir=folder.workspace,
        session_id=folder.session_id,
        agent_id=folder.agent_id,
        approval_dir=folder.approvals,
        permissions=Permissions(approval_effects=("write",)),
    )


async def test_a_saved_conversation_and_its_waiting_approval_come_back(tmp_path: Path) -> None:
    write = ScriptedToolCall("write_file", {"path": "a.txt", "content": "A"})
    first = conversation(tmp_path, FakeSession(user="alice"))
    agent = agent_for(first, [ScriptedReply(tool_calls=[write]), "written"])
    await hold(first, agent)
    events = [event async for event in agent.run("write a")]
    assert events[-1].stop_reason == "approval_pending"
    assert await first.save(agent) is None
    first.release()

    second = conversation(tmp_path, FakeSession(user="alice"))
    assert await second.take_over(lambda: asyncio.sleep(0))
    restored = agent_for(second, ["written"])
    assert await second.load(restored) is None
    assert [t.role for t in restored.get_turns()] == ["user", "assistant", "user"]
    pending = restored.pending_approval()
    assert pending is not None and pending.request.tool_name == "write_file"
    async for _ in restored.resume_approval_events(pending.source.path, ApprovalDecision.approve()):
        pass
    assert (second.folder.workspace / "a.txt").read_text() == "A"
    assert restored.pending_approval() is None
    second.release()


async def saved_conversation(tmp_path: Path) -> SessionConversation:
    """Alice's conversation, saved after one run ("hi" / "hello"), let go of."""
    first = conversation(tmp_path, FakeSession(user="alice"))
    agent = agent_for(first, ["hello"])
    await hold(first, agent)
    _ = [event async for event in agent.run("hi")]
    assert await first.save(agent) is None
    first.release()
    return first


async def test_a_damaged_saved_conversation_is_kept_and_a_new_one_starts(tmp_path: Path) -> None:
    first = await saved_conversation(tmp_path)
    saved = first.folder.session_file
    saved.write_text(saved.read_text().replace("hello", "HELLO"))  # tampered

    second = conversation(tmp_path, FakeSession(user="alice"))
    assert await second.take_over(lambda: asyncio.sleep(0))
    restored = agent_for(second, [])
    note = await second.load(restored)
    assert note is not None and "PersistenceNotAuthenticError" in note  # a corrupt-file kind
    assert restored.get_turns() == []  # nothing half-loaded
    assert not saved.exists()
    assert len(list(saved.parent.glob("session.json.damaged-*"))) == 1
    second.release()


async def test_a_waiting_approval_outlives_a_damaged_saved_conversation(tmp_path: Path) -> None:
    """The approval record holds its own conversation: with the session file set aside,
    a fresh agent still resumes it (the same rule as the runtime's resume)."""
    write = ScriptedToolCall("write_file", {"path": "a.txt", "content": "A"})
    first = conversation(tmp_path, FakeSession(user="alice"))
    agent = agent_for(first, [ScriptedReply(tool_calls=[write])])
    await hold(first, agent)
    _ = [event async for event in agent.run("write a")]
    assert await first.save(agent) is None
    first.release()
    first.folder.session_file.write_text("{ truncated")

    second = conversation(tmp_path, FakeSession(user="alice"))
    assert await second.take_over(lambda: asyncio.sleep(0))
    restored = agent_for(second, ["written"])
    assert await second.load(restored) is not None  # set aside, told
    pending = restored.pending_approval()
    assert pending is not None and continues_conversation(pending, restored.get_turns())
    async for _ in restored.resume_approval_events(pending.source.path, "approve"):
        pass
    assert (second.folder.workspace / "a.txt").read_text() == "A"
    assert restored.last_turn() is not None and restored.last_turn().text == "written"  # type: ignore[union-attr]
    second.release()


async def test_starting_anew_forgets_the_conversation_and_keeps_the_files(tmp_path: Path) -> None:
    session = FakeSession(user="alice")
    first = conversation(tmp_path, session)
    agent = agent_for(first, ["hello"])
    await hold(first, agent)
    _ = [event async for event in agent.run("hi")]
    assert await first.save(agent) is None
    (first.folder.workspace / "keep.md").write_text("mine")
    await first.start_new()
    assert session.sent[-1] == (RELOAD_MESSAGE, {})
    assert await first.save(agent) is None and not first.folder.session_file.exists()
    first.release()
    second = conversation(tmp_path, FakeSession(user="alice"))
    assert second.folder.session_id != first.folder.session_id
    assert (second.folder.workspace / "keep.md").read_text() == "mine"


async def test_a_failed_restore_never_overwrites_the_saved_conversation(tmp_path: Path) -> None:
    first = await saved_conversation(tmp_path)
    saved = first.folder.session_file.read_bytes()

    second = conversation(tmp_path, FakeSession(user="alice"))
    assert await second.take_over(lambda: asyncio.sleep(0))
    # Its load never happened (say the browser left mid-restore): the session's end
    # saves an empty agent, which must not replace the conversation.
    assert await second.save(agent_for(second, [])) is None
    assert second.folder.session_file.read_bytes() == saved
    second.release()


# ---------------------------------------------------------------------- the factory


def test_a_persistent_agent_must_use_the_contexts_ids_and_folders(tmp_path: Path) -> None:
    folder = open_folder(KitPersistence(tmp_path), "user", "alice", "chat")
    ctx = AgentChatContext(
        session_id=folder.session_id,
        working_dir=folder.workspace,
        ask_user=lambda questions, context: [],
        approval_handler=None,
        mcp=SessionMcp(None),
        agent_id=folder.agent_id,
        approval_dir=folder.approvals,
        checkpoint_dir=folder.checkpoints,
    )
    good = Agent(
        ScriptedModel([]),
        working_dir=ctx.working_dir,
        session_id=ctx.session_id,
        agent_id=ctx.agent_id,
        approval_dir=ctx.approval_dir,
    )
    _check_persistent_agent(good, ctx)
    forgetful = Agent(ScriptedModel([]), working_dir=ctx.working_dir)
    with pytest.raises(ConfigurationError) as caught:
        _check_persistent_agent(forgetful, ctx)
    message = str(caught.value)
    for needed in ["session_id=ctx.session_id", "agent_id=ctx.agent_id", "approval_dir="]:
        assert needed in message
    assert "working_dir" not in message


# ---------------------------------------------------------------------- transcript


async def test_the_transcript_is_rebuilt_inert_from_the_turns(tmp_path: Path) -> None:
    async def deny(request: Any) -> ApprovalDecision:
        return ApprovalDecision.deny("not now")

    write = ScriptedToolCall("write_file", {"path": "a.txt", "content": "A"})
    agent = Agent(
        ScriptedModel(
            [
                ScriptedReply(text="Writing <img src=x onerror=alert(1)>", tool_calls=[write]),
                "Denied, as you wish.",
            ]
        ),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=Permissions(approval_effects=("write",)),
        approval_handler=deny,
    )
    _ = [event async for event in agent.run("please <b>write</b>")]
    messages = transcript_messages(agent.get_turns())
    assert [m.role for m in messages] == ["user", "assistant"]
    [user_text] = messages[0].chunks
    assert isinstance(user_text, str) and "<b>" not in user_text and "write" in user_text
    text, request, result, answer = messages[1].chunks
    assert isinstance(text, str) and "<img" not in text
    blocks: list[dict[str, Any]] = [
        dict(request.blocks[0]),  # type: ignore[union-attr]
        dict(result.blocks[0]),  # type: ignore[union-attr]
    ]
    assert blocks[0]["type"] == "tool_request" and blocks[1]["type"] == "tool_result"
    assert blocks[0]["request_id"] == blocks[1]["request_id"]
    assert blocks[1]["title"].startswith("Denied: ") and blocks[1]["value_type"] == "code"
    assert answer == "Denied, as you wish."
    call_id = agent.get_turns()[1].contents[-1].id  # type: ignore[union-attr]
    # A call still waiting for approval shows no card (the modal stands for it).
    hidden = transcript_messages(agent.get_turns(), waiting_calls={call_id})
    assert [len(m.chunks) for m in hidden] == [1, 2]


# ------------------------------------------------------------------------ attacks


async def test_a_hostile_model_cannot_reach_the_conversations_own_files(tmp_path: Path) -> None:
    """The saved session, the ids and the approvals sit beside the workspace, never in
    it: the file tools' confinement keeps a prompt-injected model out of them."""
    owner = conversation(tmp_path, FakeSession(user="alice"))
    attacks = [
        ScriptedToolCall("write_file", {"path": "../conversation.json", "content": "{}"}),
        ScriptedToolCall("write_file", {"path": "../session.json", "content": "{}"}),
        ScriptedToolCall("write_file", {"path": "../approvals/x.approval.json", "content": "{}"}),
        ScriptedToolCall("write_file", {"path": str(owner.folder.session_file), "content": "{}"}),
    ]
    agent = agent_for(owner, [ScriptedReply(tool_calls=attacks), "done"])
    await hold(owner, agent)
    ids_before = (owner.folder.directory / "conversation.json").read_bytes()
    events = [event async for event in agent.run("go")]
    results = [e for e in events if e.type == "tool_end"]
    assert len(results) == 4
    assert all(e.output.startswith("Denied: Path ") for e in results)
    assert (owner.folder.directory / "conversation.json").read_bytes() == ids_before
    assert not owner.folder.session_file.exists()
    assert list(owner.folder.approvals.iterdir()) == []
    owner.release()


def test_a_failed_resume_is_told_without_server_paths() -> None:
    from deputy_shiny.errors import ApprovalDecidedError, ApprovalMismatchError
    from deputy_shiny.shiny._chat_module import _resume_failure

    mismatch = ApprovalMismatchError(
        "/srv/conversations/abc/approvals/x.approval.json: cannot resume this approval "
        "here: the tool definitions differ (mcp_time_now)."
    )
    told = _resume_failure(mismatch)
    assert "/srv" not in told and "tool definitions differ (mcp_time_now)" in told
    decided = _resume_failure(ApprovalDecidedError("/srv/x: decided"))
    assert "/srv" not in decided and "decided already" in decided
