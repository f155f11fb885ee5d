"""Open what was checked: file operations relative to a directory descriptor, no symlink
followed at any component.

:func:`~deputy_shiny._paths.confine` decides whether a path may be touched, by name. A
tool that then reopened the name would lose a race against anything swapping a
directory for a symlink between the check and the open (another call of the same
response, or a thread a ``run_python`` cell left running): it would read or write
outside the workspace. So every file tool, and the checkpoint rewind, opens through
this module instead: a *root* (an allowed directory, already resolved) is opened once,
and the rest of the path is walked beneath it without following any symlink:

* on Linux 5.6 and later, one ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`` call
  (through ``ctypes``: Python 3.11 does not expose it); the kernel refuses a symlink
  at any component, and any way out of the root;
* elsewhere (an older kernel, a seccomp filter answering ``ENOSYS``), a walk of one
  ``os.open(name, O_NOFOLLOW | O_DIRECTORY, dir_fd=...)`` per component.

A symlink met on the way is :class:`~deputy_shiny.errors.PathDenied` with rule
``symlink``: the path changed after it was checked, and nothing is opened through it.
Other failures are the ``OSError`` the system gave (missing, not a directory, no
permission), for the caller to word. Relative paths are POSIX strings of plain
components (no ``..``, no ``.``, not absolute); ``""`` is the root itself.

Examples:
    >>> import os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> make_dirs(root, "notes")
    ['notes']
    >>> replace_file(root, "notes/a.txt", b"hello")
    >>> read_bytes(root, "notes/a.txt")
    b'hello'
    >>> os.symlink("/etc", os.path.join(root, "etc"))
    >>> try:
    ...     read_bytes(root, "etc/hostname")
    ... except PathDenied as exc:
    ...     print(exc.rule)
    symlink
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import PathDenied

__all__ = [
    "MAX_WALK_DEPTH",
    "Walk",
    "WalkEntry",
    "append_file",
    "beneath",
    "lstat",
    "make_dirs",
    "open_at",
    "open_beneath",
    "open_dir",
    "open_regular",
    "openat2_available",
    "read_bytes",
    "replace_file",
    "rmdir",
    "unlink",
    "walk",
]

MAX_WALK_DEPTH = 100
"""How deep :func:`walk` goes (each level holds one open directory descriptor)."""

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC

# openat2(2): the syscall number is the same on every Linux architecture (added after
# the tables were unified); the flags are from <linux/openat2.h>.
_SYS_OPENAT2 = 437
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
_EAGAIN_RETRIES = 8


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


def _load_syscall() -> object | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        func = libc.syscall
    except (OSError, AttributeError):
        return None
    func.restype = ctypes.c_long
    return func


_syscall = _load_syscall()
_openat2_usable: bool = _syscall is not None  # turned off at the first ENOSYS


def openat2_available() -> bool:
    """True while this module opens with ``openat2`` (False: the component walk).

    Examples:
        >>> isinstance(openat2_available(), bool)
        True
    """
    return _openat2_usable


# --------------------------------------------------------------------------- paths


def _parts(rel: str) -> list[str]:
    """The components of a relative POSIX path; anything but plain names is refused."""
    if not isinstance(rel, str):
        raise PathDenied("The path is not a string.", rule="invalid", path=str(rel))
    if rel in ("", "."):
        return []
    if "\0" in rel or rel.startswith("/"):
        raise PathDenied(f"{rel!r} is not a relative path.", rule="invalid", path=rel)
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise PathDenied(f"{rel!r} uses '..'.", rule="traversal", path=rel)
    return parts


def _link_denied(rel: str, where: str | None = None) -> PathDenied:
    at = f" ({where} is one now)" if where and where != rel else ""
    return PathDenied(
        f"{rel!r} goes through a symbolic link{at}: it changed after it was checked, so "
        "nothing was opened through it.",
        rule="symlink",
        path=rel,
    )


def _is_link_at(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


# --------------------------------------------------------------------------- opening


def _openat2(dir_fd: int, rel: str, flags: int, mode: int) -> int | None:
    """One openat2 call; None when the kernel cannot do it (then the walk is used)."""
    global _openat2_usable
    assert _syscall is not None
    # openat2 refuses a mode without O_CREAT (open(2) ignores it).
    tmpfile = getattr(os, "O_TMPFILE", 0)  # includes O_DIRECTORY's bit: compare whole
    creating = flags & os.O_CREAT or (tmpfile and flags & tmpfile == tmpfile)
    how = _OpenHow(flags, mode if creating else 0, _RESOLVE)
    path = os.fsencode(rel)
    for _ in range(_EAGAIN_RETRIES):
        fd = _syscall(  # type: ignore[operator]
            ctypes.c_long(_SYS_OPENAT2),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(path),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd >= 0:
            return int(fd)
        err = ctypes.get_errno()
        if err == errno.EAGAIN:  # a concurrent rename the kernel could not rule out
            continue
        if err == errno.ENOSYS:
            _openat2_usable = False
            return None
        if err in (errno.E2BIG, errno.EPERM, errno.EINVAL):
            return None  # a filter or an older kernel refusing the call: walk instead
        if err == errno.ELOOP:
            raise _link_denied(rel)
        if err == errno.ENOTDIR and flags & _DIRECTORY:
            # O_NOFOLLOW leaves a final link unfollowed, and O_DIRECTORY then says ENOTDIR
            # (as open(2) does): tell a link from a file.
            final_link = _final_is_link(dir_fd, rel)
            if final_link is None:
                return None
            if final_link:
                raise _link_denied(rel)
        if err == errno.EXDEV:
            raise PathDenied(
                f"{rel!r} leads outside the directory it was checked against.",
                rule="outside",
                path=rel,
            )
        raise OSError(err, os.strerror(err), rel)
    return None


def _final_is_link(dir_fd: int, rel: str) -> bool | None:
    """Whether ``rel``'s last component is a link (None: openat2 could not tell)."""
    head, _, name = rel.rpartition("/")
    if not head:
        return _is_link_at(dir_fd, name)
    parent = _openat2(dir_fd, head, _DIR_FLAGS, 0)
    if parent is None:
        return None
    try:
        return _is_link_at(parent, name)
    finally:
        os.close(parent)


