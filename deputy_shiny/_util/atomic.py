"""Atomic file writes that never follow a symlink: temp file, fsync, rename, fsync dir.

A reader sees the old file or the new one, never half of one; a crash mid-write leaves
the old file and no temp file behind (the temp is removed, or is a dot-file the next
write replaces). Callers turn :class:`WriteRefused` into their own typed error.

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> target = Path(tempfile.mkdtemp()) / "state.json"
    >>> atomic_write(target, b"{}")
    >>> target.read_bytes()
    b'{}'
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["WriteRefused", "atomic_write", "existing_mode"]


class WriteRefused(ValueError):
    """The target may not be written: a symlink, a directory, not a regular file, or it
    exists and ``overwrite`` is False. The message says which, for the caller to wrap."""


def existing_mode(target: Path, overwrite: bool) -> int:
    """The mode a replacement keeps (the old file's), or 0o644 for a new file.

    Raises:
        WriteRefused: the target must not be replaced (see the class).
        OSError: it cannot be checked.
    """
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return 0o644
    if stat.S_ISLNK(info.st_mode):
        raise WriteRefused("is a symlink; files are never written through one")
    if stat.S_ISDIR(info.st_mode):
        raise WriteRefused("is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise WriteRefused("is not a regular file")
    if not overwrite:
        raise WriteRefused("already exists")
    return stat.S_IMODE(info.st_mode)


def atomic_write(
    target: Path, data: bytes, *, mode: int | None = None, overwrite: bool = True
) -> None:
    """Write ``data`` to ``target`` atomically; ``mode`` None keeps the old file's.

    With ``overwrite=False`` an existing target is refused, atomically where the
    filesystem has hard links (the new file is linked in only if nothing is there).

    Raises:
        WriteRefused: see :func:`existing_mode`.
        OSError: the write failed (the old file is untouched).
    """
    kept = existing_mode(target, overwrite)
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with open(fd, "wb", closefd=True) as file:
            file.write(data)
            file.flush()
            os.fchmod(file.fileno(), kept if mode is None else mode)
            os.fsync(file.fileno())
        if overwrite:
            os.replace(temp, target)  # replaces a symlink raced in, never follows it
        else:
            _link_new(temp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    _fsync_directory(target.parent)


def _link_new(temp: str, target: Path) -> None:
    """Put ``temp`` at ``target`` only if nothing is there (atomically, where links work)."""
    try:
        os.link(temp, target, follow_symlinks=False)
    except FileExistsError:
        raise WriteRefused("already exists") from None
    except OSError:  # a filesystem without hard links
        if os.path.lexists(target):
            raise WriteRefused("already exists") from None
        os.replace(temp, target)


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable; best effort (some platforms cannot open directories)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
