"""Persistence: what deputy_shiny saves to disk, as versioned, authenticated JSON.

Everything saved (sessions, durable approvals, file checkpoints, kit conversations) is
one format, :mod:`deputy_shiny.persistence.files`: JSON (never pickle), written
atomically, versioned and authenticated with an HMAC under the server's record key
(:mod:`deputy_shiny.persistence.keys`), and read back as untrusted input.

Example:
    >>> from deputy_shiny.persistence import canonical_json
    >>> canonical_json({"b": 2, "a": 1})
    b'{"a":1,"b":2}'
"""

from .approvals import ApprovalContinuation, approval_read
from .checkpoints import FileCheckpoint, FileJournal, FileRewind
from .files import MAX_DOCUMENT_BYTES, canonical_json, read_document, write_document
from .keys import RECORD_KEY_ENV, default_key_path, record_key

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "RECORD_KEY_ENV",
    "ApprovalContinuation",
    "FileCheckpoint",
    "FileJournal",
    "FileRewind",
    "approval_read",
    "canonical_json",
    "default_key_path",
    "read_document",
    "record_key",
    "write_document",
]
