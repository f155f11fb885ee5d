"""Each user's list of conversations in one chat: what shinychat's history drawer shows.

With ``KitPersistence`` a user has many conversations per chat. Each is a conversation
as the kit keeps one (its own records, workspace, lease and approvals, named by a hash
of the user's key, the chat and the conversation's id: :func:`conversation_name`), and
one record per user and chat lists them: kind ``conversation-list``, keyed by the hash
of the user's key and the chat (no user key reaches the store), holding

- ``entries``: each conversation's id, title and times, newest first;
- ``active``: the conversation this user's next page opens (a switch or "New
  conversation" sets it, then the page reloads: the kit restores a conversation as a
  session starts, so every switch goes through the one restore path, in any process).

The list lives in the kit's store (``KitPersistence(store=)``), else in a file store
under ``root/records/.store``: one source of truth that every process sharing it sees.
It is changed read-modify-write, fenced by the record's revision (a concurrent change
in another process makes the writer read again). An entry unused for the
persistence's ``ttl`` is dropped as the list is read (the sweep deletes its records);
past ``KitPersistence(max_conversations=)`` entries (200) the oldest are deleted, and
the chat says so.

Only ids in the user's own list are ever opened, renamed or deleted: the list is found
from the trusted identity (never from the browser), so another user's id, a forged id
or a deleted one is simply not there, and the refusal is logged.

Examples:
    >>> conversation_name("user", "alice", "chat", MAIN_ID) == conversation_name(
    ...     "user", "bob", "chat", MAIN_ID)
    False
    >>> first_title("  Plan   the\\nweek ")
    'Plan the week'
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from ..errors import PersistenceError, StoreConflictError, StoreUnavailableError
from ..persistence.store import Store, StoredRecord
from ._conversations import folder_name

logger = logging.getLogger(__name__)

__all__ = [
    "LIST_KIND",
    "MAIN_ID",
    "ConversationEntry",
    "Listing",
    "change_listing",
    "conversation_name",
    "first_title",
    "read_listing",
]

T = TypeVar("T")

LIST_KIND = "conversation-list"
MAIN_ID = "main"
"""The id of the conversation a user had before lists (its name is the chat's own, so a
conversation saved by an earlier version of the kit is the first in the list)."""
TITLE_CHARS = 60
"""A title made from the first message keeps at most this many characters."""
MAX_TITLE = 120
"""A title given by the user keeps at most this many characters."""
_ID = re.compile(r"main|c[0-9a-f]{20}")
_RETRIES = 8


def new_id() -> str:
    """A fresh conversation id (random: nothing of the user in it)."""
    return "c" + secrets.token_hex(10)


def valid_id(value: object) -> str | None:
    """``value`` when it has the shape of a conversation id, else None."""
    return value if isinstance(value, str) and _ID.fullmatch(value) else None


def conversation_name(kind: str, key: str, chat_id: str, conversation_id: str) -> str:
    """The name of one conversation's records and workspace (a hash of the user's key,
    the chat and the id; the first conversation keeps the chat's own name)."""
    if conversation_id == MAIN_ID:
        return folder_name(kind, key, chat_id)
    return folder_name(kind, key, f"{chat_id}\0{conversation_id}")


def list_key(kind: str, key: str, chat_id: str) -> str:
    """The key of a user's list in one chat (the hash of their first conversation)."""
    return folder_name(kind, key, chat_id)


def first_title(message: str) -> str:
    """A title from the first message: its words, cut at :data:`TITLE_CHARS`."""
    text = " ".join(message.split())
    if len(text) > TITLE_CHARS:
        text = text[: TITLE_CHARS - 1].rstrip() + "…"
    return text or "New conversation"


def clean_title(value: object) -> str | None:
    """A title the user typed: its words (control characters gone), cut at
    :data:`MAX_TITLE`; None when nothing is left."""
    if not isinstance(value, str):
        return None
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in value).split())
    return text[:MAX_TITLE] or None


@dataclass(frozen=True)
class ConversationEntry:
    """One conversation in the list: its id, title and times (Unix seconds)."""

    id: str
    title: str
    created: float
    updated: float

    def as_payload(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "created": self.created,
            "updated": self.updated,
        }

    def meta(self) -> dict[str, Any]:
        """The entry as shinychat's drawer reads it (a ``ConversationMeta`` dump)."""
        return {
            "id": self.id,
            "title": self.title,
            "created_at": _iso(self.created),
            "updated_at": _iso(self.updated),
            "size_bytes": 0,
        }


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


