"""The pre-request context check's cheap bound: it never hides a count that would compact.

Before each request the engine asks whether the context passes ``max_tokens``. It first
adds up an upper bound (the JSON length of each turn, no tokenising) and counts with
litellm only when that bound does not settle it. These tests check, over many random
conversations of many sizes, that the bound is never below litellm's count and that the
answer (and so when compaction triggers, and the tokens it reports) is the count's own.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from deputy_shiny import Agent, ContentToolRequest, ContentToolResult, ContextPolicy, Turn
from deputy_shiny._engine import compaction
from deputy_shiny._engine.compaction import (
    _turn_bound,
    _turn_tokens,
    context_bound,
    context_over,
    context_tokens,
)
from deputy_shiny.conversation import Conversation
from deputy_shiny.messages import ContentImage, ContentText, ContentThinking, user_turn
from deputy_shiny.models._litellm import get_litellm
from deputy_shiny.testing import FunctionModel

from .helpers import collect, types_of

# Pieces chosen to be dense in tokens per character: digits, punctuation, CJK, emoji,
# accents, whitespace runs, litellm's special-token text, JSON-escaped characters.
PIECES = [
    "word",
    "7",
    "31415926",
    "!?",
    "{}",
    '"',
    "\\",
    "\n",
    "\t",
    "   ",
    "é",
    "ß",
    "中文",
    "日本語",
    "😀",
    "👩‍💻",
    "<|endoftext|>",
    "<|im_start|>",
    "\u0000",
    "\u200b",
    "x" * 50,
    "ab" * 17,
]


def random_text(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(size))


def random_turn(rng: random.Random, size: int) -> Turn:
    kind = rng.choice(["user", "assistant", "calls", "results", "thinking"])
    if kind == "user":
        return user_turn(random_text(rng, size))
    if kind == "assistant":
        return Turn(role="assistant", contents=[ContentText(text=random_text(rng, size))])
    if kind == "thinking":
        contents: list[Any] = [
            ContentThinking(thinking=random_text(rng, size), signature=random_text(rng, 3)),
            ContentText(text=random_text(rng, size // 2 + 1)),
        ]
        return Turn(role="assistant", contents=contents)
    if kind == "calls":
        calls = [
            ContentToolRequest(
                id=f"call_{rng.randrange(10**6)}",
                name=rng.choice(["read_file", "x", "a_rather_long_tool_name"]),
                arguments={random_text(rng, 2): random_text(rng, size) for _ in range(2)},
            )
            for _ in range(rng.randint(1, 3))
        ]
        return Turn(role="assistant", contents=calls)
    results = [
        ContentToolResult(
            call_id=f"call_{rng.randrange(10**6)}", name="read_file", output=random_text(rng, size)
        )
        for _ in range(rng.randint(1, 3))
    ]
    return Turn(role="user", contents=results)


def random_schemas(rng: random.Random) -> tuple[dict[str, Any], ...]:
    return tuple(
        {
            "type": "function",
            "function": {
                "name": f"tool_{n}",
                "description": random_text(rng, rng.randint(0, 30)),
                "parameters": {"type": "object", "properties": {"p": {"type": "string"}}},
            },
        }
        for n in range(rng.randint(0, 4))
    )


def random_conversation(rng: random.Random) -> Conversation:
    size = rng.choice([0, 1, 3, 10, 40, 200, 1500])
    prompt = random_text(rng, size) if rng.random() < 0.7 else None
    turns = [random_turn(rng, rng.choice([0, 1, 5, size])) for _ in range(rng.randint(1, 8))]
    return Conversation(system_prompt=prompt or None, turns=turns)


def test_the_bound_of_a_turn_is_never_below_litellms_count() -> None:
    get_litellm()
    rng = random.Random(21)
    for _ in range(250):
        turn = random_turn(rng, rng.choice([0, 1, 2, 5, 20, 100, 600]))
        bound = _turn_bound(turn)
        assert bound is not None
        assert bound >= _turn_tokens(turn), turn


def test_an_image_has_no_cheap_bound_and_is_counted() -> None:
    # litellm prices an image at a fixed count whatever its URL's length: no bound.
    turn = user_turn("look", ContentImage(url="https://e.x/a.png"))
    assert _turn_bound(turn) is None
    conversation = Conversation(turns=[turn])
    assert context_bound(conversation) == context_tokens(Conversation(turns=[turn]))
    assert conversation.known_tokens(turn) == _turn_tokens(turn)


def test_context_over_answers_as_the_count_does_at_every_limit() -> None:
    get_litellm()
    rng = random.Random(2121)
    checked = 0
    for _ in range(150):
        conversation = random_conversation(rng)
        schemas = random_schemas(rng)
        exact = context_tokens(Conversation(conversation.base_prompt, conversation.turns), schemas)
        bound = context_bound(conversation, schemas)
        assert bound >= exact
        for limit in {
            64,
            exact - 1,
            exact,
            exact + 1,
            (exact + bound) // 2,
            bound - 1,
            bound,
            bound + 1,
        }:
            if limit < 1:
                continue
            # A fresh conversation for each limit (no count remembered), and the one
            # that remembers counts and bounds from earlier limits.
            fresh = Conversation(conversation.base_prompt, conversation.turns)
            expected = exact if exact > limit else None
            assert context_over(fresh, schemas, limit) == expected
            assert context_over(conversation, schemas, limit) == expected
            checked += 1
    assert checked > 600


def test_the_bound_settles_a_small_context_without_tokenising(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    get_litellm()
    counted: list[Any] = []
    real = compaction._count_messages

    def counting(messages: Any) -> int:
        counted.append(messages)
        return real(messages)

    monkeypatch.setattr(compaction, "_count_messages", counting)
    # A system prompt's count is remembered for the process (_text_tokens): one no
    # earlier test in this process can have counted.
    prompt = f"Be brief ({uuid.uuid4().hex})."
    conversation = Conversation(prompt, [user_turn("Hello"), user_turn("There")])
    assert context_over(conversation, (), 32000) is None
    assert counted == []
    # Over the bound, the count decides (and is remembered per turn).
    assert context_over(conversation, (), 64) is None
    assert len(counted) == 3  # the system prompt and both turns
    assert context_over(conversation, (), 64) is None
    assert len(counted) == 3


def test_tool_schemas_are_counted_once_while_the_same_objects_are_sent() -> None:
    counts: list[int] = []

    def count(schemas: Any) -> int:
        counts.append(len(schemas))
        return 10 * len(schemas)

    conversation = Conversation()
    schemas: list[dict[str, Any]] = [
        {"type": "function", "function": {"name": "a"}},
        {"type": "function"},
    ]
    assert conversation.schema_tokens(tuple(schemas), count) == 20
    assert conversation.schema_tokens(list(schemas), count) == 20  # same objects
    assert counts == [2]
    assert conversation.schema_tokens(schemas[:1], count) == 10  # fewer tools
    assert conversation.schema_tokens([dict(schemas[0])], count) == 10  # a new object
    assert counts == [2, 1, 1]


async def test_a_run_compacts_exactly_when_the_count_passes_max_tokens() -> None:
    # The same conversation, with max_tokens just under and just at the context's count.
    get_litellm()

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return "A short summary." if "summar" in str(messages[0]) else "ok"

    def agent_for(limit: int) -> tuple[Agent, int]:
        agent = Agent(
            FunctionModel(answer),
            system_prompt="You are terse.",
            context_policy=ContextPolicy(max_tokens=limit, fallback="text"),
        )
        for n in range(6):
            agent.add_turn(f"Question {n} " + "détail " * 40, "Answer " + "中文 " * 40)
        conversation = agent._conversation
        probe = Conversation(conversation.base_prompt, [*conversation.turns, user_turn("Go")])
        return agent, context_tokens(probe)

    _, tokens = agent_for(10_000)
    under, _ = agent_for(tokens)
    events = await collect(under.run("Go"))
    assert "compaction_start" not in types_of(events)
    over, _ = agent_for(tokens - 1)
    events = await collect(over.run("Go"))
    assert "compaction_start" in types_of(events)
    start = next(e for e in events if e.type == "compaction_start")
    assert start.tokens == tokens
