"""Kit conversations in a :class:`~deputy_shiny.persistence.Store` (``KitPersistence(store=)``).

With a store, what the kit saves of a conversation is records, named by the same hash
as the file layout's folder (``<name>``, 40 hex digits; no user key reaches the store),
all in one scope, the conversation's session (``scope_for(session_id)``, the scope its
agent keeps its own records under with ``Agent(store=ctx.store)``):

- kind ``conversation``, key ``<name>``: its ids (``session_id``, ``agent_id``), created
  once with ``expect_revision=0`` as its first message is sent (the conversation is
  *kept* from then on);
- kind ``session``, key ``<name>``: the saved session (the payload
  ``agent.save_session`` writes to a file);
- the agent's: its durable approvals, its checkpoint journal and its offloaded tool
  results (:mod:`deputy_shiny.persistence.approval_records`,
  :mod:`deputy_shiny.persistence.checkpoints`);
- the lease ``conversation:<name>``: which browser session (in any process sharing the
  store) holds the conversation. A newer session takes it over; the older one learns it
  at its next renewal (every :data:`RENEW_EVERY` seconds, and before every save) and
  is closed. A lease nobody renews (its process died) is free after
  :data:`LEASE_SECONDS`.

One scope for all of it: every save touches the ids record, so the conversation's
approvals, journal and results stay as long as it does, and go with it (expired,
swept, or a new conversation started). ``root`` keeps only the workspaces
(``root/workspaces/<name>``), which every process must see.

The TTL sweep runs in one process per :data:`SWEEP_EVERY` seconds of all that share the
store (``claim_sweep``): ``sweep`` deletes every conversation unused for ``ttl``, and
the sweeper deletes the workspaces and folders of the conversations it deleted.

Examples:
    >>> lease_name("0" * 40)
    'conversation:0000000000000000000000000000000000000000'
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._util.version import package_version
from ..errors import PersistenceError, StoreConflictError, StoreUnavailableError
from ..feedback.records import FEEDBACK_SCOPE
from ..persistence.sessions import session_payload
from ..persistence.store import Store, StoredRecord
from ..persistence.store_bridge import scope_for
from ._conversations import (
    _NAME,
    UNKEPT_GRACE,
    KitPersistence,
    _discard,
    _ensure_layout,
    _prepare,
    folder_name,
    records_root,
    workspaces_root,
)
from ._kit_store import KitStore

logger = logging.getLogger(__name__)

__all__ = [
    "CONVERSATION_KIND",
    "LEASE_SECONDS",
    "RENEW_EVERY",
    "SESSION_KIND",
    "StoredFolder",
    "lease_name",
    "open_stored",
    "sweep_store",
]

CONVERSATION_KIND = "conversation"
SESSION_KIND = "session"
LEASE_SECONDS = 15.0
"""How long a conversation's lease lasts unless renewed (a dead process's is free then)."""
RENEW_EVERY = 4.0
"""Seconds between two renewals of a held lease (well inside :data:`LEASE_SECONDS`)."""
SWEEP_EVERY = 600.0
"""Seconds between two sweeps, over every process sharing the store."""


def lease_name(name: str) -> str:
    """The lease of the conversation ``name``."""
    return f"conversation:{name}"


@dataclass
class StoredFolder:
    """One user's conversation kept in a store: its name (the records' key), its folders
    under ``root``, and the ids its agent must keep (its session's is the records' scope).

    Attributes:
        kept: True from its first message on (its ``conversation`` record exists).
        overwrite: Its ``conversation`` record was unreadable: keeping it replaces it.
    """

    name: str
    directory: Path
    workspace: Path
    session_id: str
    agent_id: str
    kept: bool = False
    overwrite: bool = False

    @property
    def approvals(self) -> Path:
        return self.directory / "approvals"

    @property
    def checkpoints(self) -> Path:
        return self.directory / "checkpoints"

    @property
    def scope(self) -> str:
        """The scope of the conversation's records: its session's, as its agent's."""
        return scope_for(self.session_id)

    def ids(self) -> dict[str, str]:
        return {"session_id": self.session_id, "agent_id": self.agent_id}

    async def keep(self, store: Store) -> None:
        """Write the conversation's ids, once (its first message)."""
        if self.kept:
            await store.touch(CONVERSATION_KIND, self.name)
            return
        # A conflict: written already (by this conversation's earlier session).
        with contextlib.suppress(StoreConflictError):
            await store.put(
                CONVERSATION_KIND,
                self.name,
                self.ids(),
                scope=self.scope,
                expect_revision=None if self.overwrite else 0,
            )
        self.kept, self.overwrite = True, False

    def discard_if_unkept(self) -> bool:
        """Remove the folders of a conversation never kept (no message was sent)."""
        if self.kept:
            return False
        for directory in (self.directory, self.workspace):
            _discard(directory)
        return True