@dataclass
class Listing:
    """A user's list as read: ``entries`` newest first, ``active`` the conversation the
    next page opens (maybe a new one not in the list yet), ``revision`` the record's."""

    entries: list[ConversationEntry] = field(default_factory=list)
    active: str | None = None
    revision: int = 0
    dropped: list[str] = field(default_factory=list)  # expired or past the cap (to delete)

    def find(self, conversation_id: str) -> ConversationEntry | None:
        return next((e for e in self.entries if e.id == conversation_id), None)

    def opens(self) -> str:
        """The conversation a new page opens: the active one, else the newest, else the
        first (:data:`MAIN_ID`)."""
        if self.active is not None:
            return self.active
        return self.entries[0].id if self.entries else MAIN_ID

    def put(self, entry: ConversationEntry) -> None:
        """Add or replace ``entry``, keeping newest first."""
        self.entries = [e for e in self.entries if e.id != entry.id] + [entry]
        self.entries.sort(key=lambda e: e.updated, reverse=True)

    def remove(self, conversation_id: str) -> bool:
        before = len(self.entries)
        self.entries = [e for e in self.entries if e.id != conversation_id]
        if self.active == conversation_id:
            self.active = None
        return len(self.entries) != before

    def cap(self, limit: int) -> list[ConversationEntry]:
        """Drop the oldest entries past ``limit``; the dropped ones."""
        dropped = self.entries[limit:]
        self.entries = self.entries[:limit]
        self.dropped += [e.id for e in dropped]
        return dropped

    def payload(self) -> dict[str, Any]:
        return {"active": self.active, "entries": [e.as_payload() for e in self.entries]}


def _entry(data: object) -> ConversationEntry | None:
    if not isinstance(data, dict):
        return None
    entry_id, title = valid_id(data.get("id")), data.get("title")
    created, updated = data.get("created"), data.get("updated")
    if entry_id is None or not isinstance(title, str):
        return None
    if not isinstance(created, (int, float)) or not isinstance(updated, (int, float)):
        return None
    return ConversationEntry(entry_id, title[:MAX_TITLE], float(created), float(updated))


def parse_listing(record: StoredRecord | None, cutoff: float) -> Listing:
    """The list in ``record`` (an empty one when there is none); entries last used
    before ``cutoff`` are dropped (their ids in ``dropped``)."""
    if record is None:
        return Listing()
    raw = record.payload.get("entries")
    entries = [e for e in map(_entry, raw if isinstance(raw, list) else []) if e is not None]
    listing = Listing(revision=record.revision, active=valid_id(record.payload.get("active")))
    seen: set[str] = set()
    for entry in entries:
        if entry.updated < cutoff:
            listing.dropped.append(entry.id)
        elif entry.id not in seen:  # sorted once below (a put per entry would sort each)
            seen.add(entry.id)
            listing.entries.append(entry)
    listing.entries.sort(key=lambda e: e.updated, reverse=True)
    if listing.active in listing.dropped:
        listing.active = None
    return listing


async def read_listing(store: Store, key: str, cutoff: float) -> Listing:
    """The user's list (see :func:`parse_listing`); a damaged record reads as empty
    (logged: the conversations' own records are untouched)."""
    try:
        return parse_listing(await store.get(LIST_KIND, key), cutoff)
    except StoreUnavailableError:
        raise
    except PersistenceError as exc:
        logger.warning("a conversation list is damaged; it starts empty: %s", exc)
        return Listing(revision=-1)  # written over whatever is there


async def change_listing(
    store: Store, key: str, cutoff: float, change: Callable[[Listing], T]
) -> tuple[Listing, T]:
    """Read the list, apply ``change`` (which edits it in place and returns what the
    caller wants back), write it over the revision read; read again on a concurrent
    change. The list as written, and ``change``'s result."""
    for _ in range(_RETRIES):
        listing = await read_listing(store, key, cutoff)
        result = change(listing)
        expect = None if listing.revision < 0 else listing.revision
        try:
            await store.put(LIST_KIND, key, listing.payload(), expect_revision=expect)
        except StoreConflictError:
            continue
        return replace(listing), result
    raise StoreConflictError("The conversation list kept changing; try again.")


def now() -> float:
    """The time entries are stamped with."""
    return time.time()
