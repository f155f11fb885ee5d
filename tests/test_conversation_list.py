"""Each user's list of conversations (the history drawer's), on SQLite and PostgreSQL.

What the list must hold against: another user's id, a forged id and a deleted one
(refused, logged, nothing changed), the per-user cap (the oldest deleted, with a note),
the TTL per conversation, two writers at once, a damaged list record.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny.persistence import SqlStore
from deputy_shiny.shiny import KitPersistence
from deputy_shiny.shiny._conversation_list import (
    LIST_KIND,
    ConversationEntry,
    Listing,
    change_listing,
    read_listing,
)
from deputy_shiny.shiny._conversations import kit_store, workspaces_root
from deputy_shiny.shiny._session_conversation import SessionConversation
from deputy_shiny.shiny._stored_conversations import CONVERSATION_KIND, SESSION_KIND
from tests.test_kit_conversations import FakeSession


@pytest.fixture(params=["sqlite", "postgres"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'kit.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    made: list[KitPersistence] = []

    def build(**options: Any) -> KitPersistence:
        persistence = KitPersistence(
            tmp_path / "root", store=SqlStore(url), trust_user_header=True, **options
        )
        made.append(persistence)
        return persistence

    yield build
    for persistence in made:
        persistence.close()


def open_for(persistence: KitPersistence, user: str) -> SessionConversation:
    return SessionConversation(persistence, FakeSession(user=user), "chat")  # type: ignore[arg-type]


async def converse(persistence: KitPersistence, user: str, message: str) -> SessionConversation:
    """The user's page opens, takes its conversation, and its first message keeps it."""
    held = open_for(persistence, user)
    assert await held.take_over(lambda: asyncio.sleep(0))
    held.loaded = True
    note = await held.keep_async(message)
    held.note = note  # type: ignore[attr-defined]
    return held


async def titles(held: SessionConversation) -> list[str]:
    return [entry.title for entry in (await held.listing.read()).entries]


async def test_new_conversations_are_listed_newest_first_titled_by_their_first_message(
    make: Any,
) -> None:
    persistence = make()
    first = await converse(persistence, "alice", "  Plan   the\nweek  ")
    await first.start_new()
    first.release()
    second = await converse(persistence, "alice", "x" * 100)
    assert await titles(second) == ["x" * 59 + "…", "Plan the week"]
    assert second.folder.name != first.folder.name  # each its own records and workspace
    second.release()


async def test_other_users_ids_forged_and_deleted_ones_are_refused_and_logged(
    make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    persistence = make()
    alice = await converse(persistence, "alice", "alice one")
    await alice.start_new()
    alice.release()
    alice = await converse(persistence, "alice", "alice two")
    target = alice.listing.current
    alice.release()
    bob = await converse(persistence, "bob", "bob one")
    assert await titles(bob) == ["bob one"]
    with caplog.at_level(logging.WARNING):
        for forged in (target, "../etc", "c" + "0" * 20, {"id": 1}, None):
            assert not await bob.switch_to(forged)
            assert await bob.delete(forged) is False
            assert not await bob.listing.rename(forged, "pwned")
    assert caplog.text.count("not in this user's list") == 15
    assert bob._session.sent == []  # type: ignore[attr-defined]  # no reload was asked
    bob.release()
    alice = open_for(persistence, "alice")
    assert await titles(alice) == ["alice two", "alice one"]
    # A deleted conversation is refused as well, and its records are gone.
    assert await alice.delete(target)
    link = kit_store(persistence)
    assert link is not None
    name = alice.listing.name_of(target)
    assert await link.run(lambda store: store.get(CONVERSATION_KIND, name)) is None
    assert await link.run(lambda store: store.get(SESSION_KIND, name)) is None
    assert not (workspaces_root(persistence) / name).exists()
    assert not await alice.switch_to(target)
    alice.release()


async def test_past_the_cap_the_oldest_is_deleted_and_the_chat_says_so(make: Any) -> None:
    persistence = make(max_conversations=2)
    names = []
    for message in ("one", "two"):
        held = await converse(persistence, "alice", message)
        assert held.note is None  # type: ignore[attr-defined]
        names.append(held.folder.name)
        await held.start_new()
        held.release()
    third = await converse(persistence, "alice", "three")
    assert third.note == (  # type: ignore[attr-defined]
        "You can keep 2 conversations here, so the oldest one (“one”) was deleted."
    )
    assert await titles(third) == ["three", "two"]
    link = kit_store(persistence)
    assert link is not None
    assert await link.run(lambda store: store.get(CONVERSATION_KIND, names[0])) is None
    assert await link.run(lambda store: store.get(CONVERSATION_KIND, names[1])) is not None
    assert not (workspaces_root(persistence) / names[0]).exists()
    third.release()


async def test_the_ttl_applies_per_conversation(make: Any) -> None:
    persistence = make()
    link = kit_store(persistence)
    assert link is not None
    held = await converse(persistence, "alice", "old one")
    key = held.listing.key
    await held.start_new()
    held.release()

    def age(listing: Listing) -> None:  # the first was last used 8 days ago
        old = listing.entries[0]
        listing.entries = [
            ConversationEntry(old.id, old.title, old.created, time.time() - 8 * 86400)
        ]

    await link.run(lambda store: change_listing(store, key, 0.0, age))
    fresh = await converse(persistence, "alice", "new one")
    assert await titles(fresh) == ["new one"]  # the expired one is not listed
    fresh.release()


async def test_two_writers_at_once_lose_nothing(make: Any) -> None:
    persistence = make()
    link = kit_store(persistence)
    assert link is not None

    def adding(n: int) -> Any:
        def change(listing: Listing) -> None:
            listing.put(ConversationEntry(f"c{n:020x}", f"t{n}", time.time(), time.time()))

        return lambda store: change_listing(store, "k" * 40, 0.0, change)

    await asyncio.gather(*(link.run(adding(n)) for n in range(6)))
    listing = await link.run(lambda store: read_listing(store, "k" * 40, 0.0))
    assert sorted(e.title for e in listing.entries) == [f"t{n}" for n in range(6)]


async def test_a_damaged_list_reads_empty_and_is_written_anew(
    make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    persistence = make()
    link = kit_store(persistence)
    assert link is not None
    held = await converse(persistence, "alice", "first")
    key = held.listing.key
    held.release()
    junk = {"entries": [{"id": "../x", "title": 3}, "nonsense"], "active": "<script>"}
    await link.run(lambda store: store.put(LIST_KIND, key, junk))
    again = open_for(persistence, "alice")
    assert await titles(again) == [] and again.listing.current == "main"
    again.release()
