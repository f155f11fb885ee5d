"""Engine overhead on a long stream: Agent.stream_async against a plain litellm loop.

Both stream the same 20,000-chunk reply from the same ScriptedModel (a litellm
CustomLLM provider) in one process:

* baseline: ``litellm.acompletion(stream=True, stream_options={"include_usage": True})``
  consumed chunk by chunk, doing nothing with them;
* agent: ``Agent.stream_async`` (the full engine: events, incremental assembly, usage,
  limits, the conversation).

The engine spares its own streams litellm's end-of-stream rebuild and logging while no
app listens to litellm (``deputy_shiny.models._provider.lighten``), so a third loop,
the plain loop with those same switches, shows the engine's own overhead per chunk.

Runs alternate to share any drift, and each side's median is compared. The text varies
(litellm aborts a stream on 100 identical chunks in a row). The last line printed is
the ratio agent / baseline; the target is at most 1.15.

Usage: .venv/bin/python benchmarks/stream_overhead.py [--chunks N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from deputy_shiny import Agent
from deputy_shiny.models._litellm import get_litellm
from deputy_shiny.models._provider import lighten
from deputy_shiny.testing import ScriptedModel, ScriptedReply

CHUNK = 8


def reply_text(chunks: int) -> str:
    # Every chunk differs: "w0000001", "w0000002", ...
    return "".join(f"w{i:07d}" for i in range(chunks))


async def plain_loop(model: ScriptedModel, *, light: bool = False) -> float:
    litellm = get_litellm()
    started = time.perf_counter()
    stream = await litellm.acompletion(
        model=model.as_chat_model().model,
        messages=[{"role": "user", "content": "go"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    if light:
        lighten(stream)
    async for _chunk in stream:
        pass
    return time.perf_counter() - started


async def agent_stream(model: ScriptedModel) -> float:
    agent = Agent(model)
    started = time.perf_counter()
    received = 0
    async for chunk in agent.stream_async("go"):
        received += len(chunk)
    elapsed = time.perf_counter() - started
    assert received > 0
    return elapsed


async def main(chunks: int, rounds: int) -> None:
    text = reply_text(chunks)
    replies = [ScriptedReply(text=text, chunk_size=CHUNK) for _ in range(3 * rounds + 3)]
    model = ScriptedModel(replies)
    get_litellm()
    # Warm-up: first-call costs (imports, provider setup) belong to neither side.
    await plain_loop(model)
    await plain_loop(model, light=True)
    await agent_stream(model)
    base: list[float] = []
    light: list[float] = []
    ours: list[float] = []
    for _ in range(rounds):
        base.append(await plain_loop(model))
        light.append(await plain_loop(model, light=True))
        ours.append(await agent_stream(model))
    base_median, ours_median = statistics.median(base), statistics.median(ours)
    light_median = statistics.median(light)
    print(f"chunks per stream:          {chunks}")
    print(f"rounds:                     {rounds}")
    for label, value in (
        ("plain litellm loop", base_median),
        ("plain loop, lightened", light_median),
        ("Agent.stream_async", ours_median),
    ):
        print(f"{label + ' (median):':28} {value:.3f} s  ({value / chunks * 1e6:.1f} µs/chunk)")
    print(f"engine overhead per chunk:   {(ours_median - light_median) / chunks * 1e6:.1f} µs")
    print(f"ratio agent/lightened loop: {ours_median / light_median:.3f}")
    print(f"ratio agent/baseline: {ours_median / base_median:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.chunks, args.rounds))
