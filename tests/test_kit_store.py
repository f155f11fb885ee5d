"""Kit conversations through a store (``KitPersistence(store=...)``), without a browser, on
SQLite and a real PostgreSQL: each ``KitPersistence`` opens its own ``SqlStore`` (its own
engine, loop thread and connections), so two of them on one database stand in for two
app processes. The single-process behaviour is tests/test_kit_conversations.py's and
tests/test_chat_session.py's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent
from deputy_shiny.persistence import SqlStore, Store
from deputy_shiny.persistence.approval_records import approval_read_async
from deputy_shiny.persistence.store_bridge import bridge_for
from deputy_shiny.shiny import KitPersistence, UserBudget, _session_conversation
from deputy_shiny.shiny import _stored_conversations as stored
from deputy_shiny.shiny._conversations import kit_store, records_root, workspaces_root
from deputy_shiny.shiny._session_budget import session_budget
from deputy_shiny.shiny._session_conversation import STORE_DOWN_MESSAGE, SessionConversation
from deputy_shiny.testing import ScriptedModel, ScriptedReply
from deputy_shiny.usage import TurnUsage
from tests.test_chat_session import (
    WRITE,
    options_agent,
    persistent_agent,
    restored,
    start,
    wait_until,
)
from tests.test_kit_conversations import FakeSession
from tests.test_store_contract import Proxy

Make = Callable[..., KitPersistence]


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One database that two "processes" share: its SQLAlchemy URL."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'kit.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def make(tmp_path: Path, database: str) -> Iterator[Make]:
    """``make(**options)``: a KitPersistence on the shared root and database, as a new
    process would build it (its stores are closed at the end)."""
    made: list[KitPersistence] = []

    def build(root: str = "root", **options: Any) -> KitPersistence:
        options.setdefault("store", database)
        persistence = KitPersistence(tmp_path / root, trust_user_header=True, **options)
        made.append(persistence)
        return persistence

    yield build
    for persistence in made:
        persistence.close()


def conversation(persistence: KitPersistence, user: str = "alice") -> SessionConversation:
    return SessionConversation(persistence, FakeSession(user=user), "chat")  # type: ignore[arg-type]


def agent_for(held: SessionConversation, replies: list[Any]) -> Agent:
    folder = held.folder
    return Agent(
        ScriptedModel(replies),
        working_dir=folder.workspace,
        session_id=folder.session_id,
        agent_id=folder.agent_id,
        approval_dir=folder.approvals,
    )


async def hold(held: SessionConversation, agent: Agent) -> None:
    assert await held.take_over(lambda: asyncio.sleep(0))
    assert await held.load(agent) is None
    await held.keep_async()


async def test_a_conversation_saved_in_one_process_comes_back_in_another(make: Make) -> None:
    first = conversation(make())
    agent = agent_for(first, ["hello"])
    await hold(first, agent)
    _ = [event async for event in agent.run("hi")]
    assert await first.save(agent) is None
    first.release()

    second = conversation(make())  # another process: its own store, the same database
    assert (second.folder.session_id, second.folder.agent_id) == (
        first.folder.session_id,
        first.folder.agent_id,
    )
    assert await second.take_over(lambda: asyncio.sleep(0))
    restored_agent = agent_for(second, [])
    assert await second.load(restored_agent) is None
    assert [t.text for t in restored_agent.get_turns()] == ["hi", "hello"]
    second.release()
    # The store holds the ids and the session; root holds no conversation file.
    root = make().root
    assert not list(root.rglob("*.json"))
    assert second.folder.workspace.parent == root / "workspaces"


async def test_two_tabs_in_two_processes_never_both_hold_the_conversation(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stored, "RENEW_EVERY", 0.05)
    monkeypatch.setattr(_session_conversation, "RENEW_EVERY", 0.05)
    # Two roots: each process's own table of sessions sees nothing of the other's
    # (a process mounts the shared storage where it likes).
    older = conversation(make("a"))
    agent = agent_for(older, ["one", "two"])
    await hold(older, agent)
    _ = [event async for event in agent.run("first")]
    assert await older.save(agent) is None
    closed: list[str] = []

    async def close_older() -> None:
        closed.append("older")
        older.release()

    older._close = close_older
    newer = conversation(make("b"))  # the other process: it cannot see the older's memory
    assert await newer.take_over(lambda: asyncio.sleep(0))
    assert newer.usable
    await wait_until(lambda: closed == ["older"], within=10)  # its renewal said so
    assert not older.usable
    # The older tab saves nothing more: the conversation is the newer's.
    _ = [event async for event in agent.run("second")]
    assert await older.save(agent) is None
    newer_agent = agent_for(newer, [])
    assert await newer.load(newer_agent) is None
    assert [t.text for t in newer_agent.get_turns()] == ["first", "one"]
    link = kit_store(newer.persistence)
    assert link is not None
    name = stored.lease_name(newer.folder.name)  # type: ignore[union-attr]
    holder = await link.run(lambda store: store.lease_holder(name))
    assert holder is not None and holder.holder == newer._holder_id
    newer.release()


async def test_an_older_tab_that_has_not_noticed_yet_saves_nothing(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every save renews the lease first: an older tab whose renewal has not run since
    the takeover finds out there, and writes nothing over the newer tab's conversation."""
    monkeypatch.setattr(_session_conversation, "RENEW_EVERY", 60.0)
    older = conversation(make("a"))
    agent = agent_for(older, ["one", "two"])
    await hold(older, agent)
    _ = [event async for event in agent.run("first")]
    assert await older.save(agent) is None
    closed: list[str] = []

    async def close_older() -> None:
        closed.append("older")

    older._close = close_older
    newer = conversation(make("b"))
    assert await newer.take_over(lambda: asyncio.sleep(0))
    assert older.usable  # it has not renewed since
    _ = [event async for event in agent.run("second")]
    assert await older.save(agent) is None
    await wait_until(lambda: closed == ["older"], within=10)
    assert not older.usable
    newer_agent = agent_for(newer, [])
    assert await newer.load(newer_agent) is None
    assert [t.text for t in newer_agent.get_turns()] == ["first", "one"]
    older.release()
    newer.release()


