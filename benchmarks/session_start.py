"""What one session costs to start: init to its first ``values`` message, kit vs minimal.

Starts two apps with ``shiny run`` on loopback, in one invocation: the kit's modules
with a deterministic model (``_sessions_app.py``; litellm is imported as the app
starts, as in production) and a minimal shinychat app (``_minimal_chat_app.py``: one
``Chat`` per session, no agent). Against each, in interleaved rounds, it opens N
websocket sessions at once (Shiny's protocol, no browser), and for each session records
the time from sending ``init`` to receiving the first message that carries ``values``
(the server function has run and its outputs are flushed). Then the sessions close.

For each app and N it prints the p50 and max start time over all rounds; the last
lines are the kit/minimal ratios of the p50 (the issue's target: at most 2 with 20
sessions opened at once).

Usage: .venv/bin/python benchmarks/session_start.py [--sessions 10 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import websockets
from concurrent_sessions import free_port, wait_until_serving

HERE = Path(__file__).resolve().parent
APPS = {"kit": "_sessions_app.py", "minimal": "_minimal_chat_app.py"}


def start_app(app: str, port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [sys.executable, "-m", "shiny", "run", app, "--port", str(port)],
        cwd=HERE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return wait_until_serving(server, port, app)


async def measure(sessions_list: list[int], rounds: int) -> dict[tuple[str, int], list[float]]:
    ports = {name: free_port() for name in APPS}
    servers = {name: start_app(app, ports[name]) for name, app in APPS.items()}
    times: dict[tuple[str, int], list[float]] = {}
    try:
        for name in APPS:  # warm-up: first imports, litellm's import in the kit
            await round_simple(ports[name], 2)
        for _ in range(rounds):
            for n in sessions_list:
                for name in APPS:  # interleaved: machine noise hits both apps alike
                    times.setdefault((name, n), []).extend(await round_simple(ports[name], n))
    finally:
        for server in servers.values():
            server.terminate()
            server.wait(timeout=10)
    return times


async def round_simple(port: int, sessions: int) -> list[float]:
    """N sessions opened at once; each start time, once all of them have started."""
    go = asyncio.Event()
    started: list[float] = []
    all_started = asyncio.Event()

    async def one() -> None:
        async with websockets.connect(f"ws://127.0.0.1:{port}/websocket/", max_size=None) as ws:
            await go.wait()
            began = time.perf_counter()
            await ws.send(json.dumps({"method": "init", "data": {}}))
            while "values" not in json.loads(await asyncio.wait_for(ws.recv(), 120)):
                pass
            started.append(time.perf_counter() - began)
            if len(started) == sessions:
                all_started.set()
            await all_started.wait()

    tasks = [asyncio.create_task(one()) for _ in range(sessions)]
    await asyncio.sleep(0.5)  # every socket connected before any init is sent
    go.set()
    await asyncio.gather(*tasks)
    await asyncio.sleep(1.0)  # the sessions end on the server before the next round
    return started


def main(sessions_list: list[int], rounds: int) -> None:
    times = asyncio.run(measure(sessions_list, rounds))
    print(f"rounds: {rounds}; start = init -> first values message")
    for n in sessions_list:
        for name in APPS:
            values = times[(name, n)]
            print(
                f"{name:8} {n:3} at once: p50 {statistics.median(values):6.3f} s"
                f"   max {max(values):6.3f} s"
            )
    for n in sessions_list:
        ratio = statistics.median(times[("kit", n)]) / statistics.median(times[("minimal", n)])
        print(f"start p50 ratio kit/minimal, {n} at once: {ratio:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[10, 20])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    main(args.sessions, args.rounds)
