"""Model-run code in the sandbox, attacked as a prompt-injected model would.

Every case runs through the engine on the production path (a scripted model through
litellm asks for ``run_bash`` or ``run_python``) and asserts the *effect* seen from
the host: no secret in the output, no file on disk, no hit on a listener, no process
left behind. Positive controls (``network=True``, ``Sandbox(env=...)``) show that the
same checks do see a leak when the sandbox allows one.

Resource attacks (fork bomb, memory hog) run only after the test has checked that a
hard cap is in force: a pids cgroup (which holds for root) or an address-space limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import deputy_shiny.sandbox._cgroups as cgroups_module
import deputy_shiny.sandbox._sandbox as sandbox_module
from deputy_shiny import Agent, Permissions, Sandbox, sandbox_unavailable_reason
from deputy_shiny.events import AgentEvent
from deputy_shiny.sandbox import prepare_workspace
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import Tool, python_session, tool_run_bash, tool_run_python

SECRET = "sk-test-" + secrets.token_hex(12)
OTHER_SECRET = "other-session-" + secrets.token_hex(8)
PERMS = Permissions(run_bash=True, run_python=True)
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _sandbox_works() -> None:
    # The suite installs bubblewrap (scripts/test); a machine without it must fail here,
    # loudly, rather than pass on an unconfined fallback.
    assert sandbox_unavailable_reason() is None, sandbox_unavailable_reason()


@pytest.fixture
def server_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's environment holds an API key, as a deployed app's does."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("DEPUTY_DB_PASSWORD", SECRET)


@pytest.fixture
def sessions(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace root with two sessions: ours (``a``) and another user's (``b``)."""
    root = (tmp_path / "workspaces").resolve()
    mine, other = root / "session-a", root / "session-b"
    mine.mkdir(parents=True)
    other.mkdir()
    (other / "notes.txt").write_text(OTHER_SECRET)
    (mine / "data.txt").write_text("alpha\nbeta needle\ngamma\n")
    # As the kit does: a workspace belongs to the unprivileged user the code runs as.
    prepare_workspace(mine)
    prepare_workspace(other)
    return mine, other


