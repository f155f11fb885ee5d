"""The sandbox itself: the bubblewrap command line, the drop to an unprivileged user,
the scrubbed environment, the limits (see :mod:`deputy_shiny.sandbox` for what and why).

Examples:
    >>> from deputy_shiny.sandbox import Sandbox
    >>> Sandbox(kind="none").environment("/srv/ws")["HOME"]
    '/srv/ws'
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._util.secret_paths import protected_paths, protected_root
from ..errors import SandboxUnavailableError
from ._cgroups import _call_cgroups, _remove_cgroup
from ._seccomp import seccomp_fd, seccomp_unavailable_reason
from ._uids import claim_problem, give_own_uid

_log = logging.getLogger(__name__)

__all__ = [
    "SAFE_ENV_NAMES",
    "SANDBOX_USER",
    "ConfinedCommand",
    "Sandbox",
    "prepare_workspace",
    "sandbox_unavailable_reason",
]

SANDBOX_USER: tuple[int, int] = (65534, 65534)
"""The unprivileged uid and gid (``nobody:nogroup``) that :func:`prepare_workspace`
gives a workspace to on a root server when no uid of its own is free."""

SAFE_ENV_NAMES: tuple[str, ...] = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
"""Variables copied from the server's environment into model-run code (locale and
time zone only: nothing that could hold a secret)."""

# /etc entries programs need (name service, TLS roots, time zone, linker, Debian's
# alternatives links). Missing ones are skipped.
_ETC_ENTRIES = (
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "fonts",
    "group",
    "host.conf",
    "hostname",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "profile",
    "protocols",
    "resolv.conf",
    "services",
    "ssl/certs",
    "ssl/openssl.cnf",
    "timezone",
)
_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED_ENV = frozenset({"PATH", "HOME", "TMPDIR", "PWD"})
_MIN_MEMORY_MB = 64
_SETPRIV = "/usr/bin/setpriv"
_PRLIMIT = "/usr/bin/prlimit"
# Under the fresh /proc, what stays read-only even for code that is root in its own
# namespace: the kernel's knobs (sysctl) and its trigger files.
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")


class Sandbox(BaseModel):
    """Where model-run code runs: bubblewrap confinement (default) or none, on purpose.

    Attributes:
        kind: ``"bwrap"`` confines the code with bubblewrap; ``"none"`` runs it
            unconfined (the environment is still scrubbed and the limits apply).
        network: Let the code reach the network (``--share-net``). Off by default.
        read_paths: Absolute paths the code may read (bound read-only at their own path).
        env: Extra environment variables for the code (the only way a secret gets in).
        memory_mb: Memory limit, in MiB: the address space of each process
            (``RLIMIT_AS``) and, where a memory cgroup can be made, all the call's
            processes and its ``/tmp`` together (None: no limit).
        max_processes: The most processes one call may run at once (None: no limit):
            a pids cgroup where one can be made, else ``RLIMIT_NPROC`` where it counts
            only this call's (or, on a root server, this workspace's) processes;
            anywhere else a call is refused rather than share a count with others.
        tmp_mb: The size of the private ``/tmp``, in MiB.
        run_as: ``(uid, gid)`` the code runs as when the server is root (None: the
            working directory's owner, which must not be root). Never 0.

    Examples:
        >>> Sandbox(read_paths=("/usr/share/dict",)).read_paths
        ('/usr/share/dict',)
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    kind: Literal["bwrap", "none"] = "bwrap"
    network: bool = False
    read_paths: tuple[str, ...] = ()
    env: Mapping[str, str] = Field(default_factory=dict)
    memory_mb: int | None = Field(default=2048, ge=_MIN_MEMORY_MB)
    max_processes: int | None = Field(default=256, ge=1)
    tmp_mb: int = Field(default=256, ge=1)
    run_as: tuple[int, int] | None = None

    @field_validator("run_as")
    @classmethod
    def _not_root(cls, value: tuple[int, int] | None) -> tuple[int, int] | None:
        if value is not None and (value[0] <= 0 or value[1] <= 0):
            raise ValueError("run_as must be an unprivileged (uid, gid): never 0 (root)")
        return value

    @field_validator("read_paths", mode="before")
    @classmethod
    def _absolute_paths(cls, value: object) -> tuple[str, ...]:
        if isinstance(value, str | os.PathLike):
            value = (value,)
        if not isinstance(value, Sequence):
            raise ValueError("read_paths must be a list of absolute paths")
        paths = []
        for item in value:
            text = os.fspath(item) if isinstance(item, str | os.PathLike) else None
            if not text or not os.path.isabs(text):
                raise ValueError(f"read_paths entries must be absolute paths, got {item!r}")
            paths.append(os.path.normpath(text))
        return tuple(paths)

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: Mapping[str, str]) -> Mapping[str, str]:
        for name, text in value.items():
            if not _ENV_NAME.match(name) or name in _RESERVED_ENV:
                raise ValueError(
                    f"env name {name!r} is not allowed (a variable name other than "
                    f"{', '.join(sorted(_RESERVED_ENV))})"
                )
            if not isinstance(text, str) or "\0" in text:
                raise ValueError(f"env value of {name!r} must be a string without NUL")
        return dict(value)

    def environment(self, working_dir: str | os.PathLike[str]) -> dict[str, str]:
        """The scrubbed environment model-run code gets (never the server's own).

        Examples:
            >>> env = Sandbox(env={"A": "1"}).environment("/w")
            >>> env["A"], env["HOME"], env["TMPDIR"]
            ('1', '/w', '/tmp')
        """
        env = {name: os.environ[name] for name in SAFE_ENV_NAMES if name in os.environ}
        env.update(
            PATH=os.pathsep.join(_search_path()),
            HOME=os.fspath(working_dir),
            TMPDIR="/tmp",
        )
        env.update(self.env)
        return env

    def confine(self, argv: Sequence[str], working_dir: str | os.PathLike[str]) -> ConfinedCommand:
        """Build the command that runs ``argv`` in ``working_dir`` under this sandbox.

        Raises :class:`~deputy_shiny.errors.SandboxUnavailableError` when the sandbox
        cannot be had (bubblewrap missing or broken, a process cap that cannot be
        enforced for this call alone, a root-owned workspace on a root server). The
        caller starts ``argv`` with ``env``, ``cwd`` and ``pass_fds`` (the seccomp
        filter) in a new session, calls :meth:`ConfinedCommand.started` once it is
        running and :meth:`ConfinedCommand.release` once it is gone.
        """
        cwd = Path(working_dir).resolve()
        _refuse_secret_cwd(cwd)
        # The cgroups first: whether a pids cgroup could be made decides how the
        # process cap is enforced, or whether it can be at all.
        # The memory cgroup also counts the call's /tmp (a tmpfs).
        memory = (self.memory_mb + self.tmp_mb) * 2**20 if self.memory_mb else None
        cgroups = _call_cgroups(self.max_processes, memory)
        try:
            argv_, pass_fds = self._command(argv, cwd, cgroups)
        except BaseException:
            for path in set(cgroups.values()):
                _remove_cgroup(path)
            raise
        return ConfinedCommand(
            argv=argv_,
            env=self.environment(cwd),
            cwd=cwd,
            bwrap=self.kind == "bwrap",
            cgroup=cgroups.get("pids"),
            memory_cgroup=cgroups.get("memory"),
            pass_fds=pass_fds,
        )

    def _command(
        self, argv: Sequence[str], cwd: Path, cgroups: Mapping[str, Path]
    ) -> tuple[list[str], tuple[int, ...]]:
        """The full command line, and the descriptors it needs."""
        if self.kind != "bwrap":
            _check_process_cap(self, cwd, None, cgroups)
            return [*_limits_prefix(self, cgroups, nproc=True), *argv], ()
        reason = sandbox_unavailable_reason()
        if reason is not None:
            raise SandboxUnavailableError(reason)
        user = self._host_user(cwd)
        _check_process_cap(self, cwd, user, cgroups)
        # Not root: the code runs in a user namespace of its own, and RLIMIT_NPROC set
        # inside it counts only that namespace's processes (this call's). As root (no
        # user namespace) it counts the uid's, which is the workspace's own.
        inside = user is None and self.max_processes is not None and "pids" not in cgroups
        inner = [_PRLIMIT, f"--nproc={self.max_processes}", "--"] if inside else []
        filter_fd = seccomp_fd()
        try:
            command = [*_bwrap_args(self, cwd, user, filter_fd), "--", *inner, *_drop(user)]
        except BaseException:
            os.close(filter_fd)
            raise
        return [*_limits_prefix(self, cgroups, nproc=not inside), *command, *argv], (filter_fd,)

    def _host_user(self, cwd: Path) -> tuple[int, int] | None:
        """The unprivileged (uid, gid) a root server drops to; None when not root."""
        if os.geteuid() != 0:
            return None
        if self.run_as is not None:
            return self.run_as
        info = cwd.stat()
        if info.st_uid == 0:
            raise SandboxUnavailableError(
                f"The server runs as root and the working directory {cwd} belongs to root; "
                "model-run code never runs as root, so it could not write there. Give the "
                "directory to an unprivileged user (deputy_shiny.sandbox.prepare_workspace("
                "path), or chown), pass Sandbox(run_as=(uid, gid)), or run the server as an "
                "unprivileged user."
            )
        return info.st_uid, (info.st_gid or info.st_uid)