def _walk_open(dir_fd: int, parts: list[str], flags: int, mode: int, rel: str) -> int:
    """The fallback: one component at a time, never following a link."""
    current = dir_fd
    try:
        for index, name in enumerate(parts[:-1]):
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=current)
            except OSError as exc:
                if exc.errno == errno.ELOOP or (
                    exc.errno == errno.ENOTDIR and _is_link_at(current, name)
                ):
                    raise _link_denied(rel, "/".join(parts[: index + 1])) from None
                raise OSError(exc.errno, exc.strerror, rel) from None
            if current != dir_fd:
                os.close(current)
            current = nxt
        try:
            return os.open(parts[-1], flags | _NOFOLLOW, mode, dir_fd=current)
        except OSError as exc:
            if exc.errno == errno.ELOOP or (
                exc.errno == errno.ENOTDIR and _is_link_at(current, parts[-1])
            ):
                raise _link_denied(rel) from None
            raise OSError(exc.errno, exc.strerror, rel) from None
    finally:
        if current != dir_fd:
            os.close(current)


def open_at(dir_fd: int, rel: str, flags: int, mode: int = 0o666) -> int:
    """Open ``rel`` beneath the directory ``dir_fd``; no symlink followed anywhere.

    Returns a new descriptor (close-on-exec). ``rel`` ``""`` reopens the directory.

    Raises:
        PathDenied: a component is a symbolic link (rule ``symlink``), or ``rel`` is not
            a plain relative path.
        OSError: anything else the system refused.
    """
    parts = _parts(rel)
    flags |= _CLOEXEC | _NOFOLLOW
    if not parts:
        return os.open(".", flags, mode, dir_fd=dir_fd)
    joined = "/".join(parts)
    if _openat2_usable:
        fd = _openat2(dir_fd, joined, flags, mode)
        if fd is not None:
            return fd
    return _walk_open(dir_fd, parts, flags, mode, joined)


def _open_root(root: str | os.PathLike[str]) -> int:
    """The root directory itself (resolved by the caller: an allowed root is trusted)."""
    return os.open(os.fspath(root), _DIR_FLAGS)


@contextlib.contextmanager
def _rooted(root: str | os.PathLike[str] | int) -> Iterator[int]:
    if isinstance(root, int):
        yield root
        return
    fd = _open_root(root)
    try:
        yield fd
    finally:
        os.close(fd)


