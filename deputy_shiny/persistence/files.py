"""Versioned, checksummed JSON documents: the one file format of everything persisted.

Every file deputy_shiny saves (sessions, durable approvals, checkpoint journals, kit
conversations) is one JSON object::

    {"deputy_shiny": "<kind>", "version": 1, "checksum": "sha256:<hex>", "payload": {...}}

written atomically and never through a symlink (:func:`write_document`). The checksum
covers the canonical JSON of the payload, so truncation, corruption and edits by hand
are caught. :func:`read_document` treats the file as untrusted input: a size cap,
bounded nesting, no symlinks, the kind and version checked; anything wrong is a
:class:`~deputy_shiny.errors.PersistenceCorruptError` naming the file and the problem.
Never pickle.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "note.json"
    >>> write_document(path, "note", {"text": "hi"})
    >>> read_document(path, "note")
    {'text': 'hi'}
    >>> _ = path.write_text(path.read_text().replace('"hi"', '"HI"'))
    >>> read_document(path, "note")
    Traceback (most recent call last):
    ...
    deputy_shiny.errors.PersistenceCorruptError: ...: its checksum does not match its contents...
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .._atomic import WriteRefused, atomic_write
from .._json import loads_bounded
from ..errors import PersistenceCorruptError, PersistenceError

__all__ = ["MAX_DOCUMENT_BYTES", "canonical_json", "read_document", "write_document"]

MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
"""The largest document read back (a safety cap; real ones are far smaller)."""

_FORMAT_KEY = "deputy_shiny"


def canonical_json(value: Any) -> bytes:
    """The JSON the checksum covers: sorted keys, no spaces, UTF-8; NaN and infinities
    refused (they are not JSON).

    Example:
        >>> canonical_json({"b": 1, "a": [True, None]})
        b'{"a":[true,null],"b":1}'
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def _checksum(payload: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(payload)).hexdigest()


def write_document(
    path: str | os.PathLike[str],
    kind: str,
    payload: Mapping[str, Any],
    *,
    version: int = 1,
    overwrite: bool = True,
) -> None:
    """Write ``payload`` (JSON values only) as a ``kind`` document, atomically.

    Raises:
        PersistenceError: the payload is not JSON, or the file cannot be written (the old
            one, if any, is untouched).
    """
    target = Path(path)
    try:
        body = {
            _FORMAT_KEY: kind,
            "version": version,
            "checksum": _checksum(dict(payload)),
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
) -> dict[str, Any]:
    """The payload of the ``kind`` document at ``path``, checked as untrusted input.

    Raises:
        PersistenceError: the file is missing or cannot be read.
        PersistenceCorruptError: it is not such a document: a symlink or not a regular
            file, too large, not UTF-8 JSON, truncated, of another kind or version, or
            its checksum does not match.
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
    try:
        expected = _checksum(payload)
    except ValueError:  # NaN or an infinity: not something we wrote
        raise PersistenceCorruptError(f"{source}: holds values that are not JSON.") from None
    if document.get("checksum") != expected:
        raise PersistenceCorruptError(
            f"{source}: its checksum does not match its contents (changed or damaged)."
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
