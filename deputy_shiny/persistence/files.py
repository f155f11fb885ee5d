"""Versioned, authenticated JSON documents: the one file format of everything persisted.

Every file deputy_shiny saves (sessions, durable approvals, checkpoint journals, kit
conversations, offloaded tool results) is one JSON object::

    {"deputy_shiny": "<kind>", "version": 1, "hmac": "sha256:<hex>", "payload": {...}}

written atomically and never through a symlink (:func:`write_document`). The HMAC
(HMAC-SHA256 with the server's record key, :mod:`deputy_shiny.persistence.keys`)
covers the kind, the version and the canonical JSON of the payload, so truncation,
corruption, edits by hand and records written by anyone without the key are caught: a
plain checksum could be recomputed by whoever can write the file, an HMAC cannot.
:func:`read_document` treats the file as untrusted input: a size cap, bounded nesting,
no symlinks, the kind, version and HMAC checked; anything wrong is a
:class:`~deputy_shiny.errors.PersistenceCorruptError` naming the file and the problem
(:class:`~deputy_shiny.errors.PersistenceNotAuthenticError` when the HMAC does not
verify, or the file predates authentication: such files, with a ``checksum`` field, are
refused, never trusted). Never pickle.

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "note.json"
    >>> key = b"a key only this server holds"
    >>> write_document(path, "note", {"text": "hi"}, key=key)
    >>> read_document(path, "note", key=key)
    {'text': 'hi'}
    >>> _ = path.write_text(path.read_text().replace('"hi"', '"HI"'))
    >>> read_document(path, "note", key=key)
    Traceback (most recent call last):
    ...
    deputy_shiny.errors.PersistenceNotAuthenticError: ...: is not authentic: ...
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .._util.atomic import WriteRefused, atomic_write
from .._util.json import loads_bounded
from .._util.redact import scrub_secrets
from ..errors import PersistenceCorruptError, PersistenceError, PersistenceNotAuthenticError
from .keys import record_key

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "canonical_json",
    "read_document",
    "record_mac",
    "write_document",
]

MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
"""The largest document read back (a safety cap; real ones are far smaller)."""

_FORMAT_KEY = "deputy_shiny"


def canonical_json(value: Any) -> bytes:
    """The JSON the HMAC covers: sorted keys, no spaces, UTF-8; NaN and infinities
    refused (they are not JSON).

    Examples:
        >>> canonical_json({"b": 1, "a": [True, None]})
        b'{"a":[true,null],"b":1}'
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


_MAC_FIELD = "hmac"
_LEGACY_FIELD = "checksum"  # the plain SHA-256 of versions before authentication


def record_mac(kind: str, version: int, payload: Any, *, key: bytes | str | None = None) -> str:
    """The HMAC a ``kind`` document of ``version`` with ``payload`` carries.

    It covers the kind and version too, so a record cannot pass for another kind.

    Examples:
        >>> record_mac("note", 1, {"a": 1}, key=bytes(16)).startswith("sha256:")
        True
    """
    message = canonical_json(["deputy_shiny record", kind, version, payload])
    return "sha256:" + hmac.new(record_key(key), message, hashlib.sha256).hexdigest()


def write_document(
    path: str | os.PathLike[str],
    kind: str,
    payload: Mapping[str, Any],
    *,
    version: int = 1,
    overwrite: bool = True,
    key: bytes | str | None = None,
) -> None:
    """Write ``payload`` (JSON values only) as a ``kind`` document, atomically, with its
    HMAC under ``key`` (None: the server's record key, see
    :func:`~deputy_shiny.persistence.keys.record_key`).

    Raises:
        ConfigurationError: the record key is missing or unusable.
        PersistenceError: the payload is not JSON, or the file cannot be written (the old
            one, if any, is untouched).
    """
    target = Path(path)
    secret = record_key(key)  # a ConfigurationError, before the ValueErrors of bad data
    # The server's own keys never reach a file, even when a model copied one into a
    # tool argument (the saved call then runs with the mask, never with the key).
    payload = scrub_secrets(payload)
    try:
        body = {
            _FORMAT_KEY: kind,
            "version": version,
            _MAC_FIELD: record_mac(kind, version, dict(payload), key=secret),
            "payload": dict(payload),
        }
        data = json.dumps(body, ensure_ascii=False, allow_nan=False, indent=1).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise PersistenceError(f"{target}: the {kind} is not plain JSON data ({exc}).") from None
    if not target.parent.is_dir():
        raise PersistenceError(f"{target}: the directory {str(target.parent)!r} does not exist.")
    try:
        atomic_write(target, data, mode=0o600, overwrite=overwrite)
    except WriteRefused as exc:
        raise PersistenceError(f"{target}: {exc}.") from None
    except OSError as exc:
        raise PersistenceError(f"{target}: cannot be written ({exc.strerror or exc}).") from None


