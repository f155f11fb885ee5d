"""Model-run code is never host root and cannot touch the kernel's knobs.

Attacked as a prompt-injected model would, on a server running as root (this suite's
own process: CI runs as root) and on a server running as a normal user (the same
``Sandbox.confine`` built as that user would build it, then started as that user). Each
check reads the effect from the host where it can: the core pattern is unchanged, the
file on disk stops at the cap.

Nothing here writes to a kernel knob even when the sandbox would let it: the test opens
``/proc/sys/kernel/core_pattern`` for writing and closes it without a byte.
"""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import deputy_shiny.sandbox._sandbox as sandbox_module
from deputy_shiny import Agent, Permissions, Sandbox, sandbox_unavailable_reason
from deputy_shiny.errors import SandboxUnavailableError
from deputy_shiny.sandbox import SANDBOX_USER, prepare_workspace
from deputy_shiny.sandbox._seccomp import DENIED_SYSCALLS, seccomp_program
from deputy_shiny.sandbox._uids import workspace_uids
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_run_bash
from tests.helpers import run_confined

NORMAL_UID = 4242  # a normal user with no passwd entry: nothing about it is special
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, inside /usr: visible to every sandbox

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to play both servers")

# x86_64 and aarch64 numbers of the calls the probe makes directly.
_SYSCALLS = {
    "x86_64": {"add_key": 248, "keyctl": 250, "request_key": 249, "ptrace": 101, "mount": 165,
               "reboot": 169, "init_module": 175, "unshare": 272, "setns": 308, "bpf": 321,
               "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427},
    "aarch64": {"add_key": 217, "keyctl": 219, "request_key": 218, "ptrace": 117, "mount": 40,
                "reboot": 142, "init_module": 105, "unshare": 97, "setns": 268, "bpf": 280,
                "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427},
}  # fmt: skip


@pytest.fixture(autouse=True)
def _sandbox_works() -> None:
    assert sandbox_unavailable_reason() is None, sandbox_unavailable_reason()


@pytest.fixture(params=["root", "normal"])
def server(request: pytest.FixtureRequest) -> str:
    """Which user the server runs as: this process (root), or a normal user."""
    return str(request.param)


@pytest.fixture
def workspace(server: str) -> Iterator[Path]:
    """A session workspace as each server would have it (private to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="deputy-priv-", dir="/tmp"))
    try:
        if server == "root":
            prepare_workspace(path)
        else:
            os.chown(path, NORMAL_UID, NORMAL_UID)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run(server: str, workspace: Path, script: str, sandbox: Sandbox | None = None) -> str:
    """Run ``script`` (bash) the way run_bash would on that server; return its output."""
    sandbox = sandbox or Sandbox()
    if server == "root":
        return run_confined(sandbox.confine(["bash", "-c", script], workspace))
    # Build the command as a normal user's server would: no root, so no cgroup it could
    # make and no Python runtime of ours under /root it could read.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sandbox_module.os, "geteuid", lambda: NORMAL_UID)
        mp.setattr(sandbox_module, "_call_cgroups", lambda *_limits: {})
        mp.setattr(sandbox_module, "_python_roots", lambda: ())
        confined = sandbox.confine(["bash", "-c", script], workspace)
    return run_confined(confined, uid=NORMAL_UID)


def syscall_probe(*names: str) -> str:
    """Python (Debian's) that makes each named system call and prints its errno name."""
    numbers = _SYSCALLS[platform.machine()]
    calls = ", ".join(f"({name!r}, {numbers[name]})" for name in names)
    return (
        f'{SYSTEM_PYTHON} -c "import ctypes, errno\n'
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"for name, nr in [{calls}]:\n"
        "    rc = libc.syscall(nr, 0, 0, 0, 0, 0)\n"
        "    print(name, rc, errno.errorcode.get(ctypes.get_errno(), 'OK'))\""
    )


# ------------------------------------------------------------------------ who runs the code


def test_the_code_is_never_host_root(server: str, workspace: Path) -> None:
    out = run(server, workspace, "id -u; id -g; grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs)' "
              "/proc/self/status")  # fmt: skip
    lines = out.split()
    assert lines[0] != "0" and lines[1] != "0", out
    # A root server: the workspace's own uid (from the per-workspace range), no one else's.
    expected = workspace.stat().st_uid if server == "root" else NORMAL_UID
    assert server == "normal" or expected in workspace_uids()
    assert lines[0] == str(expected)
    assert "CapEff:\t0000000000000000" in out and "NoNewPrivs:\t1" in out


def test_the_code_can_still_use_its_workspace(server: str, workspace: Path) -> None:
    out = run(server, workspace, "echo note > note.txt && cat note.txt && echo hi > /tmp/x "
              "&& cat /tmp/x")  # fmt: skip
    assert out.split() == ["note", "hi"]
    owner = workspace.stat().st_uid if server == "root" else NORMAL_UID
    assert owner not in (0, SANDBOX_USER[0]) and (workspace / "note.txt").stat().st_uid == owner


def test_a_root_owned_workspace_is_refused_on_a_root_server(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailableError, match="never runs as root"):
        Sandbox().confine(["true"], tmp_path)
    with pytest.raises(ValueError, match="never 0"):
        Sandbox(run_as=(0, 0))


async def test_run_bash_says_how_to_fix_a_root_owned_workspace(tmp_path: Path) -> None:
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[ScriptedToolCall("run_bash", {"command": "id -u"})]), "ok"]
    )
    agent = Agent(
        model, tools=[tool_run_bash()], working_dir=tmp_path, permissions=Permissions(run_bash=True)
    )
    result = await agent.run_async("go")
    (end,) = [e for e in result.events if e.type == "tool_end"]
    assert end.is_error and "prepare_workspace" in end.output
    assert "\n0\n" not in f"\n{end.output}\n"  # nothing ran


