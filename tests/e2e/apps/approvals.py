"""Approvals: ``write_file`` always needs the user's approval.

The user's message ``write <path> <content>`` makes the model call
``write_file(path, content)``; after the tool result the model says
``Tool said: <result> Workspace: <working dir>``, so the test sees what the model was
told and where the session's workspace is. ``flood <n>`` makes n ``write_file`` calls
in one response; ``rawwrite <name>`` writes content a browser would normalize
(``RAW_LONG``, ``RAW_SHORT``); ``tags`` calls ``tag(names=["draft", "review"])``, a
tool with a list argument (edited as JSON), which also needs approval. Anything else
is echoed.

Markers (``$DEPUTY_E2E_MARKERS/events.log``): ``approval-wait <session> <path>`` when a
call starts waiting for approval, ``approval-ended <session> <path> <outcome>`` when
that wait ends (a decision or an exception), ``run-stop <session> <reason>`` when a run
ends (the agent's Stop hook).
"""

from __future__ import annotations

import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import (
    Agent,
    ApprovalDecision,
    ApprovalRequest,
    HookMatcher,
    tool,
    tool_annotations,
    warm_up,
)
from deputy_shiny.hooks import HookContext
from deputy_shiny.permissions import Permissions
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file
from tests.e2e.apps._shared import (
    last_tool_text,
    last_user_text,
    mark,
    workspace_root,
    write_reply,
)

# What "rawwrite <name>" writes: a browser shows these normalized (a textarea drops
# the leading newline and turns CRLF into LF; an input strips CR).
RAW_LONG = "\nfirst\r\nsecond\r\n"
RAW_SHORT = "a\rb"

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()


_LOCAL = tool_annotations(read_only_hint=True, open_world_hint=False)


def tag(names: list[str]) -> str:
    """Tag the draft.

    Args:
        names: The tags.
    """
    return "Tagged: " + ", ".join(names)


def make_agent(ctx: AgentChatContext) -> Agent:
    session = ctx.session_id
    working_dir = ctx.working_dir

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        text = last_user_text(messages) or ""
        if text.startswith("flood "):  # "flood <n>": n writes in one response
            count = int(text.split()[1])
            return ScriptedReply(
                tool_calls=[
                    ScriptedToolCall("write_file", {"path": f"flood-{i}.txt", "content": "x"})
                    for i in range(count)
                ]
            )
        if text.startswith("rawwrite "):  # content a browser would normalize
            name = text.split()[1]
            return ScriptedReply(
                tool_calls=[
                    ScriptedToolCall("write_file", {"path": f"{name}-1.txt", "content": RAW_LONG}),
                    ScriptedToolCall("write_file", {"path": f"{name}-2.txt", "content": RAW_SHORT}),
                ]
            )
        if text == "tags" and last_tool_text(messages) is None:
            return ScriptedReply(
                tool_calls=[ScriptedToolCall("tag", {"names": ["draft", "review"]})]
            )
        return write_reply(messages, tools, workspace=working_dir)

    async def approval_handler(request: ApprovalRequest) -> ApprovalDecision:
        path = request.arguments.get("path")
        mark("approval-wait", session, path)
        assert ctx.approval_handler is not None  # this app has no persistence
        try:
            decision = await ctx.approval_handler(request)
        except BaseException as exc:
            mark("approval-ended", session, path, type(exc).__name__)
            raise
        mark("approval-ended", session, path, "approved" if decision.approved else "denied")
        return decision

    def on_stop(context: HookContext) -> None:
        mark("run-stop", session, context.reason)

    return Agent(
        FunctionModel(reply),
        tools=[tool_write_file(), tool(tag, annotations=_LOCAL)],
        working_dir=working_dir,
        permissions=Permissions(approval_tools=("write_file", "tag")),
        approval_handler=approval_handler,
        hooks=[HookMatcher("Stop", on_stop)],
    )


app_ui = ui.page_fillable(agent_chat_ui("agent"), title="approvals")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("agent", make_agent, workspace_root=workspace_root())


app = App(app_ui, server)
