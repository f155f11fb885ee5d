"""The sandbox's cgroups: a fresh ``pids`` and ``memory`` cgroup for each call, where
this process can make one.

A hierarchy counts only if this process can create and remove a child in it, so a
``deputy_shiny`` directory a root server left behind (there, but not writable for a
server that is not root) is treated as absent; the sandbox's process-cap check then
decides what holds instead (never a count shared with other sessions).

Examples:
    >>> _LIMIT_FILES["pids"]
    ('pids.max', 'pids.max')
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import signal
import time
from pathlib import Path

_log = logging.getLogger(__name__)

# controller -> (limit file under cgroup v2, under v1)
_LIMIT_FILES = {"pids": ("pids.max", "pids.max"), "memory": ("memory.max", "memory.limit_in_bytes")}


def _call_cgroups(max_processes: int | None, memory_bytes: int | None) -> dict[str, Path]:
    """Fresh cgroups that cap this call's processes and memory, where they can be made.

    One directory per hierarchy: under cgroup v2 both controllers share it, under v1
    each has its own. A controller with no writable hierarchy, or whose cgroup cannot
    be made now, is left out (the rlimits still apply, and the sandbox's process-cap
    check decides what holds); ``memory_bytes`` should count the call's ``/tmp`` too.
    """
    wanted: dict[str, int] = {}
    if max_processes:
        wanted["pids"] = max_processes
    if memory_bytes:
        wanted["memory"] = memory_bytes
    made: dict[Path, Path] = {}  # parent -> this call's directory under it
    found: dict[str, Path] = {}
    name = f"call-{os.getpid()}-{secrets.token_hex(6)}"
    for controller, limit in wanted.items():
        parent = _cgroup_parent(controller)
        if parent is None:
            continue
        try:
            path = made.get(parent)
            if path is None:
                path = parent / name
                path.mkdir()
                made[parent] = path
            v2 = (parent / "cgroup.controllers").exists()
            limit_file = _LIMIT_FILES[controller][0 if v2 else 1]
            (path / limit_file).write_text(str(limit))
            if controller == "memory" and not v2:
                # v1 does not count kernel memory apart; swap must not dodge the cap.
                with contextlib.suppress(OSError):
                    (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
            found[controller] = path
        except OSError as exc:
            _log.warning("no %s cgroup for this call (%s): the rlimits apply", controller, exc)
    for path in set(made.values()) - set(found.values()):
        with contextlib.suppress(OSError):
            path.rmdir()
    return found


_MADE_PARENTS: list[Path] = []
"""The ``deputy_shiny`` cgroup directories this process created (see
:func:`_remove_made_parents`)."""


@functools.cache
def _cgroup_parent(controller: str) -> Path | None:
    """The directory under which this process may create ``controller`` cgroups, if any.

    A hierarchy counts only if this process can make a cgroup in it, checked by
    creating and removing a child: a ``deputy_shiny`` directory a root server left
    behind is there but not writable for a server that is not root.
    """
    for base in _hierarchies(controller):
        parent = base / "deputy_shiny"
        try:
            try:
                parent.mkdir()
                _MADE_PARENTS.append(parent)
            except FileExistsError:
                pass
            v2 = (parent / "cgroup.controllers").exists()
            limit_file = _LIMIT_FILES[controller][0 if v2 else 1]
            if not (_enable_v2(parent, controller) if v2 else (parent / limit_file).exists()):
                continue
            probe = parent / f"probe-{os.getpid()}-{secrets.token_hex(4)}"
            probe.mkdir()
            probe.rmdir()
            return parent
        except OSError:
            continue
    return None


def _remove_made_parents() -> None:
    """Remove the ``deputy_shiny`` cgroup directories this process made, where empty.

    For a process that is done with the sandbox (a test session): a server keeps them.
    Directories other processes still use stay (a cgroup with children cannot go).
    """
    while _MADE_PARENTS:
        with contextlib.suppress(OSError):
            _MADE_PARENTS.pop().rmdir()
    _cgroup_parent.cache_clear()


def _pids_parent() -> Path | None:
    """Where ``pids`` cgroups are made (None when nowhere)."""
    return _cgroup_parent("pids")


def _hierarchies(controller: str) -> list[Path]:
    """This process's cgroup directories that carry ``controller`` (v1 first, then v2)."""
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    found: list[Path] = []
    for line in mounts:
        fields = line.split()
        if " - " not in line:
            continue
        mount_point = fields[4]
        fstype, _source, options = line.split(" - ", 1)[1].split()[:3]
        for entry in own:
            _hid, controllers, path = entry.split(":", 2)
            if (
                fstype == "cgroup"
                and controller in controllers.split(",")
                and controller in options.split(",")
            ):
                found.insert(0, Path(mount_point + path.rstrip("/")))
            elif fstype == "cgroup2" and controllers == "":
                base = Path(mount_point + path.rstrip("/"))
                with contextlib.suppress(OSError):
                    if controller in (base / "cgroup.controllers").read_text().split():
                        found.append(base)
    return found


def _enable_v2(parent: Path, controller: str) -> bool:
    """Give ``parent``'s children ``controller`` (cgroup v2); False if it cannot."""
    if controller not in (parent / "cgroup.controllers").read_text().split():
        return False
    subtree = parent / "cgroup.subtree_control"
    with contextlib.suppress(OSError):
        subtree.write_text(f"+{controller}")
    return controller in subtree.read_text().split()


def _remove_cgroup(path: Path) -> None:
    """SIGKILL what is left in a call's cgroup, then remove it."""
    for _ in range(50):
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)  # the killed processes are still being reaped
    _log.warning("could not remove the process cgroup %s", path)
