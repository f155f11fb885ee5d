"""Many users streaming at once: what each chunk and each run start costs, in one process.

N concurrent runs (default 20) each stream a 200-chunk reply, one chunk every 20 ms,
and all start at the same moment (a burst). Two sides, interleaved round by round:

* baseline: ``litellm.acompletion(stream=True, stream_options={"include_usage": True})``
  consumed by N tasks, doing nothing with the chunks (what "litellm by hand" costs);
* agent: ``Agent.run`` consumed by N tasks (the engine, its events, the conversation).

Two modes: ``provider`` streams from the deterministic litellm ``CustomLLM`` provider
the test models register (a ``FunctionModel``, which notes when each request reaches
it); ``wire`` streams over HTTP from a fake OpenAI-compatible SSE server in its own
process (model ``openai/x`` with ``api_base``), so litellm's real OpenAI path runs.

Printed per side: CPU time of this process per chunk (µs; the chunks are paced, so
CPU is the cost that limits how many users one process holds), the p50/p99 gap
between chunks, and the burst: time from ``run()`` to the provider receiving the
request (provider mode) and to the first chunk. The last line is the CPU-per-chunk
ratio agent/baseline.

``--burst`` (provider mode) isolates what a run costs before its request: the provider
holds every reply until all N requests of the round have reached it, so nothing streams
while runs are still starting; it prints the CPU per run from the round's start to the
last request (both sides: litellm's own request setup included) and the ratio
agent/baseline of that last.

The sides alternate which goes first from round to round, and each round starts once the
process is idle (no other task, under 5% CPU for 50 ms), so neither side pays for the other's
tail or always for the same position (a garbage collection, a cold cache).

Usage: .venv/bin/python benchmarks/stream_load.py [--mode provider|wire] [--users N]
       [--chunks N] [--interval S] [--rounds R] [--burst]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from deputy_shiny import Agent, ChatModel
from deputy_shiny.models._litellm import get_litellm
from deputy_shiny.testing import FunctionModel, ScriptedReply

CHUNK = 8


def reply_text(chunks: int, salt: int = 0) -> str:
    # Every chunk differs (litellm aborts a stream on 100 identical chunks in a row).
    return "".join(f"w{salt % 10}{i:06d}" for i in range(chunks))


# --------------------------------------------------------------------------- fake server


def _sse(payload: dict[str, Any]) -> bytes:
    data = b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _serve_one(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, chunks: int, interval: float
) -> None:
    try:
        while True:  # keep-alive: one request after another on this connection
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1}
            base["model"] = "x"
            text = reply_text(chunks)
            for i in range(chunks):
                if i:
                    await asyncio.sleep(interval)
                delta = {"content": text[i * CHUNK : (i + 1) * CHUNK]}
                if i == 0:
                    delta["role"] = "assistant"
                choice = {"index": 0, "delta": delta, "finish_reason": None}
                writer.write(_sse({**base, "choices": [choice]}))
                await writer.drain()
            finish = {"index": 0, "delta": {}, "finish_reason": "stop"}
            writer.write(_sse({**base, "choices": [finish]}))
            usage = {"prompt_tokens": 5, "completion_tokens": chunks, "total_tokens": chunks + 5}
            writer.write(_sse({**base, "choices": [], "usage": usage}))
            done = b"data: [DONE]\n\n"
            writer.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(chunks: int, interval: float) -> None:
    """Run the fake OpenAI SSE server; print its port, serve until killed."""
    server = await asyncio.start_server(
        lambda r, w: _serve_one(r, w, chunks, interval), "127.0.0.1", 0
    )
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


# --------------------------------------------------------------------------- sides


@dataclass
class Round:
    cpu: float = 0.0
    cpu_to_request: float = 0.0  # --burst: process CPU from the start to the last request
    chunks: int = 0
    gaps: list[float] = field(default_factory=list)
    to_request: list[float] = field(default_factory=list)
    to_first: list[float] = field(default_factory=list)


class Stamps:
    """When each request reached the provider (FunctionModel is called then).

    With ``hold`` set, :meth:`arrive` keeps each reply until ``expected`` requests have
    arrived, and notes the process CPU time at the last arrival.
    """

    def __init__(self, hold: bool = False) -> None:
        self.times: list[float] = []
        self.hold = hold
        self.expected = 0
        self.cpu_at_last = 0.0
        self.all_arrived = asyncio.Event()

    def reset(self, expected: int) -> None:
        self.times.clear()
        self.expected = expected
        self.all_arrived = asyncio.Event()

    async def arrive(self) -> None:
        self.times.append(time.perf_counter())
        if len(self.times) == self.expected:
            self.cpu_at_last = time.process_time()
            self.all_arrived.set()
        await self.all_arrived.wait()


Consume = Callable[[Callable[[], None]], Awaitable[None]]


async def _one_user(consume: Consume, out: Round) -> None:
    started = time.perf_counter()
    last: list[float] = []

    def on_chunk() -> None:
        now = time.perf_counter()
        if last:
            out.gaps.append(now - last[0])
        else:
            out.to_first.append(now - started)
        last[:] = [now]
        out.chunks += 1

    await consume(on_chunk)


async def one_round(users: int, make: Callable[[], Consume], stamps: Stamps) -> Round:
    out = Round()
    consumers = [make() for _ in range(users)]
    stamps.reset(users)
    cpu, started = time.process_time(), time.perf_counter()
    await asyncio.gather(*(_one_user(consume, out) for consume in consumers))
    out.cpu = time.process_time() - cpu
    out.cpu_to_request = stamps.cpu_at_last - cpu
    out.to_request = [t - started for t in stamps.times]
    return out


async def settle(quiet: float = 0.05, longest: float = 5.0) -> None:
    """Wait until this process has been idle for ``quiet`` seconds (CPU, tasks)."""
    deadline = time.perf_counter() + longest
    me = asyncio.current_task()
    while time.perf_counter() < deadline:
        cpu = time.process_time()
        await asyncio.sleep(quiet)
        others = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
        if not others and time.process_time() - cpu < quiet * 0.05:
            return


def raw_side(model: ChatModel) -> Callable[[], Consume]:
    litellm = get_litellm()

    def make() -> Consume:
        async def consume(on_chunk: Callable[[], None]) -> None:
            stream = await litellm.acompletion(
                messages=[{"role": "user", "content": "go"}],
                stream=True,
                stream_options={"include_usage": True},
                **model.request_kwargs(),
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    on_chunk()

        return consume

    return make


def agent_side(model: ChatModel | FunctionModel) -> Callable[[], Consume]:
    def make() -> Consume:
        agent = Agent(model)

        async def consume(on_chunk: Callable[[], None]) -> None:
            async for event in agent.run("go"):
                if event.type == "text":
                    on_chunk()

        return consume

    return make


def _p(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(label: str, rounds: list[Round], users: int, burst: bool) -> tuple[float, float]:
    """Print one side's figures; returns (CPU per chunk µs, burst CPU per run ms)."""
    per_chunk = statistics.median(r.cpu / max(1, r.chunks) for r in rounds) * 1e6
    per_run = statistics.median(r.cpu_to_request for r in rounds) / users * 1e3
    gaps = [g for r in rounds for g in r.gaps]
    to_request = [t for r in rounds for t in r.to_request]
    to_first = [t for r in rounds for t in r.to_first]
    print(f"{label}:")
    print(f"  CPU per chunk (median of rounds): {per_chunk:.1f} µs")
    print(f"  gap p50 / p99: {_p(gaps, 0.5) * 1e3:.1f} / {_p(gaps, 0.99) * 1e3:.1f} ms")
    if to_request:
        print(
            f"  run() -> provider has the request p50 / max: "
            f"{_p(to_request, 0.5) * 1e3:.1f} / {max(to_request) * 1e3:.1f} ms"
        )
    print(
        f"  run() -> first chunk p50 / max: "
        f"{_p(to_first, 0.5) * 1e3:.1f} / {max(to_first) * 1e3:.1f} ms"
    )
    if burst:
        print(f"  CPU per run before its request (median of rounds): {per_run:.2f} ms")
    return per_chunk, per_run


