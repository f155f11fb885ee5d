"""Delegation in the kit: a LeadAgent's chat beside two subagent panels.

The lead's model: ``delegate <steps>`` hands ``helper`` the task "Count to <steps>
slowly" (with a little HTML in it, which must show as text), then says ``Lead done:
<the delegate tool's answer>``; anything else is echoed. The helper's model calls
``slow_count(steps)`` (``steps`` tenths of a second, in small sleeps), then says
``Counted to <steps>.``

Panel ``team`` shows the delegations to this session (the disclosure policy allows
only the session's own id, the lead's ``delegation_scope`` owner); panel ``spy`` asks
as someone else ("intruder") and must show nothing.
"""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, tool, tool_annotations, warm_up
from deputy_shiny.delegation import AgentDefinition, DelegationDisclosure, LeadAgent
from deputy_shiny.shiny import (
    AgentChatContext,
    agent_chat_server,
    agent_chat_ui,
    subagent_panel_server,
    subagent_panel_ui,
)
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from tests.e2e.apps._shared import last_tool_text, last_user_text, text_of, workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

DELEGATE = re.compile(r"^delegate (\d+)$")
READ_ONLY = tool_annotations(read_only_hint=True, open_world_hint=False)


async def slow_count(steps: int) -> str:
    """Count slowly: ``steps`` tenths of a second."""
    for _ in range(steps):
        await asyncio.sleep(0.1)
    return f"counted {steps}"


def lead_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    tool_text = last_tool_text(messages)
    if tool_text is not None:
        return f"Lead done: {tool_text}"
    text = last_user_text(messages) or ""
    match = DELEGATE.match(text)
    if match:
        task = f"Count to {match[1]} slowly <b>bold</b>"
        call = ScriptedToolCall("delegate", {"agent": "helper", "task": task})
        return ScriptedReply(tool_calls=[call])
    return f"You said: {text}"


def helper_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    task = next((text_of(m) for m in messages if m.get("role") == "user"), "")
    steps = re.search(r"Count to (\d+)", task)
    count = int(steps[1]) if steps else 1
    if last_tool_text(messages) is not None:
        return f"Counted to {count}."
    return ScriptedReply(tool_calls=[ScriptedToolCall("slow_count", {"steps": count})])


app_ui = ui.page_sidebar(
    ui.sidebar(ui.h6("Team"), subagent_panel_ui("team"), ui.h6("Spy"), subagent_panel_ui("spy")),
    agent_chat_ui("agent"),
    title="subagents",
)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    def make_agent(ctx: AgentChatContext) -> Agent:
        return LeadAgent(
            FunctionModel(lead_reply),
            tools=[tool(slow_count, annotations=READ_ONLY)],
            subagents=[AgentDefinition(name="helper", description="Counts.", tools=["slow_count"])],
            subagent_models={"helper": FunctionModel(helper_reply)},
            delegation_scope={"owner": ctx.session_id},
            delegation_disclosure=DelegationDisclosure(
                authorize=lambda who, scope, record: who == scope["owner"]
            ),
            working_dir=ctx.working_dir,
            approval_handler=ctx.approval_handler,
            session_id=ctx.session_id,
        )

    handle = agent_chat_server("agent", make_agent, workspace_root=workspace_root())
    subagent_panel_server("team", lambda: handle.agent, session.id)
    subagent_panel_server("spy", lambda: handle.agent, "intruder")


app = App(app_ui, server)
