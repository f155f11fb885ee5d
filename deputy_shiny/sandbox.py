"""Sandbox: where model-run code runs, and what it can see.

Code that a model writes is untrusted even when a person approved it: a prompt
injection writes the command and the approver skims it. ``run_bash`` and
``run_python`` (and every tool that runs model-written code) build their command
through a :class:`Sandbox`, so on a shared server that code never sees the server's
API keys, another session's files or the network unless the app says so.

With ``kind="bwrap"`` (the default) the code runs under bubblewrap:

* a fresh, read-only root holding only ``/usr`` (and the ``/bin``, ``/lib*`` links),
  a short list of ``/etc`` entries that programs need (``/etc`` is where a server keeps
  its own configuration and secrets, so it is not bound whole), the Python runtime
  that ``run_python`` needs, and ``read_paths``; all read-only;
* the agent's working directory, read-write, at its own path; a private ``/tmp``;
  a minimal ``/dev`` and a ``/proc`` of its own process namespace;
* nothing else: ``/root``, ``/home``, the workspace root and the other sessions in it,
  the app's directory and the server's processes do not exist inside;
* new namespaces for everything (``--unshare-all``; the network too unless
  ``network=True``), every capability dropped, ``--die-with-parent`` and
  ``--new-session``: when the call ends, everything it started ends with it.

The environment is scrubbed with either kind: the code gets a fixed allowlist
(:data:`SAFE_ENV_NAMES`, from the server's environment), ``PATH``, ``HOME`` (the
working directory), ``TMPDIR`` and ``Sandbox(env=...)``, never the server's own
variables. ``kind="none"`` opts out of confinement on purpose (for a trusted
single-user script); it still scrubs the environment and applies the limits.

``memory_mb`` sets an address-space limit (``RLIMIT_AS``, which holds for root too).
``max_processes`` caps the processes one call may run: through a ``pids`` cgroup
where the process can create one (it holds for root too), else ``RLIMIT_NPROC``
(which the kernel does not apply to root); a root server with no writable ``pids``
cgroup cannot enforce it, and the call is refused rather than run unbounded.

When bubblewrap is missing or cannot create its namespaces, a call raises
:class:`~deputy_shiny.errors.SandboxUnavailableError` that names the fix; it never
falls back to running unconfined.

Example:
    >>> from deputy_shiny import Sandbox
    >>> sandbox = Sandbox(network=False, env={"MPLBACKEND": "Agg"}, memory_mb=2048)
    >>> sandbox.kind, sandbox.network
    ('bwrap', False)
    >>> env = Sandbox(kind="none").environment("/srv/ws")
    >>> env["HOME"], "OPENAI_API_KEY" in env
    ('/srv/ws', False)
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .errors import SandboxUnavailableError

_log = logging.getLogger(__name__)

__all__ = [
    "SAFE_ENV_NAMES",
    "ConfinedCommand",
    "Sandbox",
    "sandbox_unavailable_reason",
]

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
    "ssl",
    "timezone",
)
_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED_ENV = frozenset({"PATH", "HOME", "TMPDIR", "PWD"})
_MIN_MEMORY_MB = 64


class Sandbox(BaseModel):
    """Where model-run code runs: bubblewrap confinement (default) or none, on purpose.

    Attributes:
        kind: ``"bwrap"`` confines the code with bubblewrap; ``"none"`` runs it
            unconfined (the environment is still scrubbed and the limits apply).
        network: Let the code reach the network (``--share-net``). Off by default.
        read_paths: Absolute paths the code may read (bound read-only at their own path).
        env: Extra environment variables for the code (the only way a secret gets in).
        memory_mb: Address-space limit per process, in MiB (None: no limit).
        max_processes: The most processes one call may run at once (None: no limit).

    Example:
        >>> Sandbox(read_paths=("/usr/share/dict",)).read_paths
        ('/usr/share/dict',)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["bwrap", "none"] = "bwrap"
    network: bool = False
    read_paths: tuple[str, ...] = ()
    env: Mapping[str, str] = Field(default_factory=dict)
    memory_mb: int | None = Field(default=None, ge=_MIN_MEMORY_MB)
    max_processes: int | None = Field(default=None, ge=1)

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

        Example:
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
        enforced). The caller starts ``argv`` with ``env`` and ``cwd`` in a new session
        and calls :meth:`ConfinedCommand.release` once the process is gone.
        """
        cwd = Path(working_dir).resolve()
        if self.kind == "bwrap":
            reason = sandbox_unavailable_reason()
            if reason is not None:
                raise SandboxUnavailableError(reason)
            command = [*_bwrap_args(self, cwd), "--", *argv]
        else:
            command = list(argv)
        cgroup = _pids_cgroup(self.max_processes) if self.max_processes else None
        prelude = _limits_prelude(self, cgroup)
        if prelude:
            command = ["/bin/sh", "-c", f'{prelude} && exec "$@"', "sh", *command]
        return ConfinedCommand(
            argv=command,
            env=self.environment(cwd),
            cwd=cwd,
            bwrap=self.kind == "bwrap",
            cgroup=cgroup,
        )


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

    def release(self) -> None:
        """Stop the processes the call left in its cgroup and remove the cgroup."""
        cgroup, self.cgroup = self.cgroup, None
        if cgroup is not None:
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


def _bwrap_args(sandbox: Sandbox, cwd: Path) -> list[str]:
    args = [
        "bwrap",
        "--unshare-all",
        *(["--share-net"] if sandbox.network else []),
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--cap-drop",
        "ALL",
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
    for name in _ETC_ENTRIES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    # After the private /tmp, so a Python runtime or read path under /tmp still shows.
    for root in _python_roots():
        args += ["--ro-bind", root, root]
    for extra in sandbox.read_paths:
        args += ["--ro-bind-try", extra, extra]
    args += ["--bind", str(cwd), str(cwd), "--chdir", str(cwd), "--remount-ro", "/"]
    for name, value in sandbox.environment(cwd).items():
        args += ["--setenv", name, value]
    return args


@functools.cache
def _probe_bwrap() -> str | None:
    """Run bubblewrap once; None when it works, else why it does not."""
    if shutil.which("bwrap") is None:
        return (
            "bubblewrap (bwrap) is not installed, and model-run code never runs unconfined "
            "by default. Install it (apt-get install bubblewrap), or pass "
            'Sandbox(kind="none") to run this code unconfined on purpose.'
        )
    try:
        with tempfile.TemporaryDirectory(prefix="deputy-bwrap-probe-") as scratch:
            args = [*_bwrap_args(Sandbox(), Path(scratch)), "--", "/bin/true"]
            done = subprocess.run(args, capture_output=True, timeout=20, env={}, check=False)
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

    Example:
        >>> reason = sandbox_unavailable_reason()
        >>> reason is None or "bubblewrap" in reason
        True
    """
    return _probe_bwrap()