def open_beneath(
    root: str | os.PathLike[str] | int, rel: str, flags: int, mode: int = 0o666
) -> int:
    """Open ``rel`` beneath ``root`` (a directory path, or a descriptor of one).

    Examples:
        >>> import tempfile
        >>> root = tempfile.mkdtemp()
        >>> replace_file(root, "a.txt", b"x")
        >>> fd = open_beneath(root, "a.txt", os.O_RDONLY)
        >>> os.read(fd, 10); os.close(fd)
        b'x'
    """
    with _rooted(root) as dir_fd:
        return open_at(dir_fd, rel, flags, mode)


def open_dir(root: str | os.PathLike[str] | int, rel: str = "") -> int:
    """A descriptor of the directory ``rel`` beneath ``root`` (for :func:`os.scandir`).

    Raises:
        PathDenied: a component is a symbolic link.
        NotADirectoryError / FileNotFoundError / OSError: as the system says.
    """
    return open_beneath(root, rel, _DIR_FLAGS)


def open_regular(root: str | os.PathLike[str] | int, rel: str) -> tuple[int, os.stat_result]:
    """Open the regular file ``rel`` beneath ``root`` for reading, with its ``fstat``.

    Opened non-blocking (a FIFO swapped in cannot hang the caller) and checked with
    ``fstat`` after opening, so the result describes what was opened.

    Raises:
        PathDenied: a component is a symbolic link.
        IsADirectoryError: it is a directory. OSError: not a regular file, or any
            other failure.
    """
    fd = open_beneath(root, rel, os.O_RDONLY | _NONBLOCK | _BINARY)
    return _checked_regular(fd, rel)


def _checked_regular(fd: int, rel: str) -> tuple[int, os.stat_result]:
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", rel)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "Not a regular file", rel)
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_bytes(
    root: str | os.PathLike[str] | int, rel: str, *, max_bytes: int | None = None
) -> bytes:
    """The contents of the regular file ``rel`` beneath ``root`` (at most ``max_bytes + 1``
    bytes when a cap is given, so the caller can tell that it was over)."""
    fd, _ = open_regular(root, rel)
    with os.fdopen(fd, "rb") as fh:
        return fh.read() if max_bytes is None else fh.read(max_bytes + 1)


# --------------------------------------------------------------------------- the parent


def _split(rel: str) -> tuple[str, str]:
    parts = _parts(rel)
    if not parts:
        raise PathDenied(
            "The path names the directory itself, not a file in it.", rule="invalid", path=rel
        )
    return "/".join(parts[:-1]), parts[-1]


@contextlib.contextmanager
def _parent(root: str | os.PathLike[str] | int, rel: str) -> Iterator[tuple[int, str]]:
    """(descriptor of ``rel``'s directory, ``rel``'s last name)."""
    head, name = _split(rel)
    fd = open_dir(root, head)
    try:
        yield fd, name
    finally:
        os.close(fd)


def lstat(root: str | os.PathLike[str] | int, rel: str) -> os.stat_result | None:
    """``rel``'s own status (a link is reported as a link), or None when it is missing.

    Raises:
        PathDenied: a directory on the way is a symbolic link.
    """
    if not _parts(rel):
        with _rooted(root) as fd:
            return os.fstat(fd)
    try:
        with _parent(root, rel) as (fd, name):
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _inherit_owner(fd: int, dir_fd: int, like: os.stat_result | None = None) -> None:
    """On a root server, give a file the server made the owner of ``like`` or its directory.

    Model-run code runs as a workspace's unprivileged owner (see ``sandbox.py``), so a
    file root writes there must belong to that owner for the code to change it.
    Elsewhere (or in a root-owned directory) nothing changes.
    """
    if os.geteuid() != 0:
        return
    owner = like if like is not None else os.fstat(dir_fd)
    if owner.st_uid != 0:
        os.fchown(fd, owner.st_uid, owner.st_gid)