@dataclass
class ConfinedCommand:
    """A command ready to start: ``argv``, ``env`` and ``cwd`` for :class:`subprocess.Popen`.

    ``release()`` stops whatever is left in the call's process cgroup and removes it
    (nothing to do without ``max_processes``). Safe to repeat.
    """

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    bwrap: bool = False
    cgroup: Path | None = field(default=None, repr=False)
    memory_cgroup: Path | None = field(default=None, repr=False)
    pass_fds: tuple[int, ...] = ()
    """Descriptors the child must inherit (``Popen(pass_fds=...)``): the seccomp filter."""

    def started(self) -> None:
        """Close the parent's copies of :attr:`pass_fds` once the process has started."""
        fds, self.pass_fds = self.pass_fds, ()
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def release(self) -> None:
        """Stop the processes the call left in its cgroups and remove them."""
        self.started()
        cgroups = {path for path in (self.cgroup, self.memory_cgroup) if path is not None}
        self.cgroup = self.memory_cgroup = None
        for cgroup in cgroups:  # one directory under cgroup v2, one per controller under v1
            _remove_cgroup(cgroup)


# --------------------------------------------------------------------------- bubblewrap


@functools.cache
def _python_roots() -> tuple[str, ...]:
    """The directories the running Python lives in (venv and base install), outside /usr."""
    candidates = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
    }
    roots = sorted(os.path.realpath(p) for p in candidates if p and os.path.isdir(p))
    kept: list[str] = []
    for root in roots:
        if root == "/usr" or root.startswith("/usr/") or root == "/":
            continue
        if any(root.startswith(k.rstrip("/") + "/") for k in kept):
            continue
        kept.append(root)
    return tuple(kept)