# --------------------------------------------------------------------------- limits


def _limits_prelude(sandbox: Sandbox, cgroup: Path | None) -> str:
    """Shell commands that set the limits before ``exec`` of the confined command."""
    steps = []
    if cgroup is not None:
        steps.append(f"echo $$ > {_shell_quote(str(cgroup / 'cgroup.procs'))}")
    elif sandbox.max_processes:
        steps.append(f"ulimit -u {sandbox.max_processes}")
    if sandbox.memory_mb:
        steps.append(f"ulimit -v {sandbox.memory_mb * 1024}")
    return " && ".join(steps)


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _pids_cgroup(limit: int) -> Path | None:
    """A fresh ``pids`` cgroup capped at ``limit`` (None when RLIMIT_NPROC can do instead)."""
    parent = _pids_parent()
    if parent is None:
        if os.geteuid() != 0:
            return None  # RLIMIT_NPROC holds for an unprivileged user
        raise SandboxUnavailableError(
            "max_processes cannot be enforced: the server runs as root (where RLIMIT_NPROC "
            "does not apply) and cannot create a pids cgroup. Run the app as an "
            "unprivileged user, delegate a cgroup with the pids controller to it, or drop "
            "max_processes."
        )
    path = parent / f"call-{os.getpid()}-{secrets.token_hex(6)}"
    try:
        path.mkdir()
        (path / "pids.max").write_text(str(limit))
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.rmdir()
        raise SandboxUnavailableError(f"max_processes: could not set up {path}: {exc}") from None
    return path


@functools.cache
def _pids_parent() -> Path | None:
    """The directory under which this process may create ``pids`` cgroups, if any."""
    for base in _pids_hierarchies():
        parent = base / "deputy_shiny"
        try:
            parent.mkdir(exist_ok=True)
            v2 = (parent / "cgroup.controllers").exists()
            if _enable_pids_v2(parent) if v2 else (parent / "pids.max").exists():
                return parent
        except OSError:
            continue
    return None


def _pids_hierarchies() -> list[Path]:
    """This process's cgroup directories that carry the ``pids`` controller (v1, then v2)."""
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
            if fstype == "cgroup" and "pids" in controllers.split(",") and "pids" in options:
                found.insert(0, Path(mount_point + path.rstrip("/")))
            elif fstype == "cgroup2" and controllers == "":
                base = Path(mount_point + path.rstrip("/"))
                with contextlib.suppress(OSError):
                    if "pids" in (base / "cgroup.controllers").read_text().split():
                        found.append(base)
    return found


def _enable_pids_v2(parent: Path) -> bool:
    """Give ``parent``'s children the pids controller (cgroup v2); False if it cannot."""
    if "pids" not in (parent / "cgroup.controllers").read_text().split():
        return False
    subtree = parent / "cgroup.subtree_control"
    with contextlib.suppress(OSError):
        subtree.write_text("+pids")
    return "pids" in subtree.read_text().split()


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
