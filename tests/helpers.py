"""Small helpers shared by the tests (tools with honest annotations, event collection)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from deputy_shiny import Agent, AgentEvent, Tool, tool, tool_annotations

READ_ONLY = tool_annotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=False, idempotent_hint=True
)


def local_tool(fn: Callable[..., Any], **kwargs: Any) -> Tool:
    """A test tool declared read-only and closed-world (true for every test tool here)."""
    return tool(fn, annotations=READ_ONLY, **kwargs)


async def collect(events: AsyncIterator[AgentEvent]) -> list[AgentEvent]:
    return [event async for event in events]


def types_of(events: list[AgentEvent]) -> list[str]:
    return [e.type for e in events]


def without_chunks(events: list[AgentEvent]) -> list[str]:
    """Event types with runs of ``text`` chunks folded into one ``text``."""
    out: list[str] = []
    for e in events:
        if e.type == "text" and out and out[-1] == "text":
            continue
        out.append(e.type)
    return out


def assert_consistent(agent: Agent) -> None:
    """Every tool request in the conversation is answered by the next turn."""
    turns = agent.get_turns()
    for i, turn in enumerate(turns):
        if turn.role == "assistant" and turn.tool_requests:
            assert i + 1 < len(turns), "dangling tool request at the end"
            answered = {r.call_id for r in turns[i + 1].tool_results}
            assert {r.id for r in turn.tool_requests} <= answered


async def wait_until(predicate: Callable[[], bool], within: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)
