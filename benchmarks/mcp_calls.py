"""MCP tool calls: a round trip through the Agent against the SDK's bare call_tool.

Both sides call the same tool (``add``) of the same in-process MCP server (an SDK
``MCPServer`` over the SDK's in-memory transport) in one process, and both make the
same scripted model request before each call:

* baseline: a plain streamed ``litellm.acompletion`` of the ScriptedModel's reply (the
  request the engine would make, without the engine), then ``ClientSession.call_tool``
  on a ``Client(server)`` session; only the ``call_tool`` is timed;
* agent: an ``Agent`` whose ScriptedModel asks for one ``add`` call per reply, the tool
  coming from an ``McpConnection``; timed is the span from the ``tool_start`` to the
  ``tool_end`` event as the consumer of ``agent.run`` receives them. Measured twice:
  with the connection owned on the app's own loop (``loop="current"``, what the Shiny
  kit does) and on the MCP loop thread (the default, for scripts).

The span holds everything the agent does for one call (argument parsing, the
permission gate, events, the hop to the MCP loop thread and back, the one-request rule
and timeout, ``Client.call_tool``, result conversion) and none of the model request
itself. litellm finishes each request with background work on the event loop (success
handlers, cost, logging: milliseconds of CPU) that overlaps whatever comes next and
made every span vary by more than the differences measured. So both sides let it
settle (``SETTLE``) before the timed part: the baseline after its model request, the
agent side when it receives ``tool_start`` (the engine's generator waits there until
the consumer asks for the next event, and the call runs after that). The span of the
same run with a local async ``add`` tool is printed as well: the engine's own per-call
cost, so the MCP-specific part is ``MCP span - local span``.

Rounds alternate the measurements to share any drift; the medians are compared. The
thread hop of the MCP-loop path costs far more than a no-op hop suggests: right after
a request litellm's background work holds the GIL, and the MCP thread waits for it
(up to the interpreter's switch interval) each way. The last line printed is the ratio
agent span (kit path) / bare call_tool; the target is at most 1.5.

Usage: .venv/bin/python benchmarks/mcp_calls.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any, Literal

from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from deputy_shiny import Agent, McpConnection, UsageLimits, tool
from deputy_shiny.mcp import McpConfig, McpInProcessServer
from deputy_shiny.models._litellm import get_litellm
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

SETTLE = 0.02
"""Seconds both sides wait before the timed part, for litellm's post-request work."""

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=False, idempotent_hint=True
)


def make_server() -> MCPServer:
    server = MCPServer("bench")

    @server.tool(annotations=READ_ONLY)
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return server


async def local_add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def scripted(calls: int) -> ScriptedModel:
    replies: list[Any] = [
        ScriptedReply(tool_calls=[ScriptedToolCall("add", {"a": i, "b": 1})]) for i in range(calls)
    ]
    return ScriptedModel([*replies, f"made {calls} calls"])


async def model_request(model: ScriptedModel) -> None:
    """One streamed request to the scripted model, as the engine makes it (no engine)."""
    litellm = get_litellm()
    stream = await litellm.acompletion(
        model=model.as_chat_model().model,
        messages=[{"role": "user", "content": "go"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    async for _chunk in stream:
        pass


async def bare_calls(server: MCPServer, calls: int) -> list[float]:
    """Seconds per ``ClientSession.call_tool``, each after the same scripted model request."""
    times: list[float] = []
    model = scripted(calls)
    async with Client(server, cache=None) as client:
        session = client.session
        await session.call_tool("add", {"a": -1, "b": 1})
        for i in range(calls):
            await model_request(model)
            await asyncio.sleep(SETTLE)
            started = time.perf_counter()
            result = await session.call_tool("add", {"a": i, "b": 1})
            times.append(time.perf_counter() - started)
            assert not result.is_error
    return times


async def agent_calls(
    server: MCPServer | None, calls: int, loop: Literal["mcp", "current"] = "current"
) -> list[float]:
    """Seconds per tool call (tool_start -> tool_end) in one run of ``calls`` calls.

    ``server`` None: the same run with the local ``add`` tool.
    """
    agent = Agent(scripted(calls), usage_limits=UsageLimits(max_requests=calls + 1))
    connection: McpConnection | None = None
    if server is not None:
        config = McpConfig(servers={"bench": McpInProcessServer(name="bench", server=server)})
        connection = await McpConnection.open(config, "bench", agent, tools=["add"], loop=loop)
        agent.register_tools(connection.tools())
    else:
        hints = READ_ONLY.model_dump(exclude_none=True)  # the same claims as the server's
        agent.register_tools([tool(local_add, name="add", annotations=hints)])
    spans: list[float] = []
    begun = 0.0
    try:
        async for event in agent.run("go"):
            if event.type == "tool_start":
                # The engine waits at this event until we ask for the next one: let the
                # request's background work finish first, as the baseline does.
                await asyncio.sleep(SETTLE)
                begun = time.perf_counter()
            elif event.type == "tool_end":
                spans.append(time.perf_counter() - begun)
                assert not event.is_error, event.output
    finally:
        await agent.aclose()
    assert len(spans) == calls
    return spans


async def main(calls: int, rounds: int) -> float:
    """Run the benchmark, print the report and return the ratio."""
    server = make_server()
    get_litellm()
    # Warm-up: first-call costs (imports, provider setup, the MCP loop) belong to no side.
    await bare_calls(server, 2)
    await agent_calls(server, 2)
    await agent_calls(server, 2, "mcp")
    await agent_calls(None, 2)
    bare: list[float] = []
    mcp_spans: list[float] = []
    thread_spans: list[float] = []
    local_spans: list[float] = []
    for _ in range(rounds):
        bare.extend(await bare_calls(server, calls))
        mcp_spans.extend(await agent_calls(server, calls))
        thread_spans.extend(await agent_calls(server, calls, "mcp"))
        local_spans.extend(await agent_calls(None, calls))
    bare_median = statistics.median(bare)
    span_median = statistics.median(mcp_spans)
    thread_median = statistics.median(thread_spans)
    local_median = statistics.median(local_spans)
    ratio = span_median / bare_median
    print(f"tool calls per round:                     {calls}")
    print(f"rounds:                                   {rounds}")
    for label, value in (
        ("bare ClientSession.call_tool", bare_median),
        ("agent round trip, MCP tool (kit)", span_median),
        ("agent round trip, MCP tool (MCP thread)", thread_median),
        ("agent round trip, local tool", local_median),
    ):
        print(f"{label + ' (median):':42} {value * 1e6:8.1f} µs")
    print(f"ratio MCP thread/baseline: {thread_median / bare_median:.3f}")
    print(f"ratio agent/baseline: {ratio:.3f}")
    return ratio


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.rounds))
