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
from deputy_shiny.shiny._chat_start import AgentChatContext, _check_persistent_agent
from deputy_shiny.shiny._conversations import (
    check_key,
    open_folder,
    records_root,
    sweep_expired,
    workspaces_root,
)
from deputy_shiny.shiny._identity import BINDING_COOKIE, TOKEN_COOKIE, new_binding
from deputy_shiny.shiny._mcp_session import SessionMcp
from deputy_shiny.shiny._session_conversation import (
    RELOAD_MESSAGE,
    SessionConversation,
)
from deputy_shiny.shiny._transcript import transcript_messages
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file

DAY = 24 * 3600


class _Connection:
    def __init__(self, cookie: str | None) -> None:
        self.headers = {} if cookie is None else {"cookie": cookie}


class FakeSession:
    """What SessionConversation uses of a Shiny session: ``cookie`` is the websocket's
    raw Cookie header."""

    _count = 0

    def __init__(self, user: str | None = None, cookie: str | None = None) -> None:
        FakeSession._count += 1
        self.id = f"session-{FakeSession._count}"
        self.user = user
        self.http_conn = _Connection(cookie)
        self.sent: list[tuple[str, Any]] = []
        self.ended: list[Any] = []
        self.routes: dict[str, Any] = {}

    def root_scope(self) -> FakeSession:
        return self

    def on_ended(self, callback: Any) -> None:
        self.ended.append(callback)

    def dynamic_route(self, name: str, handler: Any) -> str:
        self.routes[name] = handler
        return f"session/{self.id}/dynamic_route/{name}?nonce=1"

    async def send_custom_message(self, kind: str, message: Any) -> None:
        self.sent.append((kind, message))


def conversation(root: Path, session: FakeSession, **options: Any) -> SessionConversation:
    """A conversation for ``session``; ``session.user`` is trusted unless said otherwise
    (as behind a proxy that sets it: the identity rules have tests of their own)."""
    options.setdefault("trust_user_header", True)
    return SessionConversation(KitPersistence(root, **options), session, "chat")  # type: ignore[arg-type]


# ------------------------------------------------------------------------ folders


def mode(path: Path) -> str:
    return oct(path.stat().st_mode & 0o777)


def test_each_user_has_a_folder_named_by_a_hash_with_stable_ids(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path)
    alice = open_folder(persistence, "user", "alice", "chat")
    alice.keep()  # the first message
    again = open_folder(persistence, "user", "alice", "chat")
    token_alice = open_folder(persistence, "token", "alice", "chat")
    other_chat = open_folder(persistence, "user", "alice", "second")
    assert alice == again  # the same ids after a reload: approvals can be resumed
    assert len({alice.directory, token_alice.directory, other_chat.directory}) == 3
    assert "alice" not in str(alice.directory)  # no key reaches the file system
    assert {p.name for p in alice.directory.iterdir()} == {
        "conversation.json",
        "approvals",
        "checkpoints",
    }
    assert mode(alice.directory) == "0o700"


def test_workspaces_and_records_are_two_trees_apart(tmp_path: Path) -> None:
    """Nothing under a workspace reaches a record by any path: the records are not in
    its parent, nor anywhere below the workspaces tree. Every parent of a workspace is
    traversable (model-run code will run there as another uid); records are not."""
    persistence = KitPersistence(tmp_path / "root")
    folder = open_folder(persistence, "user", "alice", "chat")
    folder.keep()
    records, workspaces = records_root(persistence), workspaces_root(persistence)
    assert folder.directory.parent == records and folder.workspace.parent == workspaces
    assert not folder.directory.is_relative_to(workspaces)
    assert not folder.workspace.is_relative_to(records)
    assert {p.name for p in workspaces.iterdir()} == {folder.workspace.name}
    assert mode(persistence.root) == "0o711" and mode(workspaces) == "0o711"
    assert mode(records) == "0o700" and mode(folder.directory) == "0o700"
    assert mode(folder.workspace) == "0o700"
    # An old root (0700 from an earlier version) is made traversable.
    old = tmp_path / "old"
    old.mkdir(mode=0o700)
    open_folder(KitPersistence(old), "user", "bob", "chat")
    assert mode(old) == "0o711"


