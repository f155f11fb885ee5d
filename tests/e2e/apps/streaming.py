"""Streaming, stopping and provider errors.

The model answers the user's message:

- ``stream`` -> 25 numbered words in small chunks (~1.6 s), usage 100 + 50 tokens, $0.0012;
- ``slow`` -> 400 numbered words, slowly (~25 s: long enough to be stopped);
- ``sleep`` -> a call to ``slow_tool`` (an async tool that sleeps 30 s);
- ``progress`` -> a call to ``progress_tool`` (a sync tool: it reports "Step 1 of 2
  <b>" at half way, then waits for ``$DEPUTY_E2E_MARKERS/step2``; reports "Step 2 of 2",
  then waits for ``$DEPUTY_E2E_MARKERS/finish``; at most 30 s each);
- ``burst`` -> 120 numbered words in 3-character chunks ~2 ms apart (far more chunks
  than the kit's 40 ms flush interval lets through), then a call to ``quick_tool``;
- ``fail`` -> HTTP 503 from the provider;
- anything else -> ``You said: <message>``.

After a tool result it says ``Tool finished: <result>``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, tool, tool_annotations, warm_up
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import (
    FunctionModel,
    ProviderFailure,
    Reply,
    ScriptedReply,
    ScriptedToolCall,
)
from deputy_shiny.tools import current_tool_context
from tests.e2e.apps._shared import (
    last_tool_text,
    last_user_text,
    mark,
    numbered_words,
    workspace_root,
)

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

STREAM_TEXT = numbered_words(25, "DONE.")
BURST_TEXT = numbered_words(120, "BURST-END.")
SLOW_TEXT = numbered_words(400, "SLOW-END.")


async def slow_tool(seconds: float) -> str:
    """Wait, then say so.

    Args:
        seconds: How long to wait.
    """
    mark("slow_tool", "started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        mark("slow_tool", "cancelled")
        raise
    mark("slow_tool", "finished")
    return f"slept {seconds} s"


def _wait_for(name: str) -> None:
    flag = Path(os.environ["DEPUTY_E2E_MARKERS"]) / name
    deadline = time.monotonic() + 30
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def progress_tool(steps: int) -> str:
    """Work in steps, reporting each (a sync tool: it runs in a worker thread).

    Args:
        steps: How many steps.
    """
    ctx = current_tool_context()
    ctx.progress("Step 1 of 2 <b>bold?</b>", fraction=0.5)
    _wait_for("step2")
    ctx.progress("Step 2 of 2")
    _wait_for("finish")
    return f"did {steps} steps"


async def quick_tool(word: str) -> str:
    """Say the word back.

    Args:
        word: The word.
    """
    return f"looked at {word}"


LOCAL = tool_annotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=False, idempotent_hint=True
)


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    tool_text = last_tool_text(messages)
    if tool_text is not None:
        return f"Tool finished: {tool_text}"
    text = last_user_text(messages) or ""
    if text == "stream":
        return ScriptedReply(
            STREAM_TEXT,
            chunk_size=8,
            delay=0.05,
            usage={"prompt_tokens": 100, "completion_tokens": 50},
            cost=0.0012,
        )
    if text == "slow":
        return ScriptedReply(SLOW_TEXT, chunk_size=8, delay=0.05)
    if text == "sleep":
        return ScriptedReply(tool_calls=[ScriptedToolCall("slow_tool", {"seconds": 30})])
    if text == "progress":
        return ScriptedReply(tool_calls=[ScriptedToolCall("progress_tool", {"steps": 2})])
    if text == "burst":
        call = ScriptedToolCall("quick_tool", {"word": "ok"})
        return ScriptedReply(BURST_TEXT, chunk_size=3, delay=0.002, tool_calls=[call])
    if text == "fail":
        return ProviderFailure(503)
    return f"You said: {text}"


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(
        FunctionModel(reply),
        tools=[
            tool(slow_tool, annotations=LOCAL),
            tool(quick_tool, annotations=LOCAL),
            tool(progress_tool, annotations=LOCAL),
        ],
        working_dir=ctx.working_dir,
        approval_handler=ctx.approval_handler,
    )


app_ui = ui.page_fillable(agent_chat_ui("agent"), title="streaming")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("agent", make_agent, workspace_root=workspace_root())


app = App(app_ui, server)
