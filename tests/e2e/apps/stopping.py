"""The stop button in every state a run can be in, with or without saved conversations.

The lead's model answers the user's message:

- ``slow`` -> 400 numbered words, slowly (~25 s: long enough to be stopped);
- ``sleep`` -> a call to ``slow_tool`` (an async tool that sleeps 30 s; markers
  ``slow_tool started`` / ``slow_tool cancelled``);
- ``effect <name>`` -> a call to ``effect(name)``, which always needs the user's
  approval; run, it writes ``$DEPUTY_E2E_MARKERS/effect-<name>`` (the side effect a
  stopped call must never have);
- ``ask`` -> an ``ask_user`` question (header ``Color``: Red / Blue);
- ``delegate`` -> ``helper`` counts for 30 s (``slow_count``: markers ``slow_count
  started`` / ``slow_count cancelled``);
- anything else -> ``You said: <message>``.

After a tool result it says ``Tool finished: <result>``.

``DEPUTY_E2E_PERSIST``: unset, no saved conversations (the live approval handler);
``files``, ``KitPersistence`` in files under the workspace root (durable approvals);
``store``, the same with ``DEPUTY_STORE_URL``'s store.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, Permissions, tool, tool_annotations, warm_up
from deputy_shiny.delegation import AgentDefinition, LeadAgent
from deputy_shiny.shiny import (
    AgentChatContext,
    KitPersistence,
    agent_chat_server,
    agent_chat_ui,
)
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tools_interactive
from tests.e2e.apps._shared import (
    COLOR,
    last_tool_text,
    last_user_text,
    mark,
    numbered_words,
    workspace_root,
)

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

SLOW_TEXT = numbered_words(400, "SLOW-END.")
LOCAL = tool_annotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=False, idempotent_hint=True
)

_MODE = os.environ.get("DEPUTY_E2E_PERSIST", "")
PERSISTENCE = (
    None
    if not _MODE
    else KitPersistence(
        workspace_root() / "conversations",
        anonymous=True,
        store=os.environ["DEPUTY_STORE_URL"] if _MODE == "store" else None,
    )
)


async def _sleep_marked(name: str, seconds: float) -> None:
    mark(name, "started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        mark(name, "cancelled")
        raise
    mark(name, "finished")


async def slow_tool(seconds: float) -> str:
    """Wait, then say so.

    Args:
        seconds: How long to wait.
    """
    await _sleep_marked("slow_tool", seconds)
    return f"slept {seconds} s"


async def slow_count(steps: int) -> str:
    """Count slowly: ``steps`` tenths of a second.

    Args:
        steps: How many tenths.
    """
    await _sleep_marked("slow_count", steps / 10)
    return f"counted {steps}"


def effect(name: str) -> str:
    """Leave a file behind (the side effect a stopped call must never have).

    Args:
        name: The file's name.
    """
    (Path(os.environ["DEPUTY_E2E_MARKERS"]) / f"effect-{name}").write_text("ran")
    mark("effect", name)
    return f"made {name}"


def lead_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    tool_text = last_tool_text(messages)
    if tool_text is not None:
        return f"Tool finished: {tool_text}"
    text = last_user_text(messages) or ""
    if text == "slow":
        return ScriptedReply(SLOW_TEXT, chunk_size=8, delay=0.05)
    if text == "sleep":
        return ScriptedReply(tool_calls=[ScriptedToolCall("slow_tool", {"seconds": 30})])
    if text.startswith("effect "):
        call = ScriptedToolCall("effect", {"name": text.split()[1]})
        return ScriptedReply(tool_calls=[call])
    if text == "ask":
        return ScriptedReply(tool_calls=[ScriptedToolCall("ask_user", {"questions": [COLOR]})])
    if text == "delegate":
        call = ScriptedToolCall("delegate", {"agent": "helper", "task": "Count to 300"})
        return ScriptedReply(tool_calls=[call])
    return f"You said: {text}"


def helper_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if last_tool_text(messages) is not None:
        return "Counted."
    return ScriptedReply(tool_calls=[ScriptedToolCall("slow_count", {"steps": 300})])


def make_agent(ctx: AgentChatContext) -> Agent:
    return LeadAgent(
        FunctionModel(lead_reply),
        tools=[
            tool(slow_tool, annotations=LOCAL),
            tool(slow_count, annotations=LOCAL),
            tool(effect, annotations=tool_annotations(open_world_hint=False)),
            *tools_interactive(callback=ctx.ask_user),
        ],
        subagents=[AgentDefinition(name="helper", description="Counts.", tools=["slow_count"])],
        subagent_models={"helper": FunctionModel(helper_reply)},
        permissions=Permissions(
            tool_allowlist=("effect", "slow_tool", "slow_count", "ask_user", "delegate"),
            approval_tools=("effect",),
        ),
        **ctx.agent_options(),
    )


app_ui = ui.page_fillable(agent_chat_ui("agent"), title="stopping")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("agent", make_agent, workspace_root=workspace_root(), persistence=PERSISTENCE)


app = App(app_ui, server)