async def test_a_budget_spent_through_one_process_refuses_the_next_run_in_another(
    tmp_path: Path, make: Make
) -> None:
    budget = UserBudget(max_requests_per_day=1)
    first = start(tmp_path, persistent_agent(["hello"]), persistence=make(budget=budget))
    await restored(first)
    await first.session.submit("hi")
    await first.chat.settled()
    assert first.values.budget[-1] == "Today: 1 of 1 requests"
    await first.session.end()

    second = start(tmp_path, persistent_agent(["never sent"]), persistence=make(budget=budget))
    await restored(second)
    assert second.values.budget[-1] == "Today: 1 of 1 requests"  # shown as it starts
    await second.session.submit("again")
    await second.chat.settled()
    said = second.chat.said()
    assert said[-1][0] == "assistant" and "daily budget is spent" in said[-1][1]
    assert "1 of 1 requests" in said[-1][1]
    # Refused before the request: the restored conversation's usage, nothing more.
    assert second.agent.usage().requests == 1
    assert [t.text for t in second.agent.get_turns()] == ["hi", "hello"]
    other = start(
        tmp_path, persistent_agent(["bob's"]), persistence=make(budget=budget), user="bob"
    )
    await restored(other)
    await other.session.submit("hi")  # another user has a budget of their own
    await other.chat.settled()
    assert other.chat.said()[-1] == ("assistant", "bob's")
    await second.session.end()
    await other.session.end()


async def test_a_failed_run_is_charged_too(tmp_path: Path, make: Make) -> None:
    persistence = make(budget=UserBudget(max_requests_per_day=5))
    kit = start(tmp_path, persistent_agent([]), persistence=persistence)  # no reply: it fails
    await restored(kit)
    await kit.session.submit("hi")
    await kit.chat.settled()
    assert kit.agent.usage().requests >= 1
    assert kit.values.budget[-1] == f"Today: {kit.agent.usage().requests} of 5 requests"
    await kit.session.end()