def test_a_conversation_is_kept_from_its_first_message_only(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path)
    visitor = open_folder(persistence, "token", "x" * 43, "chat")
    assert not visitor.kept and not (visitor.directory / "conversation.json").exists()
    assert [p for p in visitor.directory.rglob("*") if p.is_file()] == []
    assert visitor.discard_if_unkept()  # left without a message: nothing stays
    assert list(records_root(persistence).iterdir()) == []
    assert list(workspaces_root(persistence).iterdir()) == []
    writer = open_folder(persistence, "token", "y" * 43, "chat")
    writer.keep()
    assert writer.kept and not writer.discard_if_unkept()
    assert open_folder(persistence, "token", "y" * 43, "chat") == writer


def age(directory: Path, seconds: float) -> None:
    then = time.time() - seconds
    for path in (directory, directory / "session.json"):
        if path.exists():
            os.utime(path, (then, then))


def test_an_expired_conversation_is_deleted_when_its_user_comes_back(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path, ttl=timedelta(days=7))
    first = open_folder(persistence, "user", "alice", "chat")
    first.keep()
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
    for folder in (old, busy, fresh):
        folder.keep()
    crashed = open_folder(persistence, "user", "crashed", "chat")  # never kept
    age(old.directory, 2 * DAY)
    age(busy.directory, 2 * DAY)
    age(crashed.directory, 2 * 3600)
    leftover = records_root(persistence) / ".expired-crashed"
    leftover.mkdir()
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (records_root(persistence) / "link").symlink_to(outside)
    assert sweep_expired(persistence, {busy.directory}) == 2
    assert not old.directory.exists() and not old.workspace.exists()
    assert not crashed.directory.exists() and not crashed.workspace.exists()
    assert not leftover.exists()
    assert busy.directory.is_dir() and fresh.directory.is_dir() and fresh.workspace.is_dir()
    assert outside.is_dir()  # a symlink is never followed


def test_a_damaged_ids_file_is_kept_aside_and_a_new_conversation_starts(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path)
    first = open_folder(persistence, "user", "alice", "chat")
    first.keep()
    first.session_file.write_text("saved")
    ids = first.directory / "conversation.json"
    ids.write_text(ids.read_text().replace("session_", "sessioX_"))
    second = open_folder(persistence, "user", "alice", "chat")
    assert second.session_id != first.session_id
    kept = sorted(p.name.split(".damaged-")[0] for p in first.directory.glob("*.damaged-*"))
    assert kept == ["conversation.json", "session.json"]  # nothing deleted


def test_keys_and_settings_are_checked() -> None:
    assert check_key("alice") == "alice"
    assert check_key("") is None and check_key(None) is None
    with pytest.raises(ConfigurationError, match="string or None"):
        check_key(42)
    with pytest.raises(ValidationError, match="ttl must be positive"):
        KitPersistence("/tmp/x", ttl=timedelta(0))
    with pytest.raises(ValidationError, match="at least 32 bytes"):
        KitPersistence("/tmp/x", token_key=b"short")
    persistence = KitPersistence("relative/dir")
    assert persistence.root.is_absolute()
    with pytest.raises(ValidationError):
        persistence.ttl = timedelta(days=1)  # type: ignore[misc]


# ---------------------------------------------------------------------------- keys


def cookies(binding: str | None = None, token: str | None = None, extra: str = "") -> str:
    """A websocket's raw Cookie header."""
    parts = [] if binding is None else [f"{BINDING_COOKIE}={binding}"]
    parts += [] if token is None else [f"{TOKEN_COOKIE}={token}"]
    return "; ".join(parts + ([extra] if extra else []))


def issued(session: FakeSession, held: SessionConversation) -> str:
    """The token the browser of ``session`` is given: the Set-Cookie of the route the
    kit's script fetches (checked: HttpOnly, SameSite=Strict, the app's path)."""
    from starlette.requests import Request

    asyncio.run(held.send_token())
    [(kind, message)] = session.sent
    assert kind == "deputy-conversation-token" and set(message) == {"url"}
    [handler] = session.routes.values()
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/",
        "headers": [(b"sec-fetch-site", b"same-origin")],
        "query_string": b"nonce=1&path=%2Fapp%2F",
    }
    response = handler(Request(scope))
    header = response.headers["set-cookie"]
    assert "HttpOnly" in header and "SameSite=strict" in header and "Path=/app/" in header
    refused = dict(scope, headers=[(b"sec-fetch-site", b"cross-site")])
    assert handler(Request(refused)).status_code == 403
    bad_path = dict(scope, query_string=b"path=%2Fapp%3B%20Domain%3Devil")
    assert handler(Request(bad_path)).status_code == 400
    name, value = header.split(";", 1)[0].split("=", 1)
    assert name == TOKEN_COOKIE
    return value


