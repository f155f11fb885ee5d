"""One uid per workspace on a root server, so no session's processes count against
another's.

Where no ``pids`` cgroup can be made (a container with a read-only cgroupfs), a root
server caps a call's processes with ``RLIMIT_NPROC``, which counts *every* process of
the uid. Were all workspaces owned by one user, one session's sleepers would use up
every other session's allowance. So :func:`~deputy_shiny.sandbox.prepare_workspace`
gives each workspace a uid of its own from :func:`workspace_uids` (gid the same
number), and the sandbox checks, before such a call, that no other workspace holds it.

A workspace's uid is its owner: stable for as long as the directory lives. Which
workspace holds which uid is recorded in a root-only directory (a *claim* per uid,
naming the workspace by device and inode); a claim whose workspace is gone, moved or
owned by someone else is stale, and the uid is free again. Losing the record (it lives
under ``/run``, cleared at boot) is safe: a call re-claims its workspace's uid, and a
call whose uid another workspace claimed is refused, never run with a shared cap.

Configured by two environment variables, read on each use:

* ``DEPUTY_SANDBOX_UIDS``: ``FIRST-LAST``, the uids to hand out (default
  ``60000-61183``: above Debian's and Red Hat's ordinary users, below systemd's
  dynamic ones, and inside the 65,536 uids a user-namespaced container maps); a uid
  with a name in the user or group database is never handed out;
* ``DEPUTY_SANDBOX_UID_CLAIMS``: the record's directory (default
  ``/run/deputy_shiny/workspace-uids``).

Examples:
    >>> from deputy_shiny.sandbox._uids import workspace_uids
    >>> uids = workspace_uids({"DEPUTY_SANDBOX_UIDS": "70000-70999"})
    >>> uids.start, len(uids)
    (70000, 1000)
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import hashlib
import os
import pwd
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

__all__ = ["UIDS_ENV", "UID_CLAIMS_ENV", "claim_problem", "give_own_uid", "workspace_uids"]

UIDS_ENV = "DEPUTY_SANDBOX_UIDS"
UID_CLAIMS_ENV = "DEPUTY_SANDBOX_UID_CLAIMS"
_DEFAULT_UIDS = range(60000, 61184)
_DEFAULT_CLAIMS = "/run/deputy_shiny/workspace-uids"
_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")
_NOBODY = 65534


def workspace_uids(environ: Mapping[str, str] | None = None) -> range:
    """The uids workspaces are given on a root server (``DEPUTY_SANDBOX_UIDS``).

    Raises ValueError naming the expected form when the variable is malformed.

    Examples:
        >>> 60000 in workspace_uids({})
        True
    """
    text = (os.environ if environ is None else environ).get(UIDS_ENV, "")
    if not text.strip():
        return _DEFAULT_UIDS
    match = _RANGE.match(text)
    first, last = (int(match[1]), int(match[2])) if match else (0, -1)
    if not match or first < 1000 or last < first or last >= 2**31 or first <= _NOBODY <= last:
        raise ValueError(
            f"{UIDS_ENV}={text!r}: expected FIRST-LAST, unused uids from 1000 up "
            "(e.g. 60000-61183), without 65534 (nobody)"
        )
    return range(first, last + 1)


def _claims_dir() -> Path:
    """The record's directory: made root-only, and refused if anyone else could write it."""
    path = Path(os.environ.get(UID_CLAIMS_ENV) or _DEFAULT_CLAIMS)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    if not path.is_dir() or path.is_symlink() or info.st_uid != os.geteuid():
        raise PermissionError(f"{path}: not a directory of this user's (workspace uid record)")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


@contextlib.contextmanager
def _locked() -> Iterator[Path]:
    """The record, locked against every other process that hands out uids."""
    path = _claims_dir()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield path
    finally:
        os.close(fd)  # releases the lock


def _identity(info: os.stat_result) -> str:
    return f"{info.st_dev}:{info.st_ino}"


def _holder(claims: Path, uid: int) -> tuple[str, str] | None:
    """The identity and path of the live workspace that holds ``uid``; None when free."""
    try:
        identity, path = (claims / str(uid)).read_text().split("\n")[:2]
        info = os.stat(path, follow_symlinks=False)
    except (OSError, ValueError):
        return None
    alive = os.path.isdir(path) and info.st_uid == uid and _identity(info) == identity
    return (identity, path) if alive else None


def _claim(claims: Path, uid: int, workspace: Path, info: os.stat_result) -> None:
    temporary = claims / f".{uid}.{os.getpid()}"
    temporary.write_text(f"{_identity(info)}\n{os.path.abspath(workspace)}\n")
    os.replace(temporary, claims / str(uid))


def _named(uid: int) -> bool:
    """Whether ``uid`` (or the group of that number) is a real account: never handed out."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
        except KeyError:
            continue
        return True
    return False


def give_own_uid(workspace: Path) -> int | None:
    """Give ``workspace`` (the directory itself) a uid no other live workspace holds.

    Returns the uid, or None when none is free. The workspace keeps the uid it has
    when that one is in the range and not another's. Otherwise the search starts at a
    place derived from the path (so workspaces spread over the range) and takes the
    first free, unnamed uid. The directory changes owner while the record is locked (a
    claim is only valid for a directory its uid owns); the caller gives it the rest.
    """
    info = os.stat(workspace, follow_symlinks=False)
    uids = workspace_uids()
    with _locked() as claims:
        if info.st_uid in uids:
            holder = _holder(claims, info.st_uid)
            if holder is None or holder[0] == _identity(info):
                _claim(claims, info.st_uid, workspace, info)
                return info.st_uid
        start = int.from_bytes(hashlib.sha256(os.fsencode(workspace)).digest()[:8], "big")
        for step in range(len(uids)):
            uid = uids[(start + step) % len(uids)]
            if _holder(claims, uid) is None and not _named(uid):
                os.chown(workspace, uid, uid, follow_symlinks=False)
                _claim(claims, uid, workspace, info)
                return uid
    return None


def claim_problem(uid: int, workspace: Path) -> str | None:
    """Why ``uid`` is not ``workspace``'s own (a cap on its processes would be shared).

    None when it is: the uid is in the range and no other live workspace holds it (a
    missing or stale claim is taken for ``workspace`` now). A directory inside the
    workspace that holds it (an agent working in a subfolder) is that workspace.
    """
    try:
        uids = workspace_uids()
    except ValueError as exc:
        return str(exc)
    if uid not in uids:
        return f"belongs to uid {uid}, which is not one of the per-workspace uids ({UIDS_ENV})"
    info = os.stat(workspace)
    try:
        with _locked() as claims:
            holder = _holder(claims, uid)
            if holder is None:
                _claim(claims, uid, workspace, info)
            elif holder[0] != _identity(info) and not workspace.resolve().is_relative_to(holder[1]):
                return f"belongs to uid {uid}, which another workspace holds too"
    except OSError as exc:
        return f"belongs to uid {uid}, whose record cannot be checked ({exc})"
    return None
