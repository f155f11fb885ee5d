"""Persistence: what deputy_shiny saves to disk, as versioned, checksummed JSON.

Everything saved (sessions, durable approvals, file checkpoints, kit conversations) is
one format, :mod:`deputy_shiny.persistence.files`: JSON (never pickle), written
atomically, versioned and checksummed, and read back as untrusted input.

Example:
    >>> from deputy_shiny.persistence import canonical_json
    >>> canonical_json({"b": 2, "a": 1})
    b'{"a":1,"b":2}'
"""

from .approvals import ApprovalContinuation, approval_read
from .checkpoints import FileCheckpoint, FileJournal, FileRewind
from .files import MAX_DOCUMENT_BYTES, canonical_json, read_document, write_document

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "ApprovalContinuation",
    "FileCheckpoint",
    "FileJournal",
    "FileRewind",
    "approval_read",
    "canonical_json",
    "read_document",
    "write_document",
]
