"""The key that authenticates every persisted record (HMAC-SHA256), held by the server.

A record (a saved session, a durable approval, a checkpoint journal, a kit conversation)
carries an HMAC of its contents, so one written or changed by anyone without the key is
refused, however carefully its checksum was recomputed. The key is, in order:

1. the ``key=`` given where records are written and read by API (bytes, at least 16);
2. the environment variable ``DEPUTY_RECORD_KEY``: hex (an even number of hex digits,
   e.g. ``python -c "import secrets; print(secrets.token_hex(32))"``) or base64
   (standard or URL-safe, padding optional), at least 16 bytes once decoded. Give every
   process that shares the records (several app processes behind a proxy, another
   host) the same value;
3. else a random 32-byte key in a per-user state file, created once (mode 0600, with
   an atomic link so two processes starting together agree):
   ``$XDG_STATE_HOME/deputy_shiny/record.key``, by default
   ``~/.local/state/deputy_shiny/record.key``. Whoever reads it can forge records, so
   its folder is out of every agent's reach whatever the working directory: the file
   tools refuse it (path rule ``secret``) and the sandbox shows it empty. A key file
   that is a symlink, not a regular file, not owned by this user, or readable by others
   is refused.

Model-run code never sees it: the sandbox hides home directories, mounts an empty
folder over the key's folder when the working directory holds it, and passes no
``DEPUTY_*`` variable. A bad key setting is a
:class:`~deputy_shiny.errors.ConfigurationError` (never a corrupt-record error: a
misconfigured server must not set valid records aside as damaged).

Examples:
    >>> import os
    >>> os.environ["DEPUTY_RECORD_KEY"] = "00" * 32
    >>> record_key() == bytes(32)
    True
    >>> record_key(b"an explicit key of 16+ bytes") == b"an explicit key of 16+ bytes"
    True
    >>> del os.environ["DEPUTY_RECORD_KEY"]
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import secrets
import stat
import tempfile
import threading
from pathlib import Path

from .._util.secret_paths import default_key_dir, protect_path
from ..errors import ConfigurationError

__all__ = ["KEY_FILE_NAME", "MIN_KEY_BYTES", "RECORD_KEY_ENV", "default_key_path", "record_key"]

RECORD_KEY_ENV = "DEPUTY_RECORD_KEY"
"""The environment variable holding the record key (hex or base64)."""
MIN_KEY_BYTES = 16
"""The shortest key accepted (128 bits)."""
KEY_FILE_NAME = "record.key"

_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")
_cache: dict[str, bytes] = {}
_lock = threading.Lock()


def _checked(key: bytes, where: str) -> bytes:
    if len(key) < MIN_KEY_BYTES:
        raise ConfigurationError(
            f"The record key from {where} is {len(key)} bytes; it must be at least "
            f"{MIN_KEY_BYTES} (e.g. secrets.token_hex(32))."
        )
    return key


def _decode(text: str, where: str) -> bytes:
    value = text.strip()
    if _HEX.fullmatch(value):
        return _checked(bytes.fromhex(value), where)
    padded = value + "=" * (-len(value) % 4)
    try:
        decoded = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigurationError(
            f"The record key from {where} is neither hex nor base64; give e.g. the output "
            'of python -c "import secrets; print(secrets.token_hex(32))".'
        ) from None
    return _checked(decoded, where)


def default_key_path() -> Path:
    """Where the per-user key file lives: ``$XDG_STATE_HOME/deputy_shiny/record.key``
    (``~/.local/state/deputy_shiny/record.key`` when XDG_STATE_HOME is unset).

    Examples:
        >>> default_key_path().name
        'record.key'
    """
    return default_key_dir() / KEY_FILE_NAME


def record_key(key: bytes | str | None = None) -> bytes:
    """The record key: ``key`` when given, else ``DEPUTY_RECORD_KEY``, else the key file
    (created on first use). See the module docs.

    Raises:
        ConfigurationError: the key is too short or not hex/base64, or the key file is
            unsafe (a symlink, another user's, readable by others) or cannot be made.
    """
    if key is not None:
        if isinstance(key, str):
            return _decode(key, "key=")
        if isinstance(key, bytes | bytearray):
            return _checked(bytes(key), "key=")
        raise ConfigurationError(f"key must be bytes or a str, not {type(key).__name__}")
    from_env = os.environ.get(RECORD_KEY_ENV)
    if from_env is not None and from_env.strip():
        return _decode(from_env, RECORD_KEY_ENV)
    path = default_key_path()
    found = _cache.get(str(path))
    if found is not None:
        return found
    with _lock:
        # Out of every agent's reach even after XDG_STATE_HOME changes (_util.secret_paths).
        protect_path(path.parent)
        found = _read_key_file(path)
        if found is None:
            found = _create_key_file(path)
        _cache[str(path)] = found
    return found


def _unsafe(path: Path, problem: str) -> ConfigurationError:
    return ConfigurationError(
        f"The record key file {path} {problem}; it is not used. Remove it (a new one is "
        f"made), or set {RECORD_KEY_ENV}."
    )


def _read_key_file(path: Path) -> bytes | None:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if os.path.islink(path):
            raise _unsafe(path, "is a symbolic link") from None
        raise ConfigurationError(
            f"The record key file {path} cannot be read ({exc.strerror or exc}); set "
            f"{RECORD_KEY_ENV} instead."
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _unsafe(path, "is not a regular file")
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise _unsafe(path, "belongs to another user")
        if info.st_mode & 0o077:
            raise _unsafe(
                path, f"is readable or writable by others (mode {info.st_mode & 0o777:o})"
            )
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    try:
        return _decode(data.decode("ascii"), str(path))
    except (UnicodeDecodeError, ConfigurationError):
        raise _unsafe(path, "does not hold a key") from None


def _create_key_file(path: Path) -> bytes:
    """Make the key file atomically: a temp file linked into place (the first process
    to link wins; the others read its key)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".record.key.", suffix=".tmp")
    except OSError as exc:
        raise ConfigurationError(
            f"Cannot create the record key file in {path.parent} ({exc.strerror or exc}); "
            f"set {RECORD_KEY_ENV} or XDG_STATE_HOME."
        ) from None
    try:
        with open(fd, "w", encoding="ascii", closefd=True) as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(secrets.token_hex(32) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: theirs
            os.link(temp, path, follow_symlinks=False)
    except OSError as exc:
        raise ConfigurationError(
            f"Cannot create the record key file {path} ({exc.strerror or exc}); set "
            f"{RECORD_KEY_ENV}."
        ) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)
    found = _read_key_file(path)
    if found is None:  # pragma: no cover - removed between link and read
        raise ConfigurationError(f"The record key file {path} vanished as it was made.")
    return found