def test_a_browser_token_is_issued_in_an_httponly_cookie_bound_to_the_browser(
    tmp_path: Path,
) -> None:
    binding = new_binding()
    first = FakeSession(cookie=cookies(binding))
    newcomer = conversation(tmp_path, first)
    token = issued(first, newcomer)
    assert newcomer.kind == "token" and newcomer.folder.directory.exists()
    # The same browser (token and binding) comes back to the same conversation.
    again = conversation(tmp_path, FakeSession(cookie=cookies(binding, token)))
    assert again.folder.directory == newcomer.folder.directory
    assert again._issued_token is None
    # The token is worthless without its binding, and vice versa: a token planted in
    # another browser (which has its own binding), a guessed or edited token, a token
    # signed with another key: each is ignored, and that browser gets a fresh token.
    mallory = new_binding()
    tampered = token[:-1] + ("A" if token[-1] != "A" else "B")
    guessed = "x" * 43 + "." + "y" * 43
    other_key = KitPersistence(tmp_path / "elsewhere", token_key=b"k" * 32)
    foreign = FakeSession(cookie=cookies(mallory))
    foreign_token = issued(foreign, SessionConversation(other_key, foreign, "chat"))  # type: ignore[arg-type]
    for planted in [token, tampered, guessed, foreign_token, "../../etc/passwd", ""]:
        session = FakeSession(cookie=cookies(mallory, planted))
        other = conversation(tmp_path, session)
        assert other.folder.directory != newcomer.folder.directory, planted
        assert other._issued_token is not None
    tampered_session = FakeSession(cookie=cookies(binding, tampered))
    assert conversation(tmp_path, tampered_session).folder.directory != newcomer.folder.directory


def test_a_cookie_sent_twice_is_refused_not_resolved(tmp_path: Path) -> None:
    """A page of another port or subdomain can add a cookie of the same name (another
    path or domain) beside the real one; Starlette would keep the last. Refused."""
    from deputy_shiny.shiny._session_conversation import _NotSaved

    binding = new_binding()
    first = FakeSession(cookie=cookies(binding))
    token = issued(first, conversation(tmp_path, first))
    attacker_binding = new_binding()
    attacker = FakeSession(cookie=cookies(attacker_binding))
    attacker_token = issued(attacker, conversation(tmp_path, attacker))
    planted = [
        cookies(binding, token, f"{TOKEN_COOKIE}={attacker_token}"),
        cookies(binding, attacker_token, f"{TOKEN_COOKIE}={token}"),
        cookies(binding, token, f"{BINDING_COOKIE}={attacker_binding}"),
        cookies(binding, None, f"{TOKEN_COOKIE}={attacker_token}; {TOKEN_COOKIE}=x"),
    ]
    for header in planted:
        with pytest.raises(_NotSaved, match="twice"):
            conversation(tmp_path, FakeSession(cookie=header))
    # Without the binding the kit's script sets, nothing is saved either.
    with pytest.raises(_NotSaved, match="local storage"):
        conversation(tmp_path, FakeSession(cookie=cookies(None, token)))
    with pytest.raises(_NotSaved, match="local storage"):
        conversation(tmp_path, FakeSession(cookie=cookies("short", token)))


