"""Persistence: what deputy_shiny saves, as versioned, authenticated JSON.

Everything saved (sessions, durable approvals, file checkpoints, kit conversations) is
one format, :mod:`deputy_shiny.persistence.files`: JSON (never pickle), written
atomically, versioned and authenticated with an HMAC under the server's record key
(:mod:`deputy_shiny.persistence.keys`), and read back as untrusted input. What must be
seen by other processes goes through a :class:`Store`
(:mod:`deputy_shiny.persistence.store`): :class:`FileStore` on files, or
:class:`SqlStore` on SQLite or PostgreSQL (imported on first use: SQLAlchemy is not
loaded before).

Examples:
    >>> from deputy_shiny.persistence import canonical_json
    >>> canonical_json({"b": 2, "a": 1})
    b'{"a":1,"b":2}'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .approval_records import approval_read
from .approvals import ApprovalContinuation
from .checkpoints import FileCheckpoint, FileJournal, FileRewind
from .file_store import FileStore
from .files import MAX_DOCUMENT_BYTES, canonical_json, read_document, write_document
from .keys import RECORD_KEY_ENV, default_key_path, record_key
from .store import Lease, RecordRef, Store, StoredRecord

if TYPE_CHECKING:
    from .sql_store import SqlStore

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "RECORD_KEY_ENV",
    "ApprovalContinuation",
    "FileCheckpoint",
    "FileJournal",
    "FileRewind",
    "FileStore",
    "Lease",
    "RecordRef",
    "SqlStore",
    "Store",
    "StoredRecord",
    "approval_read",
    "canonical_json",
    "default_key_path",
    "read_document",
    "record_key",
    "write_document",
]


def __getattr__(name: str) -> Any:
    """``SqlStore`` on first use (it imports SQLAlchemy, ~0.1 s)."""
    if name == "SqlStore":
        from .sql_store import SqlStore

        return SqlStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
