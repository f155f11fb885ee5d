"""What many conversations per user cost: the history drawer's list and a switch.

On SQLite and on PostgreSQL (a server of its own, started by the tests' helper, unless
``--postgres URL`` names one), a user with ``--conversations`` saved conversations
(default 1,000) in the kit's store, one of them ``--turns`` turns long (default 500:
250 questions and 250 replies of about 400 characters):

- *drawer open*: what the server does when the drawer is shown, from reading the
  user's list in the store to the JSON of the ``history_update`` message sent;
- *switch*: what picking that long conversation costs the server, from the click's
  message to its transcript ready to send: the list's ``active`` written, then the
  reloaded page's session opening the conversation (list read, its ids, the lease),
  loading the saved session into a new Agent, and its turns made chat messages.

The page's own reload (the browser fetching the page again) is not in it. Each is the
median of ``--rounds`` rounds. The last lines, one per store, are the issue's:
``drawer open, 1000 conversations: X ms`` and ``switch to a 500-turn conversation: Y ms``.

Usage: .venv/bin/python benchmarks/conversations.py [--conversations 1000] [--turns 500]
[--rounds 5] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from deputy_shiny import Agent
from deputy_shiny.messages import ContentText, Turn
from deputy_shiny.shiny import KitPersistence
from deputy_shiny.shiny._conversation_list import (
    ConversationEntry,
    Listing,
    change_listing,
    new_id,
)
from deputy_shiny.shiny._history_drawer import history_update
from deputy_shiny.shiny._session_conversation import SessionConversation
from deputy_shiny.shiny._stored_conversations import SESSION_KIND
from deputy_shiny.shiny._transcript import transcript_messages
from deputy_shiny.testing import ScriptedModel

ROOT = Path(__file__).resolve().parent.parent


class _Session:
    """What a conversation needs of a Shiny session: a trusted user, a place to send."""

    def __init__(self) -> None:
        self.user = "benchmark-user"
        self.id = "benchmark"

    def root_scope(self) -> _Session:
        return self

    def on_ended(self, callback: Any) -> None:
        pass

    async def send_custom_message(self, kind: str, message: Any) -> None:
        pass


def _turns(count: int) -> list[Turn]:
    turns = []
    for n in range(count // 2):
        question = f"Question {n}: what does part {n} of the report say about the tides?"
        answer = " ".join(f"Part {n} sentence {k} says the water rises." for k in range(10))
        turns.append(Turn(role="user", contents=[ContentText(text=question)]))
        turns.append(Turn(role="assistant", contents=[ContentText(text=answer)]))
    return turns


def _agent(held: SessionConversation) -> Agent:
    folder = held.folder
    return Agent(
        ScriptedModel([]),
        working_dir=folder.workspace,
        session_id=folder.session_id,
        agent_id=folder.agent_id,
        store=held.store,
    )


async def _seed(persistence: KitPersistence, conversations: int, turns: int) -> str:
    """The user's conversations: ``conversations`` listed, the long one saved; its id."""
    held = SessionConversation(persistence, _Session(), "chat")  # type: ignore[arg-type]
    assert await held.take_over(lambda: asyncio.sleep(0))
    held.loaded = True
    await held.keep_async("The long one")
    agent = _agent(held)
    agent.set_turns(_turns(turns))
    assert await held.save(agent) is None
    long_id = held.listing.current
    now = time.time()

    def fill(listing: Listing) -> None:
        for n in range(conversations - 1):
            title = f"Conversation {n}: the tides of the northern bay"
            listing.put(ConversationEntry(new_id(), title, now - 60 - n, now - 60 - n))
        listing.active = None

    link = persistence._link
    assert link is not None
    await link.run(lambda store: change_listing(store, held.listing.key, 0.0, fill))
    held.release()
    name = held.listing.name_of(long_id)
    record = await link.run(lambda store: store.get(SESSION_KIND, name))
    assert record is not None  # the long one is saved
    return long_id


async def _median_ms(work: Callable[[], Awaitable[Any]], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        await work()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def measure(url: str, conversations: int, turns: int, rounds: int) -> tuple[float, float]:
    """(drawer open ms, switch ms) on the store at ``url``."""
    persistence = KitPersistence(
        tempfile.mkdtemp(prefix="deputy-bench-"), store=url, trust_user_header=True
    )
    try:
        long_id = await _seed(persistence, conversations, turns)
        viewer = SessionConversation(persistence, _Session(), "chat")  # type: ignore[arg-type]

        async def drawer_open() -> None:
            listing = await viewer.listing.read()
            assert len(listing.entries) == conversations
            json.dumps(history_update(listing.entries, None))

        async def switch() -> None:
            assert await viewer.switch_to(long_id)
            held = SessionConversation(persistence, _Session(), "chat")  # type: ignore[arg-type]
            assert await held.take_over(lambda: asyncio.sleep(0))
            agent = _agent(held)
            assert await held.load(agent) is None
            assert len(list(transcript_messages(agent.get_turns()))) == turns
            held.release()

        drawer_ms = await _median_ms(drawer_open, rounds)
        switch_ms = await _median_ms(switch, rounds)
        viewer.release()
        return drawer_ms, switch_ms
    finally:
        persistence.close()


async def main(
    conversations: int = 1000,
    turns: int = 500,
    rounds: int = 5,
    postgres: str | None = None,
    upload_mb: int = 10,
) -> dict[str, tuple[float, float]]:
    """Measure on SQLite and (with ``postgres``) PostgreSQL; print one line each last,
    then (``upload_mb`` > 0) the upload of a PDF of that size to the model's turn."""
    stores = {"SQLite": f"sqlite+aiosqlite:///{Path(tempfile.mkdtemp()) / 'kit.db'}"}
    if postgres is not None:
        stores["PostgreSQL"] = postgres
    results = {
        name: await measure(url, conversations, turns, rounds) for name, url in stores.items()
    }
    for name, (drawer_ms, switch_ms) in results.items():
        print(f"{name}: drawer open, {conversations} conversations: {drawer_ms:.1f} ms")
        print(f"{name}: switch to a {turns}-turn conversation: {switch_ms:.1f} ms")
    if upload_mb > 0:
        sys.path.insert(0, str(ROOT / "benchmarks"))  # _uploads, beside this file
        from _uploads import upload_line, upload_to_turn

        upload_ms, _ = await upload_to_turn(rounds, upload_mb)
        print(upload_line(upload_ms, upload_mb))
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", help="a postgresql+psycopg:// URL (default: start one)")
    parser.add_argument("--upload-mb", type=int, default=10, help="0: no upload line")
    args = parser.parse_args()
    server = None
    url = args.postgres
    if url is None:
        sys.path.insert(0, str(ROOT))
        from tests._postgres import start_postgres

        server = start_postgres()
        url = server.database()
    try:
        asyncio.run(main(args.conversations, args.turns, args.rounds, url, args.upload_mb))
    finally:
        if server is not None:
            server.stop()
