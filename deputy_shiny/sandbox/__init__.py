"""Sandbox: where model-run code runs, and what it can see.

Code that a model writes is untrusted even when a person approved it: a prompt
injection writes the command and the approver skims it. ``run_bash`` and
``run_python`` (and every tool that runs model-written code) build their command
through a :class:`Sandbox`, so on a shared server that code never sees the server's
API keys, another session's files, the network or the kernel's knobs unless the app
says so.

With ``kind="bwrap"`` (the default) the code runs under bubblewrap:

* never as host root: when the server runs as root, bubblewrap sets the sandbox up
  with root's rights (no user namespace, so host uid 0 is never mapped inside) and
  the command then drops, with ``setpriv``, to the unprivileged owner of the working
  directory (:func:`prepare_workspace` gives each workspace a uid of its own;
  ``run_as`` to choose another), with no capabilities, an empty bounding
  set and ``no_new_privs``; a server that is not root runs it as itself, in a user
  namespace;
* a fresh, read-only root holding only ``/usr`` (and the ``/bin``, ``/lib*`` links),
  a short list of ``/etc`` entries that programs need (CA certificates yes, private
  keys no: ``/etc`` is where a server keeps its own configuration and secrets, so it
  is not bound whole), the Python runtime that ``run_python`` needs, and
  ``read_paths``; all read-only;
* the agent's working directory, read-write, at its own path; a private ``/tmp`` of
  at most ``tmp_mb``; a minimal ``/dev`` and a ``/proc`` of its own process namespace
  whose ``/proc/sys`` is read-only;
* nothing else: ``/root``, ``/home``, the workspace root and the other sessions in it,
  the app's directory and the server's processes do not exist inside;
* new namespaces for everything (the network too unless ``network=True``), every
  capability dropped, ``--die-with-parent`` and ``--new-session``: when the call ends,
  everything it started ends with it;
* a seccomp filter (:mod:`deputy_shiny.sandbox._seccomp`) that refuses the system calls such
  code has no business making: keyrings, mounts, new namespaces, ``ptrace``, kernel
  modules, ``reboot``, io_uring and the like.

The environment is scrubbed with either kind: the code gets a fixed allowlist
(:data:`SAFE_ENV_NAMES`, from the server's environment), ``PATH``, ``HOME`` (the
working directory), ``TMPDIR`` and ``Sandbox(env=...)``, never the server's own
variables. ``kind="none"`` opts out of confinement on purpose (for a trusted
single-user script): it runs as the server's own user and sees the whole machine; it
still scrubs the environment and applies the limits.

Every call has hard caps by default: ``memory_mb`` (an address-space limit per process,
``RLIMIT_AS``, and a memory cgroup for the whole call where the server can create one,
which also counts ``/tmp``), ``max_processes`` and ``tmp_mb``; the tools add a time
limit per call. ``None`` lifts a cap on purpose. ``max_processes`` is a ``pids`` cgroup
where one can be made (a hierarchy counts only if this process can make a cgroup in
it); else ``RLIMIT_NPROC``, which counts every process of a uid, so it is only used
where that count is one session's: set inside the call's own user namespace (a server
that is not root) or under the workspace's own uid (a root server, see
``sandbox/_uids.py``). Anywhere else such a call is refused, naming the
fix; one session's processes never use up another's allowance.

When bubblewrap, ``setpriv`` or the seccomp filter is missing, or the working
directory belongs to root on a root server (see :func:`prepare_workspace`), a call
raises :class:`~deputy_shiny.errors.SandboxUnavailableError` that names the fix; it
never falls back to running unconfined.

The package: ``_sandbox.py`` (the :class:`Sandbox` configuration, the bubblewrap command
line, the drop to an unprivileged user, cgroup limits, :func:`prepare_workspace`),
``_uids.py`` (one uid per workspace on a root server) and ``_seccomp.py`` (the filter).

Examples:
    >>> from deputy_shiny import Sandbox
    >>> sandbox = Sandbox(network=False, env={"MPLBACKEND": "Agg"}, memory_mb=2048)
    >>> sandbox.kind, sandbox.network, sandbox.max_processes, sandbox.tmp_mb
    ('bwrap', False, 256, 256)
    >>> env = Sandbox(kind="none").environment("/srv/ws")
    >>> env["HOME"], "OPENAI_API_KEY" in env
    ('/srv/ws', False)
"""

from ._sandbox import (
    SAFE_ENV_NAMES,
    SANDBOX_USER,
    ConfinedCommand,
    Sandbox,
    prepare_workspace,
    sandbox_unavailable_reason,
)

__all__ = [
    "SAFE_ENV_NAMES",
    "SANDBOX_USER",
    "ConfinedCommand",
    "Sandbox",
    "prepare_workspace",
    "sandbox_unavailable_reason",
]
