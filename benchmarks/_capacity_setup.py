"""capacity.py's set-up: the apps under test, the reply's shape, and their processes.

Each app runs with ``python -m shiny run`` on a free loopback port, its stderr in a log
file (shown when it does not start); :func:`settle` waits until no server is busy, so a
server still starting steals no CPU from the one being measured.
"""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MAX_P99_GAP = 0.150  # seconds
MAX_PACE = 1.5  # a reply may take this many times the generator's own duration
SERVE_TIMEOUT = 180.0  # seconds for all of one N's servers to start (they start together)


@dataclass(frozen=True)
class AppSpec:
    """One app under test: its label, its file in ``benchmarks/`` and its chat's input id."""

    label: str
    file: str
    chat_input: str

    @property
    def needs_wire(self) -> bool:
        return self.file != "_capacity_minimal.py"


_SHINYCHAT = "chat_user_input:shinychat.userInput"
MINIMAL = AppSpec("minimal", "_capacity_minimal.py", _SHINYCHAT)
BY_HAND = AppSpec("by-hand", "_capacity_by_hand.py", _SHINYCHAT)
CHATLAS = AppSpec("chatlas", "_capacity_chatlas.py", _SHINYCHAT)
KIT = AppSpec("kit", "_capacity_kit.py", "chat-" + _SHINYCHAT)
APPS = {"provider": (MINIMAL, BY_HAND, KIT), "wire": (MINIMAL, CHATLAS, BY_HAND, KIT)}


@dataclass(frozen=True)
class Config:
    """One invocation's reply shape (the apps read it from the environment)."""

    chunks: int
    interval: float
    max_gap: float = MAX_P99_GAP

    @property
    def chars(self) -> int:
        return 7 * self.chunks

    @property
    def duration(self) -> float:
        return self.chunks * self.interval


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def raise_fd_limit() -> None:
    """Lift the soft open-files limit to the hard one (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@dataclass
class Server:
    """A subprocess serving HTTP on a loopback port, with its stderr in a log file."""

    label: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        """Terminate (then kill) the process; safe to call twice."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def tail(self) -> str:
        """The last lines of the server's stderr (why it did not start)."""
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(lines[-15:])


def spawn(label: str, command: list[str], env: dict[str, str], tmp: Path) -> Server:
    """Start ``command`` in ``benchmarks/`` on a fresh port (``{port}`` in it is replaced)."""
    port = free_port()
    log = tmp / f"{label}-{port}.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [part.replace("{port}", str(port)) for part in command],
            cwd=HERE,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    return Server(label, port, process, log)


async def wait_serving(servers: Sequence[Server], within: float) -> None:
    """Wait until every server answers ``GET /``; raise naming the first that cannot."""

    def answers(port: int) -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).close()
            return True
        except OSError:
            return False

    deadline = time.monotonic() + within
    waiting = list(servers)
    while waiting:
        for server in list(waiting):
            if await asyncio.to_thread(answers, server.port):
                waiting.remove(server)
            elif server.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{server.label} did not start:\n{server.tail()}")
        if waiting:
            await asyncio.sleep(0.2)


def log(message: str) -> None:
    """Progress on stderr (the table and ratios go to stdout)."""
    print(message, file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) the process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def settle(servers: Sequence[Server], within: float = 60.0) -> None:
    """Wait until no live server is busy (the kit imports litellm in a thread after it
    serves; a server still starting would steal CPU from the one being measured)."""
    deadline = time.monotonic() + within
    live = [s for s in servers if s.process.poll() is None]
    while live and time.monotonic() < deadline:
        before = [cpu_seconds(s.process.pid) for s in live]
        await asyncio.sleep(0.3)
        used = [cpu_seconds(s.process.pid) - b for s, b in zip(live, before, strict=True)]
        if max(used) < 0.03:  # under 10 % of a core each
            return


def app_env(config: Config, tmp: Path, base_url: str) -> dict[str, str]:
    """The apps' environment: the reply shape, this checkout first on the path."""
    env = {k: v for k, v in os.environ.items() if k != "DEPUTY_MODEL"}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), str(HERE), env.get("PYTHONPATH", "")) if p
    )
    env["TMPDIR"] = str(tmp)  # the kit's per-session workspaces
    env["CAPACITY_CHUNKS"] = str(config.chunks)
    env["CAPACITY_INTERVAL"] = str(config.interval)
    env["CAPACITY_BASE_URL"] = base_url
    return env


def shiny_command(app: AppSpec) -> list[str]:
    """``shiny run`` the app on loopback (``{port}`` is filled in by :func:`spawn`)."""
    return [
        sys.executable,
        "-m",
        "shiny",
        "run",
        app.file,
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
    ]
