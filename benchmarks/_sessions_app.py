"""The app concurrent_sessions.py measures: the kit's modules with a deterministic model.

"stream" streams a long varied reply; "approve" asks to write a file (the approval is
never answered during the benchmark); "slow" runs a sync tool that blocks its worker
thread for 2 seconds, then streams. ``SESSIONS_CHUNKS`` in the environment sets the
stream's length (default 200; the tiny run in ``tests/test_benchmarks.py`` streams fewer).
"""

from __future__ import annotations

import os
import time
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, tool, tool_annotations
from deputy_shiny.permissions import Permissions
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file

CHUNKS = int(os.environ.get("SESSIONS_CHUNKS", "200"))
CHUNK_DELAY = 0.02


def stream_text(n: int = CHUNKS) -> str:
    return "".join(f"w{i:05d} " for i in range(n))  # 7 characters a chunk, all different


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ScriptedReply:
    last = messages[-1]
    if last["role"] == "tool":
        return ScriptedReply(text=stream_text(20), chunk_size=7, delay=CHUNK_DELAY)
    text = str(last["content"])
    if "approve" in text:
        call = ScriptedToolCall("write_file", {"path": "a.txt", "content": "x"})
        return ScriptedReply(tool_calls=[call])
    if "slow" in text:
        return ScriptedReply(tool_calls=[ScriptedToolCall("block", {"seconds": 2.0})])
    return ScriptedReply(text=stream_text(), chunk_size=7, delay=CHUNK_DELAY)


def block(seconds: float) -> str:
    """Block the calling thread (a sync tool runs in a worker thread)."""
    time.sleep(seconds)
    return f"blocked {seconds} s"


def make_agent(ctx: AgentChatContext) -> Agent:
    blocking = tool(block, annotations=tool_annotations(read_only_hint=True, open_world_hint=False))
    return Agent(
        FunctionModel(reply),
        tools=[tool_write_file(), blocking],
        working_dir=ctx.working_dir,
        approval_handler=ctx.approval_handler,
        permissions=Permissions(approval_tools=("write_file",)),
    )


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("chat", make_agent)


app = App(ui.page_fillable(agent_chat_ui("chat")), server)