def make_dirs(root: str | os.PathLike[str] | int, rel: str, *, mode: int = 0o777) -> list[str]:
    """Create the directory ``rel`` and its missing parents beneath ``root`` (``mkdir -p``).

    Returns the directories created, outermost first, relative to ``root``.

    Raises:
        PathDenied: a component is a symbolic link.
        NotADirectoryError: a component is a file.
    """
    parts = _parts(rel)
    created: list[str] = []
    with _rooted(root) as root_fd:
        current = root_fd
        try:
            for index, name in enumerate(parts):
                shown = "/".join(parts[: index + 1])
                try:
                    nxt = os.open(name, _DIR_FLAGS, dir_fd=current)
                except FileNotFoundError:
                    try:
                        os.mkdir(name, mode, dir_fd=current)
                        created.append(shown)
                    except FileExistsError:
                        pass  # made meanwhile: open it as any other
                    nxt = _open_dir_component(current, name, shown)
                    if created and created[-1] == shown:
                        _inherit_owner(nxt, current)
                except OSError as exc:
                    if exc.errno == errno.ELOOP or _is_link_at(current, name):
                        raise _link_denied(shown) from None
                    raise OSError(exc.errno, exc.strerror, shown) from None
                if current != root_fd:
                    os.close(current)
                current = nxt
        finally:
            if current != root_fd:
                os.close(current)
    return created


