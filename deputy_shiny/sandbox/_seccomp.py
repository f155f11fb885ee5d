"""The seccomp filter model-run code runs under: system calls it has no business making.

Built with libseccomp (through ``pyseccomp``, a binding of the maintained C library;
no hand-assembled BPF) once per process, exported as a BPF program, and handed to
bubblewrap (``--seccomp FD``), which loads it just before it starts the sandboxed
command. Refused calls fail with ``EPERM``, so a program sees an ordinary error rather
than being killed; everything else is allowed (a deny list, as Flatpak and Docker keep).

What is refused, and why:

* the kernel keyrings (``add_key``, ``request_key``, ``keyctl``): another user's
  secrets may live there;
* new namespaces and mounts (``unshare``, ``setns``, ``clone``/``clone3`` with a
  namespace flag, ``mount`` and the new mount API, ``pivot_root``, ``chroot``): the way
  out of a sandbox, and the way to regain capabilities inside a user namespace;
* looking into or steering other processes (``ptrace``, ``process_vm_readv/writev``,
  ``kcmp``, ``pidfd_getfd``);
* the kernel itself (module loading, ``kexec``, ``reboot``, ``bpf``,
  ``perf_event_open``, ``userfaultfd``, ``swapon``, ``syslog``, ``acct``, ``quotactl``,
  clock setting, ``iopl``/``ioperm``, ``open_by_handle_at``);
* io_uring (``io_uring_setup``, ``io_uring_enter``, ``io_uring_register``): the kernel
  interface with the longest recent record of privilege-escalation bugs, refused by
  Docker's default profile too; nothing a script needs goes without it;
* typing into the controlling terminal (``ioctl`` ``TIOCSTI``/``TIOCLINUX``).

``clone3`` is refused with ``ENOSYS`` rather than ``EPERM``: its flags sit behind a
pointer that seccomp cannot read, and ``ENOSYS`` makes the C library fall back to
``clone``, whose flags the filter does check.

Examples:
    >>> program = seccomp_program()
    >>> program is None or len(program) % 8 == 0  # BPF instructions are 8 bytes each
    True
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import tempfile

__all__ = ["DENIED_SYSCALLS", "seccomp_program", "seccomp_unavailable_reason"]

_log = logging.getLogger(__name__)

DENIED_SYSCALLS: tuple[str, ...] = (
    # keyrings
    "add_key",
    "request_key",
    "keyctl",
    # namespaces, mounts, root changes
    "unshare",
    "setns",
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    # other processes
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    # the kernel
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "swapon",
    "swapoff",
    "syslog",
    "acct",
    "quotactl",
    "quotactl_fd",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "iopl",
    "ioperm",
    "open_by_handle_at",
    "name_to_handle_at",
    "lookup_dcookie",
    "nfsservctl",
    "vhangup",
    "uselib",
    "_sysctl",
    "fanotify_init",
    # io_uring
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
)
"""System calls refused to model-run code (with ``EPERM``), whatever its arguments."""

# clone(2) flags that create a namespace (linux/sched.h).
_CLONE_NAMESPACES = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
    | 0x00000080  # CLONE_NEWTIME
)
_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C


def _build() -> bytes:
    import pyseccomp as seccomp  # a ctypes binding: importing it loads libseccomp

    deny = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            rules.add_rule(deny, name)
        except (OSError, RuntimeError, ValueError):
            # A call this architecture does not have (e.g. iopl on arm64): nothing to deny.
            _log.debug("seccomp: no system call %s here", name)
    # Any namespace flag refuses the call: one rule per flag (a rule compares one value).
    bit = 1
    while bit <= _CLONE_NAMESPACES:
        if _CLONE_NAMESPACES & bit:
            rules.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, bit, bit))
        bit <<= 1
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for request in (_TIOCSTI, _TIOCLINUX):
        rules.add_rule(deny, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request))
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()


@functools.cache
def _compiled() -> tuple[bytes | None, str | None]:
    try:
        return _build(), None
    except (ImportError, OSError, RuntimeError, ValueError, AttributeError) as exc:
        return None, (
            f"the seccomp filter for model-run code cannot be built ({exc}). Install "
            "libseccomp (apt-get install libseccomp2) and the pyseccomp package, or pass "
            'Sandbox(kind="none") to run this code unconfined on purpose.'
        )


def seccomp_program() -> bytes | None:
    """The filter as a BPF program (built once per process), or None when it cannot be built."""
    return _compiled()[0]


def seccomp_unavailable_reason() -> str | None:
    """Why the filter cannot be built here (names the fix), or None when it can.

    Examples:
        >>> reason = seccomp_unavailable_reason()
        >>> reason is None or "seccomp" in reason
        True
    """
    return _compiled()[1]


def seccomp_fd() -> int:
    """A file descriptor (close-on-exec off for the child to inherit) holding the program.

    The caller passes it to bubblewrap with ``--seccomp FD`` and ``pass_fds``, and
    closes it once the process has started.
    """
    program = seccomp_program()
    if program is None:
        raise RuntimeError(seccomp_unavailable_reason())
    fd = os.memfd_create("deputy-seccomp", 0)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