class Listener:
    """TCP and UDP listeners on loopback that count every connection or datagram."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.tcp = socket.socket(family, socket.SOCK_STREAM)
        self.tcp.bind((host, 0))
        self.tcp.listen(16)
        self.tcp.settimeout(0.1)
        self.udp = socket.socket(family, socket.SOCK_DGRAM)
        self.udp.bind((host, 0))
        self.udp.settimeout(0.1)
        self.host, self.port = host, self.tcp.getsockname()[1]
        self.udp_port = self.udp.getsockname()[1]
        self.hits = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._accept, daemon=True),
            threading.Thread(target=self._receive, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = self.tcp.accept()
                self.hits += 1
                conn.close()

    def _receive(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.udp.recv(100)
                self.hits += 1

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self.tcp.close()
        self.udp.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


async def run_tool(
    workdir: Path,
    name: str,
    arguments: dict[str, Any],
    *,
    tool: Tool | None = None,
    sandbox: Sandbox | None = None,
    agent: Agent | None = None,
) -> AgentEvent:
    """One tool call through the engine; returns its ``tool_end`` event."""
    if agent is None:
        made = tool or (tool_run_bash(sandbox) if name == "run_bash" else tool_run_python(sandbox))
        agent = Agent(ScriptedModel([]), tools=[made], working_dir=workdir, permissions=PERMS)
        close = True
    else:
        close = False
    model = ScriptedModel([ScriptedReply(tool_calls=[ScriptedToolCall(name, arguments)]), "done"])
    agent.set_model(model)
    try:
        result = await agent.run_async("go")
    finally:
        if close:
            agent.close()
    assert result.stop_reason == "complete"
    return next(e for e in result.events if e.type == "tool_end")


async def bash(workdir: Path, command: str, **kwargs: Any) -> str:
    end = await run_tool(workdir, "run_bash", {"command": command}, **kwargs)
    return str(end.output)


async def python(workdir: Path, code: str, **kwargs: Any) -> str:
    end = await run_tool(workdir, "run_python", {"code": code}, **kwargs)
    return str(end.output)


def host_processes(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker`` (seen from outside the sandbox)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if marker in cmdline and "pytest" not in cmdline:
                found.append(int(entry.name))
    return found


async def none_left(marker: str, within: float = 5.0) -> bool:
    deadline = asyncio.get_running_loop().time() + within
    while host_processes(marker):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def children_of(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(entry.name))
    return kids


# ------------------------------------------------------------------ secrets in the environment

SECRET_READS = [
    ("run_bash", "env"),
    ("run_bash", "printenv OPENAI_API_KEY; echo; printenv DEPUTY_DB_PASSWORD"),
    ("run_bash", "cat /proc/*/environ | tr '\\0' '\\n'"),
    ("run_bash", "cat /proc/1/environ | tr '\\0' '\\n'"),
    ("run_bash", "cat /proc/$PPID/environ /proc/self/environ | tr '\\0' '\\n'"),
    ("run_bash", "grep -rs sk-test- /proc/*/environ /etc /tmp 2>/dev/null; echo searched"),
    ("run_python", "import os\ndict(os.environ)"),
    ("run_python", "open('/proc/1/environ', 'rb').read()"),
    (
        "run_python",
        "import os\n"
        "[open(f'/proc/{p}/environ','rb').read() for p in os.listdir('/proc') if p.isdigit()]",
    ),
]


@pytest.mark.parametrize(("name", "code"), SECRET_READS)
async def test_code_never_sees_the_servers_secrets(
    server_env: None, sessions: tuple[Path, Path], name: str, code: str
) -> None:
    mine, _ = sessions
    key = "command" if name == "run_bash" else "code"
    end = await run_tool(mine, name, {key: code})
    assert SECRET not in str(end.output)
    assert "OPENAI_API_KEY" not in str(end.output)


async def test_the_servers_own_environ_is_out_of_reach(
    server_env: None, sessions: tuple[Path, Path]
) -> None:
    mine, _ = sessions
    out = await bash(mine, f"cat /proc/{os.getpid()}/environ; echo rc=$?")
    assert SECRET not in out and "rc=1" in out


async def test_unconfined_code_still_gets_a_scrubbed_environment(
    server_env: None, sessions: tuple[Path, Path]
) -> None:
    mine, _ = sessions
    out = await bash(mine, "env", sandbox=Sandbox(kind="none"))
    assert SECRET not in out and "OPENAI_API_KEY" not in out
    assert f"HOME={mine}" in out
    out = await python(mine, "import os\nsorted(os.environ)", sandbox=Sandbox(kind="none"))
    assert "OPENAI_API_KEY" not in out and "'PATH'" in out


async def test_the_app_can_pass_a_variable_on_purpose(sessions: tuple[Path, Path]) -> None:
    mine, _ = sessions
    out = await bash(mine, "printenv SERVICE_TOKEN", sandbox=Sandbox(env={"SERVICE_TOKEN": "t0k"}))
    assert out.startswith("t0k\n")


async def test_etc_secrets_and_the_app_directory_are_not_there(
    sessions: tuple[Path, Path],
) -> None:
    mine, _ = sessions
    out = await bash(mine, f"ls /etc/shadow {REPO}/pyproject.toml /root /home 2>&1; echo end")
    assert "No such file" in out
    assert "[project]" not in await bash(mine, f"cat {REPO}/pyproject.toml")


# ------------------------------------------------------------------ other sessions' files


@pytest.mark.parametrize(
    "command",
    [
        "cat ../session-b/notes.txt",
        "cat {other}/notes.txt",
        "find / -path /usr -prune -o -name notes.txt -print -exec cat {{}} \\; 2>&1; echo searched",
        "ln -s {other} peek && cat peek/notes.txt",
        "cd .. && cat session-b/notes.txt",
        "grep -rs other-session {root} /tmp /home /etc; echo searched",
    ],
)
async def test_another_sessions_files_cannot_be_read(
    sessions: tuple[Path, Path], command: str
) -> None:
    mine, other = sessions
    out = await bash(mine, command.format(other=other, root=mine.parent))
    assert OTHER_SECRET not in out


async def test_the_workspace_root_shows_only_this_session(sessions: tuple[Path, Path]) -> None:
    mine, _ = sessions
    assert await bash(mine, f"ls {mine.parent}") == "session-a\n[exit code 0]"


async def test_a_planted_symlink_to_another_session_leads_nowhere(
    sessions: tuple[Path, Path],
) -> None:
    mine, other = sessions
    (mine / "shortcut").symlink_to(other)
    out = await bash(mine, "cat shortcut/notes.txt; ls shortcut/")
    assert OTHER_SECRET not in out and "No such file" in out
    out = await python(mine, "open('shortcut/notes.txt').read()")
    assert OTHER_SECRET not in out and "FileNotFoundError" in out


async def test_run_python_cannot_read_another_session(sessions: tuple[Path, Path]) -> None:
    mine, other = sessions
    out = await python(mine, f"open({str(other / 'notes.txt')!r}).read()")
    assert OTHER_SECRET not in out and "FileNotFoundError" in out


# ------------------------------------------------------------------ writing outside the workspace


@pytest.mark.parametrize(
    "target",
    [
        "/tmp/escape-{token}",
        "../escape-{token}",
        "{root}/escape-{token}",
        "{other}/escape-{token}",
        "/root/escape-{token}",
        "/usr/escape-{token}",
        "/etc/escape-{token}",
        "{venv}/escape-{token}",
    ],
)
async def test_writes_outside_the_workspace_leave_no_file(
    sessions: tuple[Path, Path], target: str
) -> None:
    mine, other = sessions
    token = secrets.token_hex(4)
    path = target.format(token=token, root=mine.parent, other=other, venv=sys.prefix)
    await bash(mine, f"echo pwned > {path}; mkdir -p {path}.d")
    host_path = (mine / path).resolve() if not path.startswith("/") else Path(path)
    assert not host_path.exists()
    assert not Path(f"{host_path}.d").exists()


async def test_python_writes_outside_the_workspace_leave_no_file(
    sessions: tuple[Path, Path],
) -> None:
    mine, other = sessions
    token = secrets.token_hex(4)
    targets = [f"/tmp/py-{token}", str(other / f"py-{token}"), str(mine.parent / f"py-{token}")]
    code = (
        f"for p in {targets!r}:\n    try:\n        open(p, 'w').write('x')\n"
        "    except OSError as e:\n        print(type(e).__name__)"
    )
    out = await python(mine, code)
    assert "FileNotFoundError" in out  # the other session's directory does not exist
    for target in targets:  # and /tmp, with the workspace root in it, is the call's own
        assert not Path(target).exists()


# ------------------------------------------------------------------ network


@pytest.mark.parametrize(
    "command",
    [
        "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected",
        "echo x > /dev/udp/127.0.0.1/{udp}; echo sent",
        "python -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\"",
        "python -c \"import socket; socket.create_connection(('localhost', {port}), 2)\"",
    ],
)
async def test_no_network_reaches_the_host(
    sessions: tuple[Path, Path], listener: Listener, command: str
) -> None:
    mine, _ = sessions
    await bash(mine, command.format(port=listener.port, udp=listener.udp_port))
    await asyncio.sleep(0.2)
    assert listener.hits == 0


async def test_run_python_reaches_no_network(
    sessions: tuple[Path, Path], listener: Listener
) -> None:
    mine, _ = sessions
    code = (
        "import socket\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {listener.port}), 2)\n"
        "except OSError as e:\n    print('refused', type(e).__name__)"
    )
    out = await python(mine, code)
    assert "refused" in out and listener.hits == 0


async def test_ipv6_loopback_is_out_of_reach(sessions: tuple[Path, Path]) -> None:
    if not _ipv6_loopback():  # no ::1 on this host: nothing to reach there either
        assert not _ipv6_loopback()
        return
    server = Listener("::1")
    try:
        mine, _ = sessions
        await bash(
            mine, f"exec 3<>/dev/tcp/::1/{server.port}; echo x > /dev/udp/::1/{server.udp_port}"
        )
        await asyncio.sleep(0.2)
        assert server.hits == 0
    finally:
        server.close()


async def test_dns_does_not_resolve(sessions: tuple[Path, Path]) -> None:
    mine, _ = sessions
    out = await python(
        mine,
        "import socket\ntry:\n    socket.getaddrinfo('pypi.org', 443)\n    print('resolved')\n"
        "except OSError as e:\n    print('no dns', type(e).__name__)",
    )
    assert "no dns" in out and "resolved" not in out


async def test_network_true_is_the_apps_choice_and_the_check_sees_it(
    sessions: tuple[Path, Path], listener: Listener
) -> None:
    mine, _ = sessions
    await bash(mine, f"exec 3<>/dev/tcp/127.0.0.1/{listener.port}", sandbox=Sandbox(network=True))
    await asyncio.sleep(0.2)
    assert listener.hits == 1  # the listener does count: the zeros above are real


# ------------------------------------------------------------------ other processes


async def test_the_server_process_is_invisible(sessions: tuple[Path, Path]) -> None:
    mine, _ = sessions
    out = await bash(mine, "ps -eo pid=")
    pids = [int(p) for p in out.split("\n")[:-1]]
    assert pids and max(pids) < 100 and os.getpid() not in pids  # its own pid namespace


async def test_killing_the_server_pid_fails(sessions: tuple[Path, Path]) -> None:
    mine, _ = sessions
    out = await bash(mine, f"kill -9 {os.getpid()}; echo rc=$?")
    assert "No such process" in out and "rc=1" in out
    out = await python(
        mine,
        f"import os\ntry:\n    os.kill({os.getpid()}, 9)\n"
        "except OSError as e:\n    print(type(e).__name__)",
    )
    assert "ProcessLookupError" in out


async def test_kill_everything_only_reaches_the_sandbox(sessions: tuple[Path, Path]) -> None:
    mine, _ = sessions
    bystander = await asyncio.create_subprocess_exec("sleep", "30")
    try:
        # `kill -9 -1` is run only where $$ shows a private pid namespace (tiny pids).
        out = await bash(mine, 'if [ "$$" -lt 10 ]; then kill -9 -1; fi; echo survived $$')
        assert "survived" in out  # the guard held: $$ was a namespaced pid
        os.kill(bystander.pid, 0)  # raises if the bystander on the host was killed
        os.kill(os.getpid(), 0)
        assert bystander.returncode is None
    finally:
        bystander.kill()
        await bystander.wait()


# ------------------------------------------------------------------ nothing outlives the call


@pytest.mark.parametrize(
    "command",
    [
        "sleep {n} & echo started",
        "setsid sleep {n} > /dev/null 2>&1 & echo started",
        "(sleep {n} &) ; echo started",
        "nohup sleep {n} > /dev/null 2>&1 & disown; echo started",
    ],
)
async def test_background_processes_end_with_the_call(
    sessions: tuple[Path, Path], command: str
) -> None:
    mine, _ = sessions
    n = str(3000 + secrets.randbelow(900)) + ".5"
    out = await bash(mine, command.format(n=n))
    assert "started" in out
    assert await none_left(f"sleep {n}")


async def test_a_timed_out_command_leaves_nothing(sessions: tuple[Path, Path]) -> None:
    mine, _ = sessions
    n = str(4000 + secrets.randbelow(900)) + ".5"
    end = await run_tool(mine, "run_bash", {"command": f"sleep {n} & sleep {n}", "timeout": 0.5})
    assert end.is_error and "timed out" in str(end.output)
    assert await none_left(f"sleep {n}")


async def test_closing_the_agent_leaves_no_orphan(sessions: tuple[Path, Path]) -> None:
    mine, _ = sessions
    n = str(5000 + secrets.randbelow(900)) + ".5"
    py = tool_run_python()
    agent = Agent(ScriptedModel([]), tools=[py], working_dir=mine, permissions=PERMS)
    before = set(children_of(os.getpid()))
    await python(
        mine,
        f"import subprocess\nsubprocess.Popen(['sleep', '{n}'], start_new_session=True)",
        agent=agent,
    )
    assert host_processes(f"sleep {n}") and set(children_of(os.getpid())) - before
    await agent.aclose()
    assert await none_left(f"sleep {n}")
    assert set(children_of(os.getpid())) <= before


# ------------------------------------------------------------------ resource caps


def test_pids_cap_is_in_force_before_any_bomb(sessions: tuple[Path, Path]) -> None:
    """The hard cap the fork bomb relies on: a pids cgroup that holds for root."""
    mine, _ = sessions
    confined = Sandbox(max_processes=20).confine(["true"], mine)
    try:
        assert confined.cgroup is not None
        assert (confined.cgroup / "pids.max").read_text().strip() == "20"
        assert f"{confined.cgroup}/cgroup.procs" in confined.argv[2]
    finally:
        confined.release()
    assert not confined.cgroup


async def test_process_cap_limits_a_burst(sessions: tuple[Path, Path]) -> None:
    mine, _ = sessions
    code = (
        "import os, subprocess\nstarted = []\nfor _ in range(60):\n    try:\n"
        "        started.append(subprocess.Popen(['sleep', '30']))\n"
        "    except OSError:\n        break\n"
        "print(len(started), len([p for p in os.listdir('/proc') if p.isdigit()]))"
    )
    out = await python(mine, code, sandbox=Sandbox(max_processes=20))
    started, running = (int(n) for n in out.split("\n")[1].split())
    assert 0 < started < 20 and running <= 20


async def test_fork_bomb_is_bounded_and_the_server_survives(
    sessions: tuple[Path, Path],
) -> None:
    mine, _ = sessions
    cap = Sandbox(max_processes=32)
    test_pids_cap_is_in_force_before_any_bomb(sessions)  # refuse to bomb without the cap
    probe = cap.confine(["true"], mine)
    assert probe.cgroup is not None
    probe.release()
    bomb = 'if [ "$$" -lt 10 ]; then b() { b | b & }; b; fi; sleep 1; echo after'
    end = await run_tool(mine, "run_bash", {"command": bomb, "timeout": 4}, sandbox=cap)
    assert end.tool_name == "run_bash"
    # Still here, still responsive, and nothing of the bomb is left.
    assert await bash(mine, "echo alive") == "alive\n[exit code 0]"
    parent = cgroups_module._pids_parent()
    assert parent is not None
    ours = f"call-{os.getpid()}-"  # this process's call cgroups (others may run in parallel)
    assert not [p for p in parent.iterdir() if p.is_dir() and p.name.startswith(ours)]


async def test_memory_cap_stops_a_memory_hog(sessions: tuple[Path, Path]) -> None:
    mine, _ = sessions
    out = await python(
        mine,
        "try:\n    b = bytearray(2 * 1024**3)\n    print('allocated')\n"
        "except MemoryError:\n    print('capped')",
        sandbox=Sandbox(memory_mb=512),
    )
    assert "capped" in out and "allocated" not in out


# ------------------------------------------------------------------ one interpreter per agent


async def test_agents_sharing_a_tool_do_not_share_an_interpreter(
    sessions: tuple[Path, Path],
) -> None:
    mine, other = sessions
    shared = tool_run_python()
    a = Agent(ScriptedModel([]), tools=[shared], working_dir=mine, permissions=PERMS)
    b = Agent(ScriptedModel([]), tools=[shared], working_dir=other, permissions=PERMS)
    try:
        await python(mine, "stolen = 'a-private-value'\nimport os\nos.getcwd()", agent=a)
        out = await python(other, "stolen", agent=b)
        assert "NameError" in out and "a-private-value" not in out
        out = await python(other, "import os\n(os.getcwd(), 'stolen' in globals())", agent=b)
        assert out == f"[result]\n({str(other)!r}, False)"
        assert "a-private-value" in await python(mine, "stolen", agent=a)
        pa, pb = python_session(shared, a.tool_state), python_session(shared, b.tool_state)
        assert pa is not pb and pa.pid and pb.pid and pa.pid != pb.pid
    finally:
        a.close()
        b.close()
    assert python_session(shared, a.tool_state).pid is None


# ------------------------------------------------------------------ the workspace stays usable


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ls", "data.txt"),
        ("grep -n needle data.txt", "2:beta needle"),
        ("python -c 'print(6 * 7)'", "42"),
        ("pip list 2>/dev/null | grep -i '^pydantic '", "pydantic"),
        ("echo made > new.txt && cat new.txt", "made"),
        ("echo scratch > /tmp/s && cat /tmp/s", "scratch"),
    ],
)
async def test_the_workspace_stays_usable(
    sessions: tuple[Path, Path], command: str, expected: str
) -> None:
    mine, _ = sessions
    assert expected in await bash(mine, command)


async def test_files_written_in_the_sandbox_land_in_the_workspace(
    sessions: tuple[Path, Path],
) -> None:
    mine, _ = sessions
    await python(mine, "open('result.csv', 'w').write('a,b\\n1,2\\n')")
    assert (mine / "result.csv").read_text() == "a,b\n1,2\n"


# ------------------------------------------------------------------ no silent fallback


async def test_missing_bubblewrap_is_an_error_result_naming_the_fix(
    sessions: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, _ = sessions
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: None)
    sandbox_module._probe_bwrap.cache_clear()
    try:
        end = await run_tool(mine, "run_bash", {"command": "echo ran > ran.txt"})
        assert end.is_error
        assert "apt-get install bubblewrap" in str(end.output)
        assert 'Sandbox(kind="none")' in str(end.output)
        assert not (mine / "ran.txt").exists()
        end = await run_tool(mine, "run_python", {"code": "open('ran.txt', 'w')"})
        assert end.is_error and "bubblewrap" in str(end.output)
        assert not (mine / "ran.txt").exists()
    finally:
        sandbox_module._probe_bwrap.cache_clear()


def test_sandbox_configuration_is_validated() -> None:
    with pytest.raises(ValueError, match="absolute"):
        Sandbox(read_paths=("relative/dir",))
    with pytest.raises(ValueError, match="not allowed"):
        Sandbox(env={"PATH": "/evil"})
    with pytest.raises(ValueError, match="greater than or equal"):
        Sandbox(memory_mb=1)
    with pytest.raises(ValueError):
        Sandbox(kind="docker")  # type: ignore[arg-type]


async def test_read_paths_are_readable_but_not_writable(
    sessions: tuple[Path, Path], tmp_path: Path
) -> None:
    mine, _ = sessions
    shared = tmp_path / "reference"
    shared.mkdir()
    (shared / "table.csv").write_text("x,y\n")
    out = await bash(
        mine,
        f"cat {shared}/table.csv; echo no > {shared}/table.csv",
        sandbox=Sandbox(read_paths=(str(shared),)),
    )
    assert "x,y" in out and "Read-only file system" in out
    assert (shared / "table.csv").read_text() == "x,y\n"


async def test_a_python_runtime_under_tmp_stays_visible(
    sessions: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A checkout (and its .venv) under /tmp: the private /tmp must not hide the runtime.
    runtime = tmp_path / "venv"
    runtime.mkdir()
    (runtime / "marker").write_text("runtime-here")
    real = sandbox_module._python_roots()
    monkeypatch.setattr(sandbox_module, "_python_roots", lambda: (*real, str(runtime)))
    mine, _ = sessions
    out = await bash(mine, f"cat {runtime}/marker; echo x > {runtime}/w")
    assert "runtime-here" in out and "Read-only file system" in out
    assert not (runtime / "w").exists()
