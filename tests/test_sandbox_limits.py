"""One session's processes never use another session's allowance, wherever the server runs.

Where no ``pids`` cgroup can be made, the process cap is ``RLIMIT_NPROC``, which counts
every process of a uid. These tests play both servers without one: a root server in a
container whose cgroups are read-only (simulated: no cgroup parent), and a server that
is not root (for real: a forked child that becomes a normal user, for which the
root-owned cgroup directories are not writable). Session A fills its cap with sleepers;
session B must still run.

The sleepers only start behind a cap that is checked first (``ulimit -u`` inside the
sandbox equals the small cap), the spawner stops after twice the cap whatever happens,
and session A's whole process group is killed in a ``finally``.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import deputy_shiny.sandbox._cgroups as cgroups_module
import deputy_shiny.sandbox._sandbox as sandbox_module
from deputy_shiny import Agent, Permissions, Sandbox, sandbox_unavailable_reason
from deputy_shiny.errors import SandboxUnavailableError
from deputy_shiny.sandbox import SANDBOX_USER, prepare_workspace
from deputy_shiny.sandbox._uids import UIDS_ENV, claim_problem, workspace_uids
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_run_bash
from tests.helpers import run_confined

NORMAL_UID = 4243  # a normal user with no passwd entry, the server of the "normal" case
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, inside /usr: visible to every sandbox
CAP = 8

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to play both servers")

# Starts sleepers until the cap refuses one (at most 2 * CAP tries), says how many, waits.
SPAWNER = (
    f'{SYSTEM_PYTHON} -c "import subprocess\nstarted = []\nfor _ in range({2 * CAP}):\n'
    "    try:\n        started.append(subprocess.Popen(['sleep', '60']))\n"
    "    except OSError as exc:\n        print('refused', exc.errno, flush=True)\n        break\n"
    "print('started', len(started), flush=True)\n[p.wait() for p in started]\""
)


@pytest.fixture(autouse=True)
def _sandbox_works() -> None:
    assert sandbox_unavailable_reason() is None, sandbox_unavailable_reason()


@pytest.fixture
def no_cgroups(monkeypatch: pytest.MonkeyPatch) -> None:
    """A root server whose cgroup hierarchies are read-only: no cgroup can be made."""
    monkeypatch.setattr(cgroups_module, "_cgroup_parent", lambda controller: None)


@pytest.fixture
def workspaces() -> Iterator[Callable[[], Path]]:
    """Make fresh workspace directories under /tmp (traversable by any user); removed after."""
    made: list[Path] = []

    def make() -> Path:
        made.append(Path(tempfile.mkdtemp(prefix="deputy-limits-", dir="/tmp")))
        return made[-1]

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def as_normal_user(work: Callable[[], str], timeout: float = 120) -> str:
    """Run ``work`` in a forked child that has become NORMAL_UID (no capabilities left).

    The child is the server that is not root: it probes the cgroups itself, as that user.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NORMAL_UID)
            os.setuid(NORMAL_UID)
            cgroups_module._cgroup_parent.cache_clear()
            # Our Python runtime may live under /root, which this user cannot read.
            sandbox_module._python_roots = lambda: ()  # type: ignore[assignment]
            os.write(write, work().encode())
            status = 0
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                os.write(write, f"child failed: {type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(status)
    os.close(write)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([read], [], [], 0.5)
            if ready:
                chunk = os.read(read, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    return b"".join(chunks).decode(errors="replace")


def run(sandbox: Sandbox, workspace: Path, script: str) -> str:
    """Run ``script`` (bash) in the sandbox as run_bash would; its output."""
    return run_confined(sandbox.confine(["bash", "-c", script], workspace))


def session_b_beside_a_full_session_a(ws_a: Path, ws_b: Path) -> str:
    """Session A fills its cap with sleepers; then session B runs. Both outputs."""
    sandbox = Sandbox(max_processes=CAP)
    # The hard cap is in force, in this very setup, before anything is started.
    cap = run(sandbox, ws_a, "ulimit -u").split()
    if cap != [str(CAP)]:
        return f"no cap in force: {cap}"
    a = sandbox.confine(["bash", "-c", SPAWNER], ws_a)
    proc = None
    try:
        proc = subprocess.Popen(
            a.argv,
            cwd=a.cwd,
            env=a.env,
            pass_fds=a.pass_fds,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        a.started()
        assert proc.stdout is not None
        line = b""
        deadline = time.monotonic() + 60
        while b"started" not in line and time.monotonic() < deadline:
            if select.select([proc.stdout], [], [], 0.5)[0]:
                line += os.read(proc.stdout.fileno(), 4096)
        # A is full and its sleepers run: B now forks a few processes of its own.
        out_b = run(sandbox, ws_b, "for i in 1 2 3; do /bin/true; done; echo B ran; ls | wc -l")
        return f"A: {line.decode().strip()}\nB: {out_b.strip()}"
    finally:
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        a.release()


# ------------------------------------------------------------------ two sessions, no cgroup


def test_root_sessions_without_a_pids_cgroup_do_not_starve_each_other(
    no_cgroups: None, workspaces: Callable[[], Path]
) -> None:
    ws_a, ws_b = prepare_workspace(workspaces()), prepare_workspace(workspaces())
    out = session_b_beside_a_full_session_a(ws_a, ws_b)
    assert "A: refused 11\nstarted" in out, out  # EAGAIN: A is at its cap
    assert out.endswith("B: B ran\n0"), out
    assert ws_a.stat().st_uid != ws_b.stat().st_uid  # each session counts its own


def test_unprivileged_sessions_without_a_pids_cgroup_do_not_starve_each_other(
    workspaces: Callable[[], Path],
) -> None:
    ws_a, ws_b = workspaces(), workspaces()
    for path in (ws_a, ws_b):
        os.chown(path, NORMAL_UID, NORMAL_UID)  # both sessions run as the server's user

    def server() -> str:
        parent = cgroups_module._cgroup_parent("pids")
        return f"parent: {parent}\n" + session_b_beside_a_full_session_a(ws_a, ws_b)

    out = as_normal_user(server)
    assert out.startswith("parent: None\n"), out  # no pids cgroup for this server
    assert "A: refused 11\nstarted" in out, out
    assert out.endswith("B: B ran\n0"), out


# ------------------------------------------------------------------ a shared cap is refused


def test_a_shared_uid_without_a_pids_cgroup_is_refused_naming_the_fix(
    no_cgroups: None, workspaces: Callable[[], Path]
) -> None:
    shared = workspaces()
    os.chown(shared, *SANDBOX_USER)  # as every workspace was before: nobody's
    for sandbox, why in [
        (Sandbox(), "not one of the per-workspace uids (DEPUTY_SANDBOX_UIDS); RLIMIT_NPROC "
         "counts every process of a uid, so sessions would share one count. To fix it, "
         "give the workspace a uid of its own (deputy_shiny.sandbox.prepare_workspace("),
        (Sandbox(run_as=(4244, 4244)), "runs every session as uid 4244"),
        (Sandbox(kind="none"), "server's own user"),
    ]:  # fmt: skip
        with pytest.raises(SandboxUnavailableError) as caught:
            sandbox.confine(["true"], shared)
        message = str(caught.value)
        assert why in message and "max_processes=None" in message, message
        assert "no pids cgroup can be made here" in message
    # Lifting the cap on purpose runs; so does a workspace given a uid of its own.
    assert run(Sandbox(max_processes=None), shared, "echo ran") == "ran\n"
    prepare_workspace(shared)
    assert run(Sandbox(), shared, "ulimit -u") == "256\n"


async def test_run_bash_says_so_instead_of_sharing_the_cap(
    no_cgroups: None, workspaces: Callable[[], Path]
) -> None:
    shared = workspaces()
    os.chown(shared, *SANDBOX_USER)
    call = ScriptedToolCall("run_bash", {"command": "echo ran > ran.txt"})
    agent = Agent(
        ScriptedModel([ScriptedReply(tool_calls=[call]), "ok"]),
        tools=[tool_run_bash()],
        working_dir=shared,
        permissions=Permissions(run_bash=True),
    )
    result = await agent.run_async("go")
    (end,) = [e for e in result.events if e.type == "tool_end"]
    assert end.is_error and "prepare_workspace" in end.output, end.output
    assert not (shared / "ran.txt").exists()


# ------------------------------------------------------------------ one uid per workspace


def test_each_workspace_gets_a_stable_uid_of_its_own(workspaces: Callable[[], Path]) -> None:
    first, second = prepare_workspace(workspaces()), prepare_workspace(workspaces())
    uid = first.stat().st_uid
    assert uid in workspace_uids() and second.stat().st_uid in workspace_uids()
    assert uid != second.stat().st_uid and first.stat().st_gid == uid
    assert prepare_workspace(first).stat().st_uid == uid  # stable
    assert claim_problem(uid, first) is None
    (first / "project").mkdir()  # an agent working in a subfolder: the same workspace
    os.chown(first / "project", uid, uid)
    assert claim_problem(uid, first / "project") is None
    # A workspace that took another's uid (copied with its owner) is not given the cap...
    os.chown(second, uid, uid)
    assert "another workspace holds" in str(claim_problem(uid, second))
    # ...until it is prepared again, which moves it to a free uid.
    assert prepare_workspace(second).stat().st_uid not in (uid, 0)
    # A workspace that is gone frees its uid.
    shutil.rmtree(first)
    first.mkdir()
    os.chown(first, uid, uid)
    assert claim_problem(uid, first) is None


def test_the_uid_range_is_configurable_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert workspace_uids({UIDS_ENV: "70000-70009"}) == range(70000, 70010)
    for bad in ("70000", "9-20", "70010-70000", "65000-66000", "a-b"):
        with pytest.raises(ValueError, match="FIRST-LAST"):
            workspace_uids({UIDS_ENV: bad})
    monkeypatch.setenv(UIDS_ENV, "70000-70009")
    assert "not one of the per-workspace uids" in str(claim_problem(60000, Path("/")))


# ------------------------------------------------------------------ stale cgroup directories


def test_an_unwritable_cgroup_hierarchy_is_treated_as_absent(
    workspaces: Callable[[], Path],
) -> None:
    # A root server's call leaves the root-owned deputy_shiny cgroup directory behind.
    root_ws = prepare_workspace(workspaces())
    Sandbox().confine(["true"], root_ws).release()
    parent = cgroups_module._cgroup_parent("pids")
    assert parent is not None and parent.stat().st_uid == 0
    ws = workspaces()
    os.chown(ws, NORMAL_UID, NORMAL_UID)

    def server() -> str:
        parent = cgroups_module._cgroup_parent("pids")
        return f"{parent} {run(Sandbox(max_processes=CAP), ws, 'ulimit -u; echo ran')}"

    # Falls back (to the call's own count, not the user's), where it used to fail.
    assert as_normal_user(server).split() == ["None", str(CAP), "ran"]


def test_the_cgroup_directories_a_process_made_are_removed_when_it_is_done(
    monkeypatch: pytest.MonkeyPatch, workspaces: Callable[[], Path]
) -> None:
    """What a test session (or any process done with the sandbox) made, it removes."""
    pids = cgroups_module._hierarchies("pids")
    assert pids, "no pids hierarchy on this machine"
    base = pids[0] / f"deputy-test-{os.getpid()}"  # a hierarchy of its own, for this test
    base.mkdir()
    try:
        if (base / "cgroup.subtree_control").exists():  # cgroup v2: hand the controller down
            (base / "cgroup.subtree_control").write_text("+pids")
        monkeypatch.setattr(cgroups_module, "_hierarchies", lambda controller: [base])
        monkeypatch.setattr(cgroups_module, "_MADE_PARENTS", [])
        cgroups_module._cgroup_parent.cache_clear()
        confined = Sandbox(max_processes=CAP).confine(["true"], prepare_workspace(workspaces()))
        assert confined.cgroup is not None and confined.cgroup.parent == base / "deputy_shiny"
        confined.release()
        assert [p.name for p in base.iterdir() if p.is_dir()] == ["deputy_shiny"]
        cgroups_module._remove_made_parents()
        assert not [p for p in base.iterdir() if p.is_dir()]
    finally:
        cgroups_module._cgroup_parent.cache_clear()
        for leftover in (base / "deputy_shiny", base):
            with contextlib.suppress(OSError):
                leftover.rmdir()


def test_the_kits_conversations_each_get_a_uid_of_their_own(tmp_path: Path) -> None:
    from deputy_shiny.shiny import KitPersistence
    from deputy_shiny.shiny._conversations import open_folder

    persistence = KitPersistence(tmp_path / "root")
    alice = open_folder(persistence, "user", "alice", "chat").workspace
    bob = open_folder(persistence, "user", "bob", "chat").workspace
    uid = alice.stat().st_uid
    assert uid in workspace_uids() and bob.stat().st_uid in workspace_uids()
    assert uid != bob.stat().st_uid
    assert open_folder(persistence, "user", "alice", "chat").workspace.stat().st_uid == uid
    # A workspace from before (every session's was nobody's) gets its own on the next visit.
    (alice / "notes.txt").write_text("kept")
    for path in (alice, alice / "notes.txt"):
        os.chown(path, *SANDBOX_USER)
    open_folder(persistence, "user", "alice", "chat")
    owner = alice.stat().st_uid
    assert owner in workspace_uids() and owner != bob.stat().st_uid
    assert (alice / "notes.txt").stat().st_uid == owner