async def test_the_sweep_runs_in_one_process_and_deletes_expired_conversations(
    make: Make,
) -> None:
    first, second = make(), make()
    gone = conversation(first)
    agent = agent_for(gone, ["hello"])
    await hold(gone, agent)
    _ = [event async for event in agent.run("hi")]
    assert await gone.save(agent) is None
    gone.release()
    busy = conversation(first, user="bob")
    await hold(busy, agent_for(busy, []))
    assert gone.folder.workspace.is_dir() and busy.folder.workspace.is_dir()
    later = time.time() + 8 * 24 * 3600  # past the 7-day ttl
    in_use = {busy.folder.directory.name}

    async def sweep(persistence: KitPersistence) -> list[str] | None:
        link = kit_store(persistence)
        assert link is not None
        return await link.run(lambda store: stored.sweep_store(persistence, store, in_use, later))

    names = await sweep(first)
    assert await sweep(second) is None  # swept lately, by another process
    assert names == [gone.folder.directory.name]
    stored.discard_folders(first, names)
    assert not gone.folder.workspace.exists() and busy.folder.workspace.is_dir()
    assert sorted(p.name for p in workspaces_root(first).iterdir()) == [busy.folder.name]  # type: ignore[union-attr]
    again = conversation(second)  # its records went with it: a new conversation
    assert not again.folder.kept and again.folder.session_id != gone.folder.session_id
    busy.release()


async def test_a_store_down_mid_conversation_is_told_and_nothing_is_lost(
    postgres_url: str, tmp_path: Path
) -> None:
    import sqlalchemy as sa

    url = sa.make_url(postgres_url)
    assert url.port is not None
    proxy = Proxy(url.port)
    await proxy.start()
    through = url.set(port=proxy.port).render_as_string(hide_password=False)
    store: Store = SqlStore(through, connect_timeout=1, timeout=1)
    persistence = KitPersistence(tmp_path / "root", store=store, trust_user_header=True)
    try:
        # Opened in a thread: the session's start waits for the store synchronously,
        # and the proxy runs on this loop.
        held = await asyncio.to_thread(conversation, persistence)
        agent = agent_for(held, ["one", "two", "three"])
        await hold(held, agent)
        _ = [event async for event in agent.run("first")]
        assert await held.save(agent) is None
        await proxy.cut()  # the database goes away, pooled connections and all
        _ = [event async for event in agent.run("second")]
        assert await held.save(agent) == STORE_DOWN_MESSAGE
        await proxy.start()  # back
        _ = [event async for event in agent.run("third")]
        assert await held.save(agent) is None
        held.release()
    finally:
        persistence.close()
        await proxy.cut()
    direct = KitPersistence(tmp_path / "root", store=postgres_url, trust_user_header=True)
    try:
        again = conversation(direct)
        restored_agent = agent_for(again, [])
        assert await again.take_over(lambda: asyncio.sleep(0))
        assert await again.load(restored_agent) is None
        texts = [t.text for t in restored_agent.get_turns()]
        assert texts == ["first", "one", "second", "two", "third", "three"]
        again.release()
    finally:
        direct.close()


def test_without_a_store_a_budget_keeps_its_counters_beside_the_records(tmp_path: Path) -> None:
    persistence = KitPersistence(
        tmp_path, budget=UserBudget(max_cost_per_day=1.0), trust_user_header=True
    )
    try:
        session = FakeSession(user="alice")
        held = SessionConversation(persistence, session, "chat")  # type: ignore[arg-type]
        assert not held.stored
        budget = session_budget(persistence, session, held)  # type: ignore[arg-type]
        assert budget is not None
        assert asyncio.run(budget.reserve()) is None
        budget.settle(TurnUsage(cost=0.25))
        assert asyncio.run(budget.flush()) == "Today: $0.25 of $1.00"
        assert (records_root(persistence) / ".store").is_dir()
    finally:
        persistence.close()


async def test_a_released_conversation_in_a_store_keeps_nothing_alive(make: Make) -> None:
    """A session frees what it held: the lease's renewal task and the store's calls
    keep no reference to a conversation that let go."""
    import gc
    import weakref

    persistence = make()
    held = conversation(persistence)
    agent = agent_for(held, ["hello"])
    await hold(held, agent)
    _ = [event async for event in agent.run("hi")]
    assert await held.save(agent) is None
    held.release()
    await asyncio.sleep(0.05)  # the lease is let go in the background
    collected = weakref.ref(held)
    del held, agent
    gc.collect()
    assert collected() is None


