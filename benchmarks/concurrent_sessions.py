"""Many users, one process: do an approval wait and a blocking tool stall other sessions?

Starts ``_sessions_app.py`` (the kit's modules with a deterministic model that streams
200 chunks 20 ms apart) with ``shiny run`` on loopback, then drives it with websocket
clients speaking Shiny's protocol (no browser), in one invocation:

* baseline: 20 sessions stream at once;
* loaded: the same 20 sessions stream while one more session waits on an approval
  (its modal is never answered) and another runs a sync tool that blocks its worker
  thread for 2 seconds.

For each streaming session it records when every chunk arrives and reports the p50 and
p99 gap between consecutive chunks. The last line printed is the loaded/baseline p99
ratio; the target is at most 1.2 (an approval wait or a blocking tool must not stall
anyone else: Shiny has one reactive lock for the whole process).

Usage: .venv/bin/python benchmarks/concurrent_sessions.py [--sessions N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import websockets

HERE = Path(__file__).resolve().parent
INPUT = "chat-chat_user_input:shinychat.userInput"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_app(port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [sys.executable, "-m", "shiny", "run", "_sessions_app.py", "--port", str(port)],
        cwd=HERE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return wait_until_serving(server, port, "the benchmark app")


def wait_until_serving(
    server: subprocess.Popen[bytes], port: int, what: str
) -> subprocess.Popen[bytes]:
    """Wait (up to 60 s) until ``server`` answers on ``port``; exit if it dies first."""
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).close()
            return server
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise SystemExit(f"{what} did not start") from None
            time.sleep(0.2)


async def session(port: int, text: str, gaps: list[float] | None, ready: asyncio.Event) -> None:
    """One browser session: send ``text``; record chunk gaps into ``gaps`` if given."""
    async with websockets.connect(f"ws://127.0.0.1:{port}/websocket/", max_size=None) as ws:
        await ws.send(json.dumps({"method": "init", "data": {}}))
        await ready.wait()
        await ws.send(
            json.dumps({"method": "update", "data": {INPUT: {"text": text, "attachments": []}}})
        )
        last: float | None = None
        while True:
            try:
                raw = await asyncio.wait_for(ws.recv(), 30)
            except TimeoutError:
                return  # the approval session: nothing more will come
            message = json.loads(raw)
            action = message.get("custom", {}).get("shinyChatMessage", {}).get("action", {})
            kind = action.get("type", "")
            if not kind.startswith("chunk"):
                continue
            now = time.perf_counter()
            if kind == "chunk" and gaps is not None:
                if last is not None:
                    gaps.append(now - last)
                last = now
            if kind == "chunk_end":
                return


async def round_(port: int, streamers: int, loaded: bool) -> list[float]:
    gaps: list[float] = []
    ready = asyncio.Event()
    tasks = [
        asyncio.create_task(session(port, "stream please", gaps, ready)) for _ in range(streamers)
    ]
    extra: list[asyncio.Task[None]] = []
    if loaded:
        extra.append(asyncio.create_task(session(port, "approve a write", None, ready)))
        extra.append(asyncio.create_task(session(port, "slow tool", None, ready)))
    await asyncio.sleep(1.0)  # every session connected and initialised
    ready.set()
    await asyncio.gather(*tasks)
    for task in extra:
        task.cancel()
    await asyncio.gather(*extra, return_exceptions=True)
    return gaps


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def main(sessions: int, rounds: int) -> None:
    port = free_port()
    server = start_app(port)
    try:
        await round_(port, 2, loaded=False)  # warm-up: litellm import, first requests
        base: list[float] = []
        loaded: list[float] = []
        for _ in range(rounds):
            base += await round_(port, sessions, loaded=False)
            loaded += await round_(port, sessions, loaded=True)
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(
        f"streaming sessions: {sessions}, rounds: {rounds}, "
        f"chunks measured: {len(base)} / {len(loaded)}"
    )
    for label, gaps in (
        ("baseline (streaming only)", base),
        ("loaded (+approval wait, +2 s sync tool)", loaded),
    ):
        print(
            f"{label:42} p50 {statistics.median(gaps) * 1000:7.1f} ms"
            f"   p99 {percentile(gaps, 99) * 1000:7.1f} ms"
        )
    print(f"p50 ratio loaded/baseline: {statistics.median(loaded) / statistics.median(base):.3f}")
    print(f"p99 ratio loaded/baseline: {percentile(loaded, 99) / percentile(base, 99):.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.rounds))