def _ids(record: StoredRecord | None) -> dict[str, str] | None:
    if record is None:
        return None
    data = record.payload
    if all(isinstance(data.get(k), str) and data[k] for k in ("session_id", "agent_id")):
        return {"session_id": data["session_id"], "agent_id": data["agent_id"]}
    return None


def open_stored(
    persistence: KitPersistence, link: KitStore, kind: str, key: str, chat_id: str
) -> StoredFolder:
    """The user's conversation: its ids read from the store (an expired one is deleted
    first), its folders made ready. Called from a session's synchronous start: it waits
    for the store at most :data:`~._kit_store.START_WAIT` seconds.

    Raises:
        PersistenceError: the folders cannot be made; a StoreUnavailableError when the
            store does not answer.
    """
    _ensure_layout(persistence)
    name = folder_name(kind, key, chat_id)
    directory = records_root(persistence) / name
    workspace = workspaces_root(persistence) / name
    cutoff = time.time() - persistence.ttl.total_seconds()

    async def read(store: Store) -> tuple[dict[str, str] | None, bool, bool]:
        """(ids, damaged, expired)."""
        try:
            record = await store.get(CONVERSATION_KIND, name)
        except StoreUnavailableError:
            raise
        except PersistenceError as exc:
            logger.warning("a conversation's ids record is damaged; starting anew: %s", exc)
            return None, True, False
        if record is None:
            return None, False, False
        # Every save touches the ids record too: its time is the conversation's last use.
        if record.updated_at < cutoff:
            if record.scope is not None:
                await store.delete_scope(record.scope)  # the agent's records go too
            await store.delete_scope(name)
            return None, False, True
        return _ids(record), False, False

    ids, damaged, expired = link.wait(read)
    if expired:
        for old in (directory, workspace):
            _discard(old)
    files = _prepare(directory, workspace)  # the folders (its ids are the store's)
    folder = StoredFolder(name, directory, workspace, files.session_id, files.agent_id)
    if ids is not None:
        folder.session_id, folder.agent_id = ids["session_id"], ids["agent_id"]
        folder.kept = True
    folder.overwrite = damaged
    return folder


def session_metadata(folder: StoredFolder) -> dict[str, Any]:
    """What a session saved to the store says of itself (informational)."""
    return {
        "deputy_shiny_version": package_version(),
        "agent_id": folder.agent_id,
        "session_id": folder.session_id,
    }


def stored_session(agent: Any, folder: StoredFolder) -> dict[str, Any]:
    """The agent's session as a record's payload (reads offloaded results: a worker thread)."""
    return session_payload(agent, session_metadata(folder))


def discard_folders(persistence: KitPersistence, names: Collection[str]) -> None:
    """Delete the workspaces and folders of the conversations ``names`` (a worker thread)."""
    for name in names:
        if _NAME.fullmatch(name):
            _discard(records_root(persistence) / name)
            _discard(workspaces_root(persistence) / name)


async def sweep_store(
    persistence: KitPersistence, store: Store, in_use: Collection[str], now: float
) -> list[str] | None:
    """One process's sweep (None when another swept lately): delete the conversations
    unused for ``ttl`` (but those in ``in_use``); the names whose folders are to be
    deleted: the swept ones, and folders no kept conversation owns that are older than
    :data:`~._conversations.UNKEPT_GRACE` (a crash's leftovers)."""
    if not await store.claim_sweep(SWEEP_EVERY):
        return None
    conversations = await store.list_records(CONVERSATION_KIND)
    # A conversation's records are scoped by its session (the layout before, by its name).
    keep = {r.scope for r in conversations if r.key in in_use and r.scope is not None}
    # Ratings are an evaluation set, not a conversation: they outlive what they rate.
    keep_scopes = {*keep, *in_use, FEEDBACK_SCOPE}
    swept = await store.sweep(now - persistence.ttl.total_seconds(), keep_scopes=keep_scopes)
    names = {ref.key for ref in swept if ref.kind in (CONVERSATION_KIND, SESSION_KIND)} | {
        ref.scope for ref in swept if ref.scope is not None and _NAME.fullmatch(ref.scope)
    }
    kept = {record.key for record in conversations} - names
    for parent in (records_root(persistence), workspaces_root(persistence)):
        if not parent.is_dir():
            continue
        for entry in parent.iterdir():
            if (
                _NAME.fullmatch(entry.name)
                and entry.name not in kept
                and entry.name not in in_use
                and not entry.is_symlink()
                and entry.is_dir()
                and now - entry.stat().st_mtime > UNKEPT_GRACE
            ):
                names.add(entry.name)
    return sorted(names)