def test_session_user_counts_only_where_the_deployment_vouches_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """py-shiny reads session.user from a header any client can send: outside Connect
    it names nobody unless the app says a proxy sets it."""
    from deputy_shiny.shiny import trusted_session_user
    from deputy_shiny.shiny._session_conversation import _NotSaved

    for name in ("RSTUDIO_PRODUCT", "CONNECT_SERVER"):
        monkeypatch.delenv(name, raising=False)
    mine, theirs = new_binding(), new_binding()
    forged = conversation(
        tmp_path, FakeSession(user="alice", cookie=cookies(mine)), trust_user_header=None
    )
    also = conversation(
        tmp_path, FakeSession(user="alice", cookie=cookies(theirs)), trust_user_header=None
    )
    assert forged.kind == also.kind == "token"  # two browsers, two conversations
    assert forged.folder.directory != also.folder.directory
    assert trusted_session_user(FakeSession(user="alice")) is None
    never = conversation(
        tmp_path, FakeSession(user="alice", cookie=cookies(mine)), trust_user_header=False
    )
    assert never.kind == "token"

    proxied = conversation(tmp_path, FakeSession(user="alice"), trust_user_header=True)
    assert proxied.kind == "user"

    # On Posit Connect (which sets the header itself) the user counts, and anonymous
    # visitors get no saved conversation unless the app opts in.
    monkeypatch.setenv("RSTUDIO_PRODUCT", "CONNECT")
    on_connect = conversation(tmp_path, FakeSession(user="alice"), trust_user_header=None)
    assert on_connect.kind == "user"
    assert on_connect.folder.directory == proxied.folder.directory
    assert trusted_session_user(FakeSession(user="alice")) == "alice"
    with pytest.raises(_NotSaved, match="signed-in users only"):
        conversation(tmp_path, FakeSession(cookie=cookies(mine)), trust_user_header=None)
    opted_in = conversation(
        tmp_path, FakeSession(cookie=cookies(mine)), trust_user_header=None, anonymous=True
    )
    assert opted_in.kind == "token"
    monkeypatch.delenv("RSTUDIO_PRODUCT")
    monkeypatch.setenv("CONNECT_SERVER", "https://connect.example/")
    with pytest.raises(_NotSaved, match="signed-in users only"):
        conversation(tmp_path, FakeSession(cookie=cookies(mine)), trust_user_header=None)


def test_custom_keys_come_first(tmp_path: Path) -> None:
    signed_in = conversation(tmp_path, FakeSession(user="alice"))
    custom = conversation(tmp_path, FakeSession(user="alice"), key=lambda s: "team-7")
    assert custom.kind == "custom" and custom.folder != signed_in.folder
    fallback = conversation(tmp_path, FakeSession(user="alice"), key=lambda s: None)
    assert fallback.folder.directory == signed_in.folder.directory


def test_the_token_key_is_made_once_and_kept_private(tmp_path: Path) -> None:
    from deputy_shiny.shiny._conversations import token_key

    persistence = KitPersistence(tmp_path)
    key = token_key(persistence)
    assert len(key) == 32 and token_key(KitPersistence(tmp_path)) == key
    path = records_root(persistence) / ".token-key"
    assert mode(path) == "0o600"
    path.write_text("not a key")
    with pytest.raises(Exception, match="not a token key"):
        token_key(persistence)


def test_a_visitor_who_sends_nothing_leaves_nothing(tmp_path: Path) -> None:
    session = FakeSession(cookie=cookies(new_binding()))
    visitor = conversation(tmp_path, session)
    assert asyncio.run(visitor.take_over(lambda: asyncio.sleep(0)))
    visitor.release()
    persistence = KitPersistence(tmp_path)
    records = records_root(persistence)
    assert sorted(records.iterdir()) == [records / ".store", records / ".token-key"]
    # The users' lists live in the file store: none was written for this visitor.
    assert [p for p in (records / ".store").rglob("*") if p.is_file()] == []
    assert list(workspaces_root(persistence).iterdir()) == []


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
    """What a session does as it starts (take the folder, load what was saved), and as
    its first message is sent (keep the conversation)."""
    assert await held.take_over(lambda: asyncio.sleep(0))
    assert await held.load(agent) is None
    assert await held.keep_async("hi") is None


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


