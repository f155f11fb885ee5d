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

Usage: .venv/bin/python benchmarks/stream_load.py [--mode provider|wire] [--users N]
       [--chunks N] [--interval S] [--rounds R]
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
    chunks: int = 0
    gaps: list[float] = field(default_factory=list)
    to_request: list[float] = field(default_factory=list)
    to_first: list[float] = field(default_factory=list)


class Stamps:
    """When each request reached the provider (FunctionModel is called then)."""

    def __init__(self) -> None:
        self.times: list[float] = []


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
    stamps.times.clear()
    cpu, started = time.process_time(), time.perf_counter()
    await asyncio.gather(*(_one_user(consume, out) for consume in consumers))
    out.cpu = time.process_time() - cpu
    out.to_request = [t - started for t in stamps.times]
    return out


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


def report(label: str, rounds: list[Round]) -> float:
    per_chunk = statistics.median(r.cpu / max(1, r.chunks) for r in rounds) * 1e6
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
    return per_chunk


def start_server(chunks: int, interval: float) -> tuple[subprocess.Popen[str], str]:
    """The fake OpenAI SSE server in its own process, and its ``api_base``."""
    command = [sys.executable, __file__, "--serve", "--chunks", str(chunks)]
    server = subprocess.Popen(
        [*command, "--interval", str(interval)], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    return server, f"http://127.0.0.1:{int(server.stdout.readline())}/v1"


async def main(
    api_base: str | None, users: int, chunks: int, interval: float, rounds: int
) -> float:
    """Run the rounds; ``api_base`` None streams from the CustomLLM provider, else over HTTP."""
    stamps = Stamps()
    get_litellm()
    model: ChatModel | FunctionModel
    if api_base is not None:
        model = chat = ChatModel(model="openai/x", api_base=api_base, api_key="sk-x")
    else:
        text = reply_text(chunks)

        def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ScriptedReply:
            stamps.times.append(time.perf_counter())
            return ScriptedReply(text=text, chunk_size=CHUNK, delay=interval)

        model = FunctionModel(answer)
        chat = model.as_chat_model()
    sides = {"litellm by hand": raw_side(chat), "Agent.run": agent_side(model)}
    # Warm-up: first-call costs (imports, provider setup) belong to neither side.
    for make in sides.values():
        await one_round(2, make, stamps)
    results: dict[str, list[Round]] = {label: [] for label in sides}
    for _ in range(rounds):
        for label, make in sides.items():
            results[label].append(await one_round(users, make, stamps))
    mode = "provider" if api_base is None else "wire"
    print(f"mode: {mode}; {users} users x {chunks} chunks, {interval * 1e3:.0f} ms apart")
    print(f"rounds: {rounds}")
    base = report("litellm by hand", results["litellm by hand"])
    ours = report("Agent.run", results["Agent.run"])
    ratio = ours / base
    print(f"ratio agent/baseline (CPU per chunk): {ratio:.3f}")
    return ratio


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("provider", "wire"), default="provider")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.chunks, args.interval))
    else:
        server, api_base = (
            start_server(args.chunks, args.interval) if args.mode == "wire" else (None, None)
        )
        try:
            asyncio.run(main(api_base, args.users, args.chunks, args.interval, args.rounds))
        finally:
            if server is not None:
                server.kill()
                server.wait()
