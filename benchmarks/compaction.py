"""Compaction: a long scripted conversation stays under max_tokens at a flat cost per run.

One Agent under ``ContextPolicy(max_tokens=8000)`` holds a 500-turn conversation
(250 runs of a user turn and a ~300-token scripted reply; every reply varies its text).
The FunctionModel answers summary requests with a short summary, and records the
messages of every other request; their tokens are counted after each run (outside the
timed part) with litellm's token counter over the whole request, as a provider would
see it.

Printed: the peak context tokens sent (must be at most max_tokens), how many
compactions ran, and the engine time per run (``agent.run_async`` wall time, median)
near turn 10 and near the last turn. The last line is the ratio last/turn-10; the
target is at most 2: compaction keeps the context, and so each run's cost, bounded
however long the conversation grows. Runs that compacted (they make a summary request
as well) are left out of both medians, and reported on their own.

Usage: .venv/bin/python benchmarks/compaction.py [--turns N] [--max-tokens T]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from deputy_shiny import Agent, ContextPolicy
from deputy_shiny._engine.compaction import SUMMARY_INSTRUCTIONS
from deputy_shiny.models._litellm import get_litellm
from deputy_shiny.testing import FunctionModel

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
]
WINDOW = 6
"""Runs per median: those ending near turn 10, and the last ones."""


def reply(seed: int, words: int) -> str:
    return " ".join(f"{WORDS[(seed + i) % len(WORDS)]}{i}" for i in range(words))


class Script:
    """The scripted model: replies of known size; summaries; requests recorded."""

    def __init__(self, reply_words: int) -> None:
        self.reply_words = reply_words
        self.sent: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
        self.summaries = 0
        self.model = FunctionModel(self)

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        if messages[0].get("content") == SUMMARY_INSTRUCTIONS:
            self.summaries += 1
            return f"Summary {self.summaries}: the user asked about {WORDS[self.summaries % 12]}."
        self.sent.append((messages, tools))
        return reply(len(self.sent), self.reply_words)


def tokens_sent(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    return int(get_litellm().token_counter(model="", messages=messages, tools=tools or None))


async def main(turns: int = 500, max_tokens: int = 8000, reply_words: int = 150) -> float:
    get_litellm()  # imported before timing
    script = Script(reply_words)
    agent = Agent(script.model, context_policy=ContextPolicy(max_tokens=max_tokens))
    runs = turns // 2
    times: list[float] = []
    compacted: list[bool] = []
    peak = 0
    for n in range(runs):
        before = agent.last_compaction()
        started = time.perf_counter()
        await agent.run_async(f"Question {n}: tell me about {WORDS[n % 12]} {n}.")
        times.append(time.perf_counter() - started)
        compacted.append(agent.last_compaction() is not before)
        while script.sent:
            peak = max(peak, tokens_sent(*script.sent.pop()))
    assert len(agent.get_turns()) == 2 * runs
    early_end = min(runs, max(WINDOW, 10 // 2 + WINDOW // 2))
    early = [t for t, c in zip(times[:early_end], compacted[:early_end], strict=True) if not c]
    late_pairs = list(zip(times[-WINDOW * 2 :], compacted[-WINDOW * 2 :], strict=True))
    late = [t for t, c in late_pairs if not c][-WINDOW:]
    compacting = [t for t, c in zip(times, compacted, strict=True) if c]
    early_ms = statistics.median(early[-WINDOW:]) * 1000
    late_ms = statistics.median(late) * 1000
    print(f"turns: {2 * runs}, max_tokens: {max_tokens}, reply: ~{reply_words} words")
    print(f"peak context tokens sent: {peak} (max_tokens {max_tokens})")
    print(f"compactions: {sum(compacted)} (summary requests: {script.summaries})")
    if compacting:
        print(f"run with a compaction: {statistics.median(compacting) * 1000:.2f} ms (median)")
    print(f"engine time per run near turn 10: {early_ms:.2f} ms")
    print(f"engine time per run near turn {2 * runs}: {late_ms:.2f} ms")
    ratio = late_ms / early_ms
    print(f"ratio turn {2 * runs}/turn 10: {ratio:.3f}")
    return ratio


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--max-tokens", type=int, default=8000)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.max_tokens))