async def test_starting_anew_keeps_the_conversation_in_the_list(tmp_path: Path) -> None:
    session = FakeSession(user="alice")
    first = conversation(tmp_path, session)
    agent = agent_for(first, ["hello"])
    await hold(first, agent)
    _ = [event async for event in agent.run("hi")]
    assert await first.save(agent) is None
    (first.folder.workspace / "keep.md").write_text("mine")
    await first.start_new()
    assert session.sent[-1] == (RELOAD_MESSAGE, {})
    assert await first.save(agent) is None and first.folder.session_file.exists()
    first.release()
    # The reloaded page opens a new conversation, with a workspace of its own...
    second = conversation(tmp_path, FakeSession(user="alice"))
    assert second.folder.session_id != first.folder.session_id
    assert not (second.folder.workspace / "keep.md").exists()
    # ...and the first is in the list, to switch back to: its transcript and files.
    assert [e.title for e in (await second.listing.read()).entries] == ["hi"]
    assert await second.switch_to(first.listing.current)
    second.release()
    third = conversation(tmp_path, FakeSession(user="alice"))
    assert third.folder.session_id == first.folder.session_id
    assert (third.folder.workspace / "keep.md").read_text() == "mine"
    restored = agent_for(third, [])
    await hold(third, restored)
    assert [t.text for t in restored.get_turns()][:2] == ["hi", "hello"]
    third.release()


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
    """The saved session, the ids and the approvals live in another tree than the
    workspace: the file tools' confinement keeps a prompt-injected model out of them."""
    owner = conversation(tmp_path, FakeSession(user="alice"))
    records = f"../../records/{owner.folder.directory.name}"
    attacks = [
        ScriptedToolCall("write_file", {"path": f"{records}/conversation.json", "content": "{}"}),
        ScriptedToolCall("write_file", {"path": f"{records}/session.json", "content": "{}"}),
        ScriptedToolCall("write_file", {"path": f"{records}/approvals/x.json", "content": "{}"}),
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
    from deputy_shiny.shiny._chat_session import resume_failure

    mismatch = ApprovalMismatchError(
        "/srv/conversations/abc/approvals/x.approval.json: cannot resume this approval "
        "here: the tool definitions differ (mcp_time_now)."
    )
    told = resume_failure(mismatch)
    assert "/srv" not in told and "tool definitions differ (mcp_time_now)" in told
    decided = resume_failure(ApprovalDecidedError("/srv/x: decided"))
    assert "/srv" not in decided and "decided already" in decided


# ------------------------------------------------------------------------ origins


def test_a_session_is_foreign_unless_its_page_is_the_apps_own_origin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deputy_shiny.shiny._origin import foreign_origin, normalize_allowed_origins

    for name in ("RSTUDIO_PRODUCT", "CONNECT_SERVER"):
        monkeypatch.delenv(name, raising=False)

    def check(origin: str | None, host: str = "app.example:8000", **options: Any) -> str | None:
        headers = {"host": host, **({} if origin is None else {"origin": origin})}
        headers.update(options.pop("headers", {}))
        return foreign_origin(headers, options.pop("scheme", "ws"), **options)

    assert check("http://app.example:8000") is None
    assert check("HTTP://APP.EXAMPLE:8000") is None  # origins compare case-insensitively
    assert check(None) is None  # not a browser: it carries only its own cookies
    # Another port, a sibling subdomain, another scheme, opaque and malformed origins.
    for foreign in [
        "http://app.example:9000",
        "http://evil.app.example:8000",
        "https://app.example:8000",
        "null",
        "http://app.example:8000@evil.example",
        "http://app.example:notaport",
        "",
    ]:
        assert check(foreign) is not None, foreign
    assert check("https://app.example", host="app.example", scheme="wss") is None
    assert check("https://app.example:443", host="app.example", scheme="wss") is None
    # Forwarded headers count only when the app says its proxy sets them.
    proxied = {"x-forwarded-host": "chat.example", "x-forwarded-proto": "https"}
    assert check("https://chat.example", host="10.0.0.5:8000", headers=proxied) is not None
    assert (
        check("https://chat.example", host="10.0.0.5:8000", headers=proxied, trust_forwarded=True)
        is None
    )
    assert check("http://app.example:8000", headers=proxied, trust_forwarded=True) is not None
    # Extra origins the app allows.
    allowed = normalize_allowed_origins(["https://portal.example/"])
    assert check("https://portal.example", allowed=allowed) is None
    with pytest.raises(ValueError, match="not an http"):
        normalize_allowed_origins(["portal.example"])
    # On Posit Connect, the server's own address.
    monkeypatch.setenv("CONNECT_SERVER", "https://connect.example/")
    assert check("https://connect.example", host="127.0.0.1:3939") is None
    assert check("https://other.example", host="127.0.0.1:3939") is not None