def _open_dir_component(dir_fd: int, name: str, shown: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP or _is_link_at(dir_fd, name):
            raise _link_denied(shown) from None
        raise OSError(exc.errno, exc.strerror, shown) from None


def replace_file(
    root: str | os.PathLike[str] | int, rel: str, data: bytes, *, mode: int | None = None
) -> None:
    """Write ``data`` to ``rel`` beneath ``root`` atomically: a temporary file in the
    same directory (by descriptor), then a rename within that directory.

    ``mode`` None keeps an existing file's permission bits (a new one gets the umask's).

    Raises:
        PathDenied: a component, or the file itself, is a symbolic link.
        IsADirectoryError: ``rel`` is a directory. OSError: the write failed (the old
            file is untouched, the temporary file removed).
    """
    with _parent(root, rel) as (dir_fd, name):
        try:
            info: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        keep = mode
        if info is not None:
            if stat.S_ISLNK(info.st_mode):
                raise _link_denied(rel)
            if stat.S_ISDIR(info.st_mode):
                raise IsADirectoryError(errno.EISDIR, "Is a directory", rel)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(errno.EINVAL, "Not a regular file", rel)
            if keep is None:
                keep = stat.S_IMODE(info.st_mode)
        temp = f".{name[:80]}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _BINARY
        fd = os.open(temp, flags, 0o666, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                _inherit_owner(fh.fileno(), dir_fd, info)
                if keep is not None:
                    os.fchmod(fh.fileno(), keep)
                os.fsync(fh.fileno())
            # Both names are in the same directory descriptor: a directory swapped for a
            # link meanwhile cannot redirect the rename.
            os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            raise
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)


def append_file(root: str | os.PathLike[str] | int, rel: str, data: bytes) -> None:
    """Append ``data`` to the regular file ``rel`` beneath ``root`` (created if missing).

    Raises:
        PathDenied: a component, or the file itself, is a symbolic link.
        OSError: it is not a regular file, or the write failed.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NONBLOCK | _BINARY
    fd, info = _checked_regular(open_beneath(root, rel, flags, 0o666), rel)
    with os.fdopen(fd, "wb") as fh:
        if info.st_size == 0 and info.st_uid == 0 and os.geteuid() == 0:
            with _parent(root, rel) as (dir_fd, _name):  # just made: its directory's owner
                _inherit_owner(fh.fileno(), dir_fd)
        fh.write(data)


def unlink(root: str | os.PathLike[str] | int, rel: str) -> bool:
    """Remove the file (or link) ``rel`` beneath ``root``; False when it was missing.

    Raises:
        PathDenied: a directory on the way is a symbolic link.
    """
    try:
        with _parent(root, rel) as (fd, name):
            os.unlink(name, dir_fd=fd)
    except (FileNotFoundError, NotADirectoryError):
        return False
    return True


def rmdir(root: str | os.PathLike[str] | int, rel: str) -> bool:
    """Remove the empty directory ``rel`` beneath ``root``; False when it was missing."""
    try:
        with _parent(root, rel) as (fd, name):
            os.rmdir(name, dir_fd=fd)
    except FileNotFoundError:
        return False
    return True


# --------------------------------------------------------------------------- walking


class WalkEntry:
    """One entry met by :func:`walk`: its name, its parts below the walked directory, what
    it is (``is_dir`` / ``is_link`` as ``lstat`` says: a link is never a directory here)
    and ``dir_fd``, its directory's descriptor, valid until the walk moves on."""

    __slots__ = ("dir_fd", "is_dir", "is_link", "name", "parts")

    def __init__(
        self, dir_fd: int, name: str, parts: tuple[str, ...], is_dir: bool, is_link: bool
    ) -> None:
        self.dir_fd = dir_fd
        self.name = name
        self.parts = parts
        self.is_dir = is_dir
        self.is_link = is_link

    def open_regular(self) -> tuple[int, os.stat_result]:
        """Open this entry as a regular file for reading (never through a link)."""
        fd = open_at(self.dir_fd, self.name, os.O_RDONLY | _NONBLOCK | _BINARY)
        return _checked_regular(fd, "/".join(self.parts))


class Walk:
    """A depth-first walk in sorted order, by descriptors (see :func:`walk`).

    ``deep`` is True when a directory was not entered because of :data:`MAX_WALK_DEPTH`.
    Close it (or use it as a context manager) to release the descriptors early.
    """

    def __init__(self, dir_fd: int, descend: Callable[[tuple[str, ...]], bool]) -> None:
        self._root = dir_fd
        self._descend = descend
        self._stack: list[tuple[int, Iterator[WalkEntry]]] = []
        self.deep = False

    def _children(self, fd: int, parts: tuple[str, ...]) -> Iterator[WalkEntry]:
        try:
            with os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            try:
                is_link = entry.is_symlink()
                is_dir = not is_link and entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            yield WalkEntry(fd, entry.name, (*parts, entry.name), is_dir, is_link)

    def __iter__(self) -> Iterator[WalkEntry]:
        try:
            self._stack.append((-1, self._children(self._root, ())))
            while self._stack:
                fd, children = self._stack[-1]
                entry = next(children, None)
                if entry is None:
                    self._stack.pop()
                    if fd >= 0:
                        os.close(fd)
                    continue
                yield entry
                if not entry.is_dir or not self._descend(entry.parts):
                    continue
                if len(self._stack) > MAX_WALK_DEPTH:
                    self.deep = True
                    continue
                try:  # a directory swapped for a link since the listing is never entered
                    child = os.open(entry.name, _DIR_FLAGS | _NONBLOCK, dir_fd=entry.dir_fd)
                except OSError:
                    continue
                self._stack.append((child, self._children(child, entry.parts)))
        finally:
            self.close()

    def close(self) -> None:
        """Close every descriptor the walk still holds (not the walked directory's)."""
        while self._stack:
            fd, _ = self._stack.pop()
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def __enter__(self) -> Walk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def walk(dir_fd: int, descend: Callable[[tuple[str, ...]], bool]) -> Walk:
    """Walk the directory ``dir_fd`` (sorted, depth first) without ever following a link.

    ``descend(parts)`` decides which directories to enter. Each directory is entered
    through ``os.open(name, O_NOFOLLOW | O_DIRECTORY, dir_fd=parent)``, so one swapped
    for a symlink after it was listed is skipped, never followed; links are yielded
    (``is_link``) but never entered.

    Examples:
        >>> import tempfile
        >>> root = tempfile.mkdtemp()
        >>> _ = make_dirs(root, "a/b"); replace_file(root, "a/b/c.txt", b"")
        >>> fd = open_dir(root)
        >>> ["/".join(e.parts) for e in walk(fd, lambda parts: True)]
        ['a', 'a/b', 'a/b/c.txt']
        >>> os.close(fd)
    """
    return Walk(dir_fd, descend)


def beneath(target: Path, roots: tuple[Path, ...]) -> tuple[Path, str] | None:
    """The innermost of ``roots`` holding ``target``, and ``target`` relative to it.

    Examples:
        >>> beneath(Path("/w/a/b.txt"), (Path("/w"), Path("/w/a")))
        (PosixPath('/w/a'), 'b.txt')
    """
    best: Path | None = None
    for root in roots:
        if (target == root or target.is_relative_to(root)) and (
            best is None or len(root.parts) > len(best.parts)
        ):
            best = root
    if best is None:
        return None
    rel = target.relative_to(best).as_posix()
    return best, "" if rel == "." else rel