def read_document(
    path: str | os.PathLike[str],
    kind: str,
    *,
    versions: Iterable[int] = (1,),
    max_bytes: int = MAX_DOCUMENT_BYTES,
    key: bytes | str | None = None,
) -> dict[str, Any]:
    """The payload of the ``kind`` document at ``path``, checked as untrusted input,
    its HMAC verified under ``key`` (None: the server's record key).

    Raises:
        PersistenceError: the file is missing or cannot be read.
        PersistenceCorruptError: it is not such a document: a symlink or not a regular
            file, too large, not UTF-8 JSON, truncated, of another kind or version.
        PersistenceNotAuthenticError: its HMAC does not verify (written or changed
            without the key), or it predates record authentication.
        ConfigurationError: the record key is missing or unusable.
    """
    source = Path(path)
    raw = _read_bytes(source, max_bytes)
    try:
        document = loads_bounded(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PersistenceCorruptError(
            f"{source}: is not a readable JSON document (truncated or damaged: {exc})."
        ) from None
    if not isinstance(document, dict) or document.get(_FORMAT_KEY) != kind:
        raise PersistenceCorruptError(f"{source}: is not a deputy_shiny {kind} file.")
    version = document.get("version")
    allowed = tuple(versions)
    if isinstance(version, bool) or version not in allowed:
        raise PersistenceCorruptError(
            f"{source}: has version {version!r}; this deputy_shiny reads {kind} version "
            f"{', '.join(str(v) for v in allowed)}."
        )
    payload = document.get("payload")
    if not isinstance(payload, dict):
        raise PersistenceCorruptError(f"{source}: has no payload object.")
    mac = document.get(_MAC_FIELD)
    if mac is None and _LEGACY_FIELD in document:
        raise PersistenceNotAuthenticError(
            f"{source}: predates record authentication (it carries a plain checksum, which "
            "anyone who can write the file can recompute), so it is not trusted and not "
            "read. Save it again with this version, or remove it."
        )
    secret = record_key(key)  # a ConfigurationError, never a corrupt-record one
    try:
        expected = record_mac(kind, version, payload, key=secret)
    except ValueError:  # NaN or an infinity: not something we wrote
        raise PersistenceCorruptError(f"{source}: holds values that are not JSON.") from None
    # Compared as bytes: compare_digest refuses non-ASCII str, and the file is untrusted.
    if not isinstance(mac, str) or not hmac.compare_digest(
        mac.encode("utf-8", "surrogatepass"), expected.encode("ascii")
    ):
        raise PersistenceNotAuthenticError(
            f"{source}: is not authentic: its HMAC does not verify with this server's record "
            "key (it was written or changed by someone without the key, written with "
            "another key, or damaged)."
        )
    return payload


def _read_bytes(source: Path, max_bytes: int) -> bytes:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(source, flags)
    except FileNotFoundError:
        raise PersistenceError(f"{source}: does not exist.") from None
    except OSError as exc:
        if os.path.islink(source):
            raise PersistenceCorruptError(f"{source}: is a symlink; not read.") from None
        raise PersistenceError(f"{source}: cannot be opened ({exc.strerror or exc}).") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PersistenceCorruptError(f"{source}: is not a regular file.")
        if info.st_size > max_bytes:
            raise PersistenceCorruptError(
                f"{source}: is {info.st_size:,} bytes, over the {max_bytes:,}-byte limit."
            )
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise PersistenceCorruptError(f"{source}: grew past the {max_bytes:,}-byte limit.")
    return data