# ------------------------------------------------------------------------ the kernel's knobs


def test_kernel_knobs_cannot_be_opened_for_writing(server: str, workspace: Path) -> None:
    before = Path("/proc/sys/kernel/core_pattern").read_bytes()
    # Open for writing and close without writing: nothing changes even if it opened.
    out = run(
        server,
        workspace,
        "for knob in /proc/sys/kernel/core_pattern /proc/sys/vm/drop_caches "
        "/proc/sys/kernel/panic /proc/sysrq-trigger; do "
        '(exec 3>>"$knob") 2>/dev/null && echo "OPENED $knob" || echo "refused $knob"; done',
    )
    assert "OPENED" not in out, out
    assert out.count("refused") == 4
    assert Path("/proc/sys/kernel/core_pattern").read_bytes() == before


def test_etc_holds_ca_certificates_but_no_private_keys(server: str, workspace: Path) -> None:
    out = run(
        server,
        workspace,
        "ls /etc/ssl/private >/dev/null 2>&1 && echo LISTED || echo unlisted; "
        "ls /usr/lib/ssl/private/ >/dev/null 2>&1 && echo LISTED || echo unlisted; "
        "test -s /etc/ssl/certs/ca-certificates.crt && echo certs",
    )
    assert out.split() == ["unlisted", "unlisted", "certs"]


# ------------------------------------------------------------------------ seccomp


def test_the_filter_is_built_from_libseccomp() -> None:
    program = seccomp_program()
    assert program and len(program) % 8 == 0
    assert {"keyctl", "add_key", "unshare", "mount", "ptrace", "reboot"} <= set(DENIED_SYSCALLS)


def test_keyrings_namespaces_and_kernel_calls_are_refused(server: str, workspace: Path) -> None:
    names = ("add_key", "keyctl", "request_key", "ptrace", "mount", "reboot", "init_module",
             "unshare", "setns", "bpf")  # fmt: skip
    out = run(server, workspace, syscall_probe(*names))
    results = {line.split()[0]: line.split()[2] for line in out.strip().splitlines()}
    assert results == dict.fromkeys(names, "EPERM"), out


def test_io_uring_is_refused(server: str, workspace: Path) -> None:
    """io_uring: the interface with the longest recent record of kernel escalation bugs."""
    names = ("io_uring_setup", "io_uring_enter", "io_uring_register")
    out = run(server, workspace, syscall_probe(*names))
    results = {line.split()[0]: line.split()[2] for line in out.strip().splitlines()}
    # Unfiltered, these fail on their arguments (EFAULT, EBADF), never with EPERM.
    assert results == dict.fromkeys(names, "EPERM"), out
    assert {"io_uring_setup", "io_uring_enter", "io_uring_register"} <= set(DENIED_SYSCALLS)


