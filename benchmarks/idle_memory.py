"""What an idle session holds in memory: the reference app and the kit vs minimal shinychat.

Three apps run with ``shiny run`` on loopback, each in its own process:
* **app**: the reference ``app.py`` on the offline demo model (every panel, the research
  team, conversations saved under a temp dir);
* **kit**: ``agent_chat_server`` alone (``_sessions_app.py``: a deterministic model, two
  tools);
* **minimal**: shinychat's ``Chat`` fed by a plain generator (``_minimal_chat_app.py``).

For each app, a few warm-up sessions open first (first-session costs: imports, caches,
the first GC), then ``--sessions`` more websocket sessions (Shiny's protocol, no browser)
each send ``init``, wait for their first ``values`` message and stay open. The server's
resident memory (``VmRSS``) is read before and after, once its CPU has settled; the
growth divided by the number of sessions is what one idle session holds. The apps are
measured in turn, ``--rounds`` times, each round on fresh servers, and the medians are
printed.

The last lines are the kit/minimal and app/minimal ratios (target: at most 2).

Usage: .venv/bin/python benchmarks/idle_memory.py [--sessions 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import websockets
from concurrent_sessions import free_port, wait_until_serving

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
APPS = {
    "app": ROOT / "app.py",
    "kit": HERE / "_sessions_app.py",
    "minimal": HERE / "_minimal_chat_app.py",
}
WARM_SESSIONS = 5


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


async def settled(pid: int, within: float = 60.0) -> None:
    """Wait until the server is idle: under 2% of a core for half a second."""
    deadline = time.monotonic() + within
    last = cpu_ticks(pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        now = cpu_ticks(pid)
        if now - last <= 1:  # one clock tick (10 ms) in 0.5 s
            return
        last = now


def start(name: str, tmp: Path) -> tuple[subprocess.Popen[bytes], int]:
    """``shiny run`` one app on a free port; return it at once (see :func:`serving`)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DEPUTY_MODEL", "OPENAI_API_KEY")}
    env["DEPUTY_CONVERSATIONS_DIR"] = str(tmp / f"conversations-{port}")
    app = APPS[name]
    command = [sys.executable, "-m", "shiny", "run", app.name, "--port", str(port)]
    command += ["--host", "127.0.0.1"]
    server = subprocess.Popen(
        command,
        cwd=app.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return server, port


def stop(server: subprocess.Popen[bytes]) -> None:
    server.kill()  # nothing to save; a graceful stop would wait on every open socket
    server.wait(timeout=10)


async def open_session(port: int) -> websockets.ClientConnection:
    """One browser session, started (its first ``values`` message came) and left open."""
    url = f"ws://127.0.0.1:{port}/websocket/"
    ws = await websockets.connect(url, max_size=None, ping_interval=None)
    await ws.send(json.dumps({"method": "init", "data": {}}))
    async with asyncio.timeout(120):
        while True:
            raw = await ws.recv()
            text = raw.decode() if isinstance(raw, bytes) else raw
            if '"values"' in text and "values" in json.loads(text):
                return ws


async def per_session_kib(
    name: str, server: subprocess.Popen[bytes], port: int, sessions: int
) -> float:
    """KiB of resident memory one idle session adds to ``server`` (a fresh one)."""
    wait_until_serving(server, port, name)
    held: list[websockets.ClientConnection] = []
    try:
        for _ in range(WARM_SESSIONS):
            held.append(await open_session(port))
        await settled(server.pid)
        before = rss_kib(server.pid)
        for _ in range(sessions):
            held.append(await open_session(port))
        await settled(server.pid)
        return (rss_kib(server.pid) - before) / sessions
    finally:
        stop(server)
        for ws in held:  # the server is gone: drop the sockets, no closing handshake
            ws.transport.abort()


async def measure(
    sessions: int, rounds: int, names: tuple[str, ...] = tuple(APPS)
) -> dict[str, list[float]]:
    """``rounds`` rounds; in each, fresh servers for every app (started together, so
    their start-up overlaps), measured one at a time in a rotated order."""
    kib: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="idle-memory-") as tmp:
        for round_index in range(rounds):
            order = names[round_index % len(names) :] + names[: round_index % len(names)]
            servers = {name: start(name, Path(tmp)) for name in order}
            try:
                for name in order:  # rotated: machine drift hits every app alike
                    server, port = servers[name]
                    kib[name].append(await per_session_kib(name, server, port, sessions))
                    print(
                        f"round {round_index + 1}: {name:8} {kib[name][-1]:7.1f} KiB a session",
                        flush=True,
                    )
            finally:
                for server, _ in servers.values():
                    if server.poll() is None:
                        stop(server)
    return kib


def main(sessions: int = 40, rounds: int = 3) -> dict[str, float]:
    """Run the benchmark, print its figures; return the ratios against the minimal app."""
    load = os.getloadavg()
    print(
        f"idle memory: {sessions} sessions held, {WARM_SESSIONS} warm-up sessions first, "
        f"{rounds} rounds; load {load[0]:.2f}; {os.cpu_count()} cores",
        flush=True,
    )
    kib = asyncio.run(measure(sessions, rounds))
    medians = {name: statistics.median(values) for name, values in kib.items()}
    for name, value in medians.items():
        print(f"{name:8} median {value:7.1f} KiB an idle session")
    ratios = {name: medians[name] / medians["minimal"] for name in ("kit", "app")}
    print(f"ratio kit/minimal idle session memory: {ratios['kit']:.2f}")
    print(f"ratio app/minimal idle session memory: {ratios['app']:.2f}")
    return ratios


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    main(args.sessions, args.rounds)