def start_server(chunks: int, interval: float) -> tuple[subprocess.Popen[str], str]:
    """The fake OpenAI SSE server in its own process, and its ``api_base``."""
    command = [sys.executable, __file__, "--serve", "--chunks", str(chunks)]
    server = subprocess.Popen(
        [*command, "--interval", str(interval)], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    return server, f"http://127.0.0.1:{int(server.stdout.readline())}/v1"


async def main(
    api_base: str | None, users: int, chunks: int, interval: float, rounds: int, burst: bool
) -> float:
    """Run the rounds; ``api_base`` None streams from the CustomLLM provider, else over HTTP.

    ``burst``: the provider holds the replies until every request arrived (provider mode).
    """
    stamps = Stamps(hold=burst)
    get_litellm()
    model: ChatModel | FunctionModel
    if api_base is not None:
        model = chat = ChatModel(model="openai/x", api_base=api_base, api_key="sk-x")
    else:
        text = reply_text(chunks)

        def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ScriptedReply:
            stamps.times.append(time.perf_counter())
            return ScriptedReply(text=text, chunk_size=CHUNK, delay=interval)

        async def held(
            messages: list[dict[str, Any]], tools: list[dict[str, Any]]
        ) -> ScriptedReply:
            await stamps.arrive()
            return ScriptedReply(text=text, chunk_size=CHUNK, delay=interval)

        model = FunctionModel(held if burst else answer)
        chat = model.as_chat_model()
    sides = {"litellm by hand": raw_side(chat), "Agent.run": agent_side(model)}
    # Warm-up: first-call costs (imports, provider setup) belong to neither side.
    for make in sides.values():
        await one_round(2, make, stamps)
    results: dict[str, list[Round]] = {label: [] for label in sides}
    order = list(sides.items())
    for index in range(rounds):
        # Alternate who goes first, and start each round with the process idle.
        for label, make in order if index % 2 == 0 else order[::-1]:
            await settle()
            results[label].append(await one_round(users, make, stamps))
    mode = "provider" if api_base is None else "wire"
    print(f"mode: {mode}; {users} users x {chunks} chunks, {interval * 1e3:.0f} ms apart")
    print(f"rounds: {rounds}" + ("; burst: replies held until every request arrived" * burst))
    base, base_run = report("litellm by hand", results["litellm by hand"], users, burst)
    ours, our_run = report("Agent.run", results["Agent.run"], users, burst)
    ratio = ours / base
    print(f"ratio agent/baseline (CPU per chunk): {ratio:.3f}")
    if burst:
        print(f"ratio agent/baseline (CPU per run before its request): {our_run / base_run:.3f}")
    return ratio


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("provider", "wire"), default="provider")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--burst", action="store_true", help="hold replies until every request arrived"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.burst and args.mode != "provider":
        parser.error("--burst needs --mode provider (the provider holds the replies)")
    if args.serve:
        asyncio.run(serve(args.chunks, args.interval))
    else:
        server, api_base = (
            start_server(args.chunks, args.interval) if args.mode == "wire" else (None, None)
        )
        try:
            asyncio.run(
                main(api_base, args.users, args.chunks, args.interval, args.rounds, args.burst)
            )
        finally:
            if server is not None:
                server.kill()
                server.wait()