def test_no_new_namespace_can_be_made(server: str, workspace: Path) -> None:
    out = run(
        server,
        workspace,
        "for flags in -U -m -n -p -i -u '-r'; do unshare $flags true 2>/dev/null "
        '&& echo "MADE $flags" || echo refused; done',
    )
    assert "MADE" not in out and out.split().count("refused") == 7, out


def test_seccomp_is_in_force_in_the_code(server: str, workspace: Path) -> None:
    out = run(server, workspace, "grep -E '^Seccomp:' /proc/self/status")
    assert out.split() == ["Seccomp:", "2"]  # 2 = filter mode


# ------------------------------------------------------------------------ caps


def test_the_default_sandbox_has_caps(server: str, workspace: Path) -> None:
    default = Sandbox()
    assert default.memory_mb and default.max_processes and default.tmp_mb
    out = run(server, workspace, "ulimit -v; df -m /tmp | tail -1")
    virtual, *df = out.split()
    assert int(virtual) == default.memory_mb * 1024
    assert int(df[1]) <= default.tmp_mb  # the tmpfs size, in MiB


def test_tmp_stops_at_its_cap(server: str, workspace: Path) -> None:
    out = run(
        server,
        workspace,
        "df -m /tmp | tail -1; head -c 300M /dev/zero 2>&1 > /tmp/big; echo rc=$?; "
        "stat -c %s /tmp/big",
        Sandbox(tmp_mb=32),
    )
    size_mb = int(out.split("\n")[0].split()[1])
    assert size_mb <= 32, out  # the cap is in place before anything is written
    assert "rc=1" in out and "No space left" in out
    assert int(out.strip().split()[-1]) <= 32 * 2**20


def test_memory_stops_at_its_cap(server: str, workspace: Path) -> None:
    script = (
        "ulimit -v; "
        f"{SYSTEM_PYTHON} -c \"\ntry:\n    b = bytearray(1024**3)\n    print('allocated')\n"
        "except MemoryError:\n    print('capped')\""
    )
    out = run(server, workspace, script, Sandbox(memory_mb=256))
    limit, verdict = out.split()[:2]
    assert int(limit) == 256 * 1024  # in force before the hog runs
    assert verdict == "capped", out


def test_the_memory_cgroup_counts_tmp_too() -> None:
    """A root server caps the whole call, /tmp included, in a memory cgroup."""
    path = prepare_workspace(tempfile.mkdtemp(prefix="deputy-priv-", dir="/tmp"))
    try:
        confined = Sandbox(memory_mb=128, tmp_mb=64).confine(["true"], path)
        cgroup = confined.memory_cgroup
        try:
            assert cgroup is not None, "no memory cgroup could be made on this machine"
            limits = [p.read_text().strip() for p in cgroup.glob("memory.*")
                      if p.name in ("memory.max", "memory.limit_in_bytes")]  # fmt: skip
            assert limits == [str((128 + 64) * 2**20)]
        finally:
            confined.release()
        assert confined.memory_cgroup is None and not cgroup.exists()
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def test_files_the_tools_write_stay_the_codes_to_change() -> None:
    """A root server's write_file makes files the sandboxed code (not root) can change."""
    from deputy_shiny import tool_write_file

    path = prepare_workspace(tempfile.mkdtemp(prefix="deputy-priv-", dir="/tmp"))
    try:
        calls = [
            ScriptedToolCall("write_file", {"path": "notes/a.txt", "content": "one\n"}),
            ScriptedToolCall("run_bash", {"command": "echo two >> notes/a.txt && cat notes/a.txt"}),
        ]
        model = ScriptedModel([ScriptedReply(tool_calls=[c]) for c in calls] + ["done"])
        agent = Agent(
            model,
            tools=[tool_write_file(), tool_run_bash()],
            working_dir=path,
            permissions=Permissions(run_bash=True),
        )
        result = await agent.run_async("go")
        ends = [e for e in result.events if e.type == "tool_end"]
        assert [e.is_error for e in ends] == [False, False], [e.output for e in ends]
        assert ends[1].output.startswith("one\ntwo\n")
        for made in (path / "notes", path / "notes" / "a.txt"):
            assert made.stat().st_uid == path.stat().st_uid != 0
    finally:
        shutil.rmtree(path, ignore_errors=True)
