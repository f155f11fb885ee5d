"""One browser session's view of its user's list of conversations (:mod:`._conversation_list`).

:class:`SessionListing` is made as the session starts, from the identity the kit
trusts (never from the browser): it reads the list once, decides which conversation
this page opens, and from then on adds, touches, selects, renames and deletes entries
of that one list. An id that is not in the list is refused and logged, whoever sent
it. Deleting a conversation deletes what the kit keeps of it (:func:`forget`): its
records in the store, its lease taken over first (a window still showing it is
closed at its next renewal), its records folder and its workspace.

Examples:
    >>> SessionListing.__name__
    'SessionListing'
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..persistence.store import Store
from ._conversation_list import (
    MAIN_ID,
    ConversationEntry,
    Listing,
    change_listing,
    clean_title,
    conversation_name,
    first_title,
    list_key,
    new_id,
    read_listing,
    valid_id,
)
from ._kit_store import KitStore
from ._stored_conversations import CONVERSATION_KIND, discard_folders, lease_name
from ._strings import DEFAULT_STRINGS, KitStrings

if TYPE_CHECKING:
    from ._conversations import KitPersistence

logger = logging.getLogger(__name__)

__all__ = ["SessionListing", "capped_note", "forget"]

_DELETER = "deleting"


async def forget_records(store: Store, name: str) -> None:
    """Delete the records of the conversation ``name`` (taking its lease over first)."""
    lease = await store.acquire_lease(lease_name(name), _DELETER, 5.0, take_over=True)
    record = await store.get(CONVERSATION_KIND, name)
    if record is not None and record.scope is not None:
        await store.delete_scope(record.scope)  # its session, approvals, journal, results
    await store.delete_scope(name)
    await store.delete(CONVERSATION_KIND, name)
    if lease is not None:
        await store.release_lease(lease)


async def forget(
    persistence: KitPersistence, store_link: KitStore | None, names: list[str]
) -> None:
    """Delete everything the kit keeps of the conversations ``names``: their records
    (with a store) and their folders (a worker thread)."""
    if not names:
        return
    if store_link is not None:
        for name in names:
            await store_link.run(lambda store, name=name: forget_records(store, name))  # type: ignore[misc]
    await asyncio.to_thread(discard_folders, persistence, names)


def capped_note(titles: list[str], limit: int, strings: KitStrings = DEFAULT_STRINGS) -> str | None:
    """What the chat says when conversations past the cap were deleted (None: none).

    Examples:
        >>> capped_note(["a", "b"], 2)
        'You can keep 2 conversations here, so the oldest ones (“a”, “b”) were deleted.'
    """
    if not titles:
        return None
    shown = ", ".join(f"“{t}”" for t in titles[:3])
    if len(titles) > 3:
        shown += strings.format("files_more", count=len(titles) - 3)
    name = "capped_many" if len(titles) > 1 else "capped_one"
    return strings.format(name, limit=limit, titles=shown)


class SessionListing:
    """A user's list of conversations in one chat, as one session uses it.

    Attributes:
        current: The id of the conversation this session opened.
        chat_key: What names the current conversation's folder (for ``folder_name``).
    """

    def __init__(
        self, persistence: KitPersistence, link: KitStore, kind: str, key: str, chat_id: str
    ) -> None:
        """Read the list (waits for the store: see ``KitStore.wait``).

        Raises:
            StoreUnavailableError: the store does not answer.
        """
        self.persistence = persistence
        self._link = link
        self._kind, self._key, self._chat_id = kind, key, chat_id
        self.key = list_key(kind, key, chat_id)
        listing = link.wait(lambda store: read_listing(store, self.key, self.cutoff()))
        self.current = listing.opens()
        self.chat_key = chat_id if self.current == MAIN_ID else f"{chat_id}\0{self.current}"
        self.listed = listing.find(self.current) is not None
        self.dropped: list[str] = []  # titles deleted past the cap (the chat says so)

    def cutoff(self) -> float:
        """Entries last used before this are expired."""
        return time.time() - self.persistence.ttl.total_seconds()

    def name_of(self, conversation_id: str) -> str:
        return conversation_name(self._kind, self._key, self._chat_id, conversation_id)

    async def _change(self, change: object) -> tuple[Listing, object]:
        return await self._link.run(
            lambda store: change_listing(store, self.key, self.cutoff(), change)  # type: ignore[arg-type]
        )

    async def read(self) -> Listing:
        """The list now (what the drawer shows)."""
        return await self._link.run(lambda store: read_listing(store, self.key, self.cutoff()))

    async def kept(self, message: str | None) -> list[str]:
        """The current conversation got a message: list it (titled by its first message)
        and make it the active one. The names of conversations to delete (past the cap,
        expired)."""
        now = time.time()
        title = first_title(message or "")
        limit = self.persistence.max_conversations

        def change(listing: Listing) -> list[ConversationEntry]:
            entry = listing.find(self.current)
            listing.put(
                ConversationEntry(self.current, title, now, now)
                if entry is None
                else ConversationEntry(entry.id, entry.title, entry.created, now)
            )
            listing.active = self.current
            return listing.cap(limit)

        listing, dropped = await self._change(change)
        self.listed = True
        assert isinstance(dropped, list)
        self.dropped = [entry.title for entry in dropped]
        if dropped:
            logger.info("deleted %d conversation(s) past the per-user cap", len(dropped))
        return [self.name_of(i) for i in listing.dropped]

    async def touched(self) -> None:
        """The current conversation was saved: it moves to the top of the list."""
        if not self.listed:
            return
        now = time.time()

        def change(listing: Listing) -> None:
            entry = listing.find(self.current)
            if entry is not None:
                listing.put(ConversationEntry(entry.id, entry.title, entry.created, now))

        await self._change(change)

    async def select(self, value: object) -> bool:
        """Make ``value`` (an id from the browser) the conversation the next page opens;
        False (logged) when it is not one of this user's."""

        def change(listing: Listing, conversation_id: str) -> None:
            listing.active = conversation_id

        return await self._owned(value, "open", change) is not None

    async def start_new(self) -> None:
        """The next page opens a new conversation (listed from its first message)."""

        def change(listing: Listing) -> None:
            listing.active = new_id()

        await self._change(change)

    async def rename(self, value: object, title: object) -> bool:
        """Rename one of this user's conversations; False when refused."""
        text = clean_title(title)

        def change(listing: Listing, conversation_id: str) -> None:
            entry = listing.find(conversation_id)
            if entry is not None and text is not None:
                listing.put(ConversationEntry(entry.id, text, entry.created, entry.updated))

        return await self._owned(value, "rename", change) is not None and text is not None

    async def retitle(self, first: str, title: str) -> bool:
        """Title the current conversation ``title`` (a model's), unless its title is no
        longer the one its first message ``first`` gave it (the user renamed it, or it
        was deleted meanwhile); whether it changed."""
        expected = first_title(first)

        def change(listing: Listing) -> bool:
            entry = listing.find(self.current)
            if entry is None or entry.title != expected:
                return False
            listing.put(ConversationEntry(entry.id, title, entry.created, entry.updated))
            return True

        _, changed = await self._change(change)
        return changed is True

    async def delete(self, value: object) -> str | None:
        """Take one of this user's conversations off the list (the caller deletes its
        records and folders); its id, or None when refused."""

        def change(listing: Listing, conversation_id: str) -> None:
            listing.remove(conversation_id)

        return await self._owned(value, "delete", change)

    async def _owned(
        self, value: object, what: str, change: Callable[[Listing, str], None]
    ) -> str | None:
        """Apply ``change`` to the list when ``value`` is an id in this user's list (one
        read, one write); else None, nothing written, and logged (a forged id, another
        user's, or one deleted meanwhile)."""
        conversation_id = valid_id(value)

        def checked(listing: Listing) -> None:
            if conversation_id is None or listing.find(conversation_id) is None:
                raise _NotOwned
            change(listing, conversation_id)

        try:
            if conversation_id is None:
                raise _NotOwned
            await self._change(checked)
        except _NotOwned:
            logger.warning(
                "refused to %s a conversation that is not in this user's list (%r)",
                what,
                str(value)[:40],
            )
            return None
        return conversation_id


class _NotOwned(Exception):
    """An id that is not in the user's list (the list is not written)."""