@functools.cache
def _search_path() -> tuple[str, ...]:
    """PATH for model-run code: the Python environment's bin first, then the system's."""
    first = os.path.dirname(sys.executable)
    return tuple(dict.fromkeys([first, "/usr/local/bin", "/usr/bin", "/bin"]))


def _ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/a", "/a/b"]``: the directories bubblewrap would create for a mount."""
    parts = Path(path).parts[1:-1]
    return [os.path.join("/", *parts[: i + 1]) for i in range(len(parts))]


def _parent_dirs(targets: Sequence[str], made: set[str]) -> list[str]:
    """``--dir`` arguments (mode 0755) for the parents of ``targets`` not yet in ``made``."""
    args: list[str] = []
    for target in targets:
        for parent in _ancestors(target):
            if parent not in made and not parent.startswith(("/usr/", "/proc/", "/dev/")):
                made.add(parent)
                args += ["--perms", "0755", "--dir", parent]
    return args


def _bwrap_args(
    sandbox: Sandbox, cwd: Path, user: tuple[int, int] | None, filter_fd: int
) -> list[str]:
    if user is None:
        # Not root: bubblewrap makes a user namespace, and the code runs as this user.
        isolation = ["--unshare-all", *(["--share-net"] if sandbox.network else [])]
        capabilities = ["--cap-drop", "ALL"]
    else:
        # Root: no user namespace (it would map the code to host uid 0). bubblewrap mounts
        # with root's rights and keeps only what it needs to enter a workspace that is
        # private to its owner (DAC) and what setpriv needs to drop to ``user``; the drop
        # then clears them all before any model-written code runs.
        isolation = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
        isolation += [] if sandbox.network else ["--unshare-net"]
        capabilities = ["--cap-drop", "ALL"]
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_READ_SEARCH"):
            capabilities += ["--cap-add", cap]
    args = [
        "bwrap",
        *isolation,
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        *capabilities,
        "--seccomp",
        str(filter_fd),
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for name in _ROOT_LINKS:
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    # bubblewrap gives the directories it creates for a mount the modes of the source's
    # parents (``/root`` 0700 would hide a runtime under it from the unprivileged user),
    # so every such directory is made first, 0755.
    made: set[str] = set()
    args += _parent_dirs([f"/etc/{name}" for name in _ETC_ENTRIES], made)
    for name in _ETC_ENTRIES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc"]
    for name in _PROC_READ_ONLY:
        args += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
    args += ["--dev", "/dev", "--perms", "1777", "--size", str(sandbox.tmp_mb * 2**20)]
    args += ["--tmpfs", "/tmp"]
    # After the private /tmp, so a Python runtime or read path under /tmp still shows.
    args += _parent_dirs([*_python_roots(), *sandbox.read_paths, str(cwd)], made)
    for root in _python_roots():
        args += ["--ro-bind", root, root]
    for extra in sandbox.read_paths:
        args += ["--ro-bind-try", extra, extra]
    args += ["--bind", str(cwd), str(cwd)]
    args += _hidden_secrets([*_python_roots(), *sandbox.read_paths, str(cwd)])
    args += ["--chdir", str(cwd), "--remount-ro", "/"]
    for name, value in sandbox.environment(cwd).items():
        args += ["--setenv", name, value]
    return args


def _hidden_secrets(bound: Sequence[str]) -> list[str]:
    """Mounts that blank the server's own secrets (the record key's folder, the kit's
    records: :mod:`deputy_shiny._util.secret_paths`) wherever a bound directory holds
    them, as a working directory of ``$HOME`` holds ``~/.local/state``: an empty, private
    tmpfs over a folder, ``/dev/null`` over a file. The seccomp filter refuses ``umount``,
    so the code cannot lift them."""
    args: list[str] = []
    secrets = protected_paths()
    for shown in bound:
        source = Path(os.path.realpath(shown))
        for secret in secrets:
            if not secret.is_relative_to(source):
                continue
            target = str(Path(shown) / secret.relative_to(source))
            if secret.is_dir():
                args += ["--perms", "0700", "--size", "4096", "--tmpfs", target]
            elif secret.exists():
                args += ["--ro-bind", "/dev/null", target]
    return args


def _refuse_secret_cwd(cwd: Path) -> None:
    """A working directory inside the server's own secrets cannot be given to model-run
    code at all (it would be the secret)."""
    secret = protected_root(cwd)
    if secret is not None:
        raise SandboxUnavailableError(
            f"The working directory {cwd} is inside {secret}, which holds the server's own "
            "keys or records (the record key signs every saved record); model-run code "
            "never runs there. Use another working directory."
        )


def _drop(user: tuple[int, int] | None) -> list[str]:
    """The ``setpriv`` prefix that turns a root-started sandbox into ``user`` for good."""
    if user is None:
        return []
    uid, gid = user
    return [
        _SETPRIV,
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--ambient-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def prepare_workspace(path: str | os.PathLike[str]) -> Path:
    """Make a directory one that model-run code may write, whoever runs the server.

    On a server running as root, model-run code runs as the working directory's owner,
    never as root; this gives ``path`` (created if missing, with everything in it) to
    a uid of its own (gid the same number) from the per-workspace range
    (``DEPUTY_SANDBOX_UIDS``, see ``sandbox/_uids.py``), so one session's
    processes never count against another's. A workspace keeps the uid it has when
    that is its own already. When the range has no free uid left (or its record cannot
    be written), the workspace goes to :data:`SANDBOX_USER`, with a warning: calls
    there still run under a pids cgroup, and are refused where the process cap would
    be shared. Elsewhere the server's own user owns it already and nothing changes.
    Symlinks inside are changed themselves, never what they point at.

    Examples:
        >>> import tempfile
        >>> ws = prepare_workspace(tempfile.mkdtemp())
        >>> os.geteuid() != 0 or ws.stat().st_uid not in (0, SANDBOX_USER[0])
        True
    """
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return root
    try:
        uid = give_own_uid(root.resolve())
    except (OSError, ValueError) as exc:
        _log.warning("no uid of its own for the workspace %s: %s", root, exc)
        uid = None
    if uid is None:
        _log.warning(
            "no free per-workspace uid for %s: it goes to nobody (widen DEPUTY_SANDBOX_UIDS)",
            root,
        )
    uid, gid = (uid, uid) if uid is not None else SANDBOX_USER
    os.chown(root, uid, gid, follow_symlinks=False)
    for _top, dirs, files, top_fd in os.fwalk(root):
        for name in [*dirs, *files]:
            with contextlib.suppress(FileNotFoundError):
                os.chown(name, uid, gid, dir_fd=top_fd, follow_symlinks=False)
    return root


@functools.cache
def _probe_bwrap() -> str | None:
    """Run bubblewrap once; None when it works, else why it does not."""
    reason = seccomp_unavailable_reason()
    if reason is not None:
        return reason
    if not os.access(_PRLIMIT, os.X_OK):
        return (
            f"{_PRLIMIT} (util-linux) is missing; the sandbox needs it to cap memory and "
            "processes. Install util-linux."
        )
    if os.geteuid() == 0 and not os.access(_SETPRIV, os.X_OK):
        return (
            f"{_SETPRIV} (util-linux) is missing; a server running as root needs it to run "
            "model-run code as an unprivileged user. Install util-linux, run the server "
            'as an unprivileged user, or pass Sandbox(kind="none") to run this code '
            "unconfined on purpose."
        )
    if shutil.which("bwrap") is None:
        return (
            "bubblewrap (bwrap) is not installed, and model-run code never runs unconfined "
            "by default. Install it (apt-get install bubblewrap), or pass "
            'Sandbox(kind="none") to run this code unconfined on purpose.'
        )
    try:
        with tempfile.TemporaryDirectory(prefix="deputy-bwrap-probe-") as scratch:
            user = SANDBOX_USER if os.geteuid() == 0 else None
            filter_fd = seccomp_fd()
            try:
                args = [*_bwrap_args(Sandbox(), Path(scratch), user, filter_fd), "--"]
                args += [*_drop(user), "/bin/true"]
                done = subprocess.run(
                    args,
                    capture_output=True,
                    timeout=20,
                    env={},
                    check=False,
                    pass_fds=(filter_fd,),
                )
            finally:
                os.close(filter_fd)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap (bwrap) could not start: {exc}"
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()
        return (
            "bubblewrap (bwrap) is installed but cannot create its sandbox here "
            f"({detail[-1] if detail else f'exit code {done.returncode}'}); it needs "
            'user namespaces. Enable them, or pass Sandbox(kind="none") to run this code '
            "unconfined on purpose."
        )
    return None


def sandbox_unavailable_reason() -> str | None:
    """Why the bubblewrap sandbox cannot run on this machine, or None when it can.

    The answer is probed once per process (bubblewrap runs ``true``).

    Examples:
        >>> reason = sandbox_unavailable_reason()
        >>> reason is None or "bubblewrap" in reason
        True
    """
    return _probe_bwrap()


# --------------------------------------------------------------------------- limits


def _limits_prefix(sandbox: Sandbox, cgroups: Mapping[str, Path], *, nproc: bool) -> list[str]:
    """The prefix that puts the limits in place, then execs the confined command.

    It runs as the server's user, before any privilege drop, so a root server can put
    the call into cgroups it made: a tiny ``sh`` joins them, and util-linux's
    ``prlimit`` sets the rlimits (a shell's ``ulimit`` differs between shells).
    ``nproc``: set ``RLIMIT_NPROC`` here (else it is set inside the sandbox, or not).
    """
    prefix: list[str] = []
    if cgroups:
        joins = " && ".join(
            f"echo $$ > {_shell_quote(str(path / 'cgroup.procs'))}"
            for path in dict.fromkeys(cgroups.values())
        )
        prefix = ["/bin/sh", "-c", f'{joins} && exec "$@"', "sh"]
    limits = []
    if nproc and sandbox.max_processes and "pids" not in cgroups:
        # _check_process_cap made sure the uid is this call's (or workspace's) alone.
        limits.append(f"--nproc={sandbox.max_processes}")
    if sandbox.memory_mb:
        limits.append(f"--as={sandbox.memory_mb * 2**20}")
    if limits:
        prefix += [_PRLIMIT, *limits, "--"]
    return prefix


_NO_SHARED_CAP_FIX = (
    "make a pids cgroup available (a writable cgroup hierarchy: systemd's Delegate=yes, "
    "or a container whose cgroupfs is writable), or pass Sandbox(max_processes=None) to "
    "run without a process cap on purpose."
)


def _check_process_cap(
    sandbox: Sandbox, cwd: Path, user: tuple[int, int] | None, cgroups: Mapping[str, Path]
) -> None:
    """Refuse a process cap that would not be this call's (or its workspace's) alone.

    Without a pids cgroup the cap is ``RLIMIT_NPROC``, which counts every process of a
    uid: shared by every session that runs as that uid, so one session's sleepers
    would make every other session's calls fail. It is only used where the count is
    one session's: inside the call's own user namespace (a server that is not root,
    Linux 5.14 or later), or, on a root server, under the workspace's own uid.
    """
    if not sandbox.max_processes or "pids" in cgroups:
        return
    why, fix = "", "To fix it, "
    if sandbox.kind == "none":
        why = (
            'Sandbox(kind="none") runs the code as the server\'s own user, whose process '
            "count every session shares"
        )
    elif user is None:
        why = _no_count_per_call()
        if not why:
            return
    elif sandbox.run_as is not None:
        why = (
            f"Sandbox(run_as={sandbox.run_as}) runs every session as uid {user[0]}, and "
            "RLIMIT_NPROC counts every process of a uid, so sessions would share one count"
        )
    else:
        problem = claim_problem(user[0], cwd)
        if problem is None:
            return
        why = (
            f"the working directory {cwd} {problem}; RLIMIT_NPROC counts every process "
            "of a uid, so sessions would share one count"
        )
        fix += (
            "give the workspace a uid of its own (deputy_shiny.sandbox.prepare_workspace(path)), "
        )
    raise SandboxUnavailableError(
        f"max_processes={sandbox.max_processes} cannot be enforced for this session alone: "
        f"no pids cgroup can be made here, and {why}. {fix}{_NO_SHARED_CAP_FIX}"
    )


@functools.cache
def _no_count_per_call() -> str:
    """Why RLIMIT_NPROC set in a call's user namespace would not count that call's
    processes alone ("" when it would: Linux 5.14's per-namespace counts, and a
    bubblewrap that is not setuid, which always makes the namespace)."""
    match = re.match(r"(\d+)\.(\d+)", platform.release())
    if match is None or (int(match[1]), int(match[2])) < (5, 14):
        return (
            f"this kernel ({platform.release()}) counts RLIMIT_NPROC for the server's "
            "whole user, not per user namespace (Linux 5.14 and later do), so every "
            "session would share one count"
        )
    bwrap = shutil.which("bwrap")
    if bwrap is not None and os.stat(bwrap).st_mode & stat.S_ISUID:
        return (
            f"{bwrap} is setuid, so it may run the code without a user namespace of its "
            "own, where RLIMIT_NPROC counts the server's whole user"
        )
    return ""


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