async def test_an_expired_conversation_is_deleted_when_its_user_comes_back(make: Make) -> None:
    from datetime import timedelta

    first = conversation(make())
    agent = agent_for(first, ["hello"])
    await hold(first, agent)
    _ = [event async for event in agent.run("hi")]
    assert await first.save(agent) is None
    (first.folder.workspace / "old.md").write_text("old")
    first.release()
    await asyncio.sleep(0.6)
    back = await asyncio.to_thread(conversation, make(ttl=timedelta(seconds=0.5)))
    assert not back.folder.kept and back.folder.session_id != first.folder.session_id
    assert not (back.folder.workspace / "old.md").exists()
    restored_agent = agent_for(back, [])
    assert await back.take_over(lambda: asyncio.sleep(0))
    assert await back.load(restored_agent) is None and restored_agent.get_turns() == []
    back.release()


async def test_an_approval_asked_in_one_process_is_decided_in_another_through_the_store(
    tmp_path: Path, make: Make
) -> None:
    """``ctx.agent_options()`` with a store: the agent keeps its approval and checkpoint
    journal in the kit's store (no files), under the conversation's scope, on the kit's
    own loop thread; a fresh session in another process shows the approval, decides it
    there, the tool runs once, and the checkpoints come back with the conversation."""
    first_kit = make()
    first = start(
        tmp_path,
        options_agent([ScriptedReply(tool_calls=[WRITE]), "Written."]),
        persistence=first_kit,
    )
    await restored(first)
    link = kit_store(first_kit)
    assert link is not None
    # The kit's store object itself, run on the one loop the kit uses (one engine).
    assert first.agent.store is link.store and first.agent.approval_dir is None
    assert bridge_for(link.store) is link._bridge
    await first.session.submit("write it")
    await wait_until(lambda: first.prompts.showing is not None)
    folder = first.session.conversation.folder  # type: ignore[union-attr]
    assert isinstance(folder, stored.StoredFolder)
    waiting = await link.run(lambda store: store.list_records("approval", scope=folder.scope))
    assert [r.status for r in waiting] == ["pending"]
    await first.session.end()  # the browser leaves with the approval on screen
    await first.chat.settled()
    assert not (folder.workspace / "a.txt").exists()
    # Nothing of the approval or the journal is in files: the records folder is empty.
    assert [p for p in folder.directory.rglob("*") if p.is_file()] == []

    second = start(tmp_path, options_agent(["Written."]), persistence=make())
    await wait_until(lambda: second.prompts.showing is not None, within=20)
    assert second.session.restored_waiting and "write_file" in second.browser.modals[-1]
    assert second.click("approve", values={})
    await second.chat.settled()
    assert (folder.workspace / "a.txt").read_text() == "A"
    assert second.chat.said()[-1][1].endswith("Written.")
    assert await second.agent.pending_approval_async() is None
    record = await approval_read_async(
        "deputy://approval/" + waiting[0].key,
        store=second.agent.store,  # type: ignore[arg-type]
    )
    assert record.status == "completed"
    assert [e["event"] for e in record.effects].count("executed") == 1  # ran once
    # The checkpoints came back from the store: the one write can be undone.
    checkpoints = await asyncio.to_thread(second.agent.list_checkpoints)
    assert sum(c.changes for c in checkpoints) == 1
    await second.session.end()

    third = start(tmp_path, options_agent([]), persistence=make())
    await restored(third)
    assert third.prompts.showing is None and not third.session.restored_waiting
    assert third.chat.said()[-1][1].endswith("Written.")
    await asyncio.to_thread(third.agent.rewind_files, checkpoints[0].id)
    assert not (folder.workspace / "a.txt").exists()
    # Deleting the conversation (the history drawer) takes the approval and the
    # journal with it.
    held = third.session.conversation
    assert held is not None and await held.delete(held.listing.current)
    assert await link.run(lambda store: store.list_records("approval")) == []
    assert await link.run(lambda store: store.list_records("file_checkpoint_index")) == []
    await third.session.end()
