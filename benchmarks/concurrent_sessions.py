"""Many users, one process: do an approval wait and a blocking tool stall other sessions?

Starts ``_sessions_app.py`` (the kit's modules with a deterministic model that streams
200 chunks 20 ms apart) with ``shiny run`` on loopback, then drives it with websocket
clients speaking Shiny's protocol (no browser), in one invocation:

* baseline: 20 sessions stream at once;
* loaded: the same 20 sessions stream while one more session waits on an approval
  (its modal is never answered) and another runs a sync tool that blocks its worker
  thread for 2 seconds.

It runs ``--rounds`` such pairs (alternating which goes first), so that each loaded
round is compared with a baseline measured next to it: one pair swings with the
machine's load alone. For each streaming session it records when every chunk arrives;
each round prints the p50 and p99 gap between consecutive chunks of both halves, the
worst gap of the loaded half and the pair's p99 ratio. Then it prints the worst gap of
all loaded rounds (a stall behind the sync tool shows as a gap near its 2 s block) and,
last, the median of the per-round p99 ratios loaded/baseline; the target is at most 1.2
(an approval wait or a blocking tool must not stall anyone else: Shiny has one reactive
lock for the whole process).

Usage: .venv/bin/python benchmarks/concurrent_sessions.py [--sessions N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import websockets

HERE = Path(__file__).resolve().parent
INPUT = "chat-chat_user_input:shinychat.userInput"
BLOCK_SECONDS = 2.0  # how long _sessions_app.py's "slow" tool blocks its thread
CHUNKS = 200  # a stream's chunks (20 ms apart), unless main() is told otherwise
START_TIMEOUT = 60.0  # seconds for every session of a round to start


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_app(port: int, chunks: int = CHUNKS) -> subprocess.Popen[bytes]:
    """``shiny run`` the app; its streams are ``chunks`` chunks long."""
    server = subprocess.Popen(
        [sys.executable, "-m", "shiny", "run", "_sessions_app.py", "--port", str(port)],
        cwd=HERE,
        env={**os.environ, "SESSIONS_CHUNKS": str(chunks)},
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


async def session(
    port: int,
    text: str,
    gaps: list[float] | None,
    started: asyncio.Event,
    ready: asyncio.Event,
) -> None:
    """One browser session: start (then set ``started``), wait for ``ready``, send
    ``text``; record chunk gaps into ``gaps`` if given."""
    async with websockets.connect(f"ws://127.0.0.1:{port}/websocket/", max_size=None) as ws:
        await ws.send(json.dumps({"method": "init", "data": {}}))
        while "values" not in json.loads(await asyncio.wait_for(ws.recv(), START_TIMEOUT)):
            pass  # the session has started once its first values arrive
        started.set()
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
    started: list[asyncio.Event] = []

    def launch(text: str, into: list[float] | None) -> asyncio.Task[None]:
        started.append(asyncio.Event())
        return asyncio.create_task(session(port, text, into, started[-1], ready))

    tasks = [launch("stream please", gaps) for _ in range(streamers)]
    extra = [launch("approve a write", None), launch("slow tool", None)] if loaded else []
    # Every session connected and initialised before anyone submits (a session that
    # fails to start raises from its task below).
    everyone = asyncio.gather(*(flag.wait() for flag in started))
    watched: set[asyncio.Future[Any]] = {everyone, *tasks, *extra}
    await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
    everyone.cancel()
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


def p50_p99(gaps: list[float]) -> str:
    p50, p99 = statistics.median(gaps) * 1000, percentile(gaps, 99) * 1000
    return f"p50 {p50:7.1f} ms   p99 {p99:7.1f} ms"


async def main(sessions: int, rounds: int, chunks: int = CHUNKS, warm_up: bool = True) -> float:
    """Run ``rounds`` paired rounds; print them; return the median per-round p99 ratio.

    ``chunks`` and ``warm_up`` (a first, unmeasured round) are for the tiny run in
    ``tests/test_benchmarks.py``, which checks that the benchmark works, not the figures.
    """
    port = free_port()
    server = start_app(port, chunks)
    ratios: list[float] = []
    worst = 0.0
    try:
        if warm_up:
            await round_(port, 2, loaded=False)  # litellm's first requests, thread pools
        for index in range(rounds):
            # Alternate which half of the pair goes first, so a drift in the machine's
            # load does not always favour the same one.
            order = (False, True) if index % 2 == 0 else (True, False)
            gaps = {loaded: await round_(port, sessions, loaded) for loaded in order}
            base, loaded = gaps[False], gaps[True]
            ratio = percentile(loaded, 99) / percentile(base, 99)
            ratios.append(ratio)
            worst = max(worst, *loaded)
            print(
                f"round {index + 1}: baseline {p50_p99(base)}  |  loaded {p50_p99(loaded)}"
                f"  |  worst loaded gap {max(loaded) * 1000:7.1f} ms  |  p99 ratio {ratio:.3f}"
            )
    finally:
        server.terminate()
        server.wait(timeout=10)
    median = statistics.median(ratios)
    print(
        f"streaming sessions: {sessions}, rounds: {rounds} "
        "(baseline: streaming only; loaded: +approval wait, +2 s sync tool)"
    )
    print(
        f"worst gap in the loaded rounds: {worst * 1000:.1f} ms "
        f"(a stall behind the sync tool would show near {BLOCK_SECONDS * 1000:.0f} ms)"
    )
    print(f"median of the per-round p99 ratios loaded/baseline: {median:.3f}")
    return median


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.rounds))
