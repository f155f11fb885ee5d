"""Cross-site scripting: a model (and its tools, hooks, subagents, MCP servers) that puts
script into every field the kit shows, with saved conversations (``KitPersistence``).

Every string below carries :data:`PAYLOAD`: markup that would set ``window.__xss`` (and
open a dialog) if it ever became elements in the page. The model, by the user's text:

- ``path``: ``read_file`` on ``../<PAYLOAD>`` (the path rule denies it, quoting the path);
- ``hook``: ``echo`` with the payload; a PreToolUse hook denies it, quoting the input;
- ``fail``: ``explode``, a tool whose error message is the payload;
- ``name``: a call to a tool whose *name* is the payload (no such tool);
- ``args``: ``echo`` with the payload in each argument (it runs: its output is the payload);
- ``crash``: the model request fails with the payload as its message;
- ``text``: a reply of payload text and a ``javascript:`` markdown link;
- ``write``: ``write_file`` of the payload into ``xss-note.txt`` (needs approval);
- ``ask``: ``ask_user`` with the payload in the header, question and options;
- ``delegate``: hands the ``helper`` subagent the payload as its task (it answers with the
  payload); ``delegate-name``: delegates to an agent whose name is the payload.

Configured MCP server ``hostile`` exits at once, writing the payload to its stderr (which
the connection's error quotes). Conversations live under ``DEPUTY_CONVERSATIONS_DIR``. Markers:
``wrote <session>`` when ``xss-note.txt`` is written.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, HookMatcher, Permissions, tool, tool_annotations, warm_up
from deputy_shiny.delegation import AgentDefinition, DelegationDisclosure, LeadAgent
from deputy_shiny.hooks import HookResultPreToolUse
from deputy_shiny.shiny import (
    AgentChatContext,
    KitPersistence,
    agent_chat_server,
    agent_chat_ui,
    mcp_panel_server,
    mcp_panel_ui,
    subagent_panel_server,
    subagent_panel_ui,
)
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_read_file, tool_write_file, tools_interactive
from tests.e2e.apps._shared import last_tool_text, last_user_text, mark, text_of

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

# No single quotes or backslashes: quoted by repr() (the path rule) it stays valid script,
# so if it ran it would set the flag rather than fail with a syntax error.
PAYLOAD = (
    '<img src=x onerror="window.__xss=1;alert(1)">'
    "<script>window.__xss=2</script>"
    '"><svg onload="window.__xss=3;alert(3)"></svg>'
    '<a href="javascript:window.__xss=4">js-link</a>'
)
# Markdown links to script: inline, by reference, and spelled with an entity.
MD_LINK = (
    "[md-link](javascript:window.__xss=5) [ref-link][r] "
    "[entity-link](jav&#x61;script:window.__xss=7)"
    "\n\n[r]: javascript:window.__xss=6"
)

# A server that dies at once, its last words the payload (the error quotes them).
HOSTILE_MCP = f"import sys; sys.stderr.write({PAYLOAD!r}); sys.exit(3)"
MCP_CONFIG = {"mcpServers": {"hostile": {"command": sys.executable, "args": ["-c", HOSTILE_MCP]}}}

CONVERSATIONS = KitPersistence(
    os.environ.get("DEPUTY_CONVERSATIONS_DIR") or tempfile.mkdtemp(prefix="xss-conversations-")
)

LOCAL = tool_annotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=False, idempotent_hint=True
)


def echo(text: str, note: str = "") -> str:
    """Return the text (stands in for any tool whose output a web page wrote).

    Args:
        text: The text to return.
        note: More text to return.
    """
    return text + note


def explode(text: str) -> str:
    """Fail with the text as the error message.

    Args:
        text: The error message.
    """
    raise ValueError(text)


def _call(name: str, arguments: dict[str, Any]) -> ScriptedReply:
    return ScriptedReply(tool_calls=[ScriptedToolCall(name, arguments)])


def lead_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    tool_text = last_tool_text(messages)
    if tool_text is not None:
        return "Tool done. END-TOOL"
    text = last_user_text(messages) or ""
    option = {"label": PAYLOAD[:40], "description": PAYLOAD}
    question = {
        "header": "<b>h</b>",
        "question": PAYLOAD,
        "options": [option, {"label": "plain", "description": "plain"}],
        "multi_select": False,
    }
    calls: dict[str, Reply] = {
        "path": _call("read_file", {"path": "../" + PAYLOAD}),
        "hook": _call("echo", {"text": PAYLOAD}),
        "fail": _call("explode", {"text": PAYLOAD}),
        "name": _call(PAYLOAD, {"text": PAYLOAD}),
        "args": _call("echo", {"text": "args " + PAYLOAD, "note": PAYLOAD}),
        "crash": RuntimeError(PAYLOAD),
        "text": ScriptedReply(f"Text START {PAYLOAD} {MD_LINK}\n\nEND-TEXT", chunk_size=32),
        "write": _call("write_file", {"path": "xss-note.txt", "content": PAYLOAD}),
        "ask": _call("ask_user", {"questions": [question]}),
        "delegate": _call("delegate", {"agent": "helper", "task": PAYLOAD}),
        "delegate-name": _call("delegate", {"agent": PAYLOAD, "task": PAYLOAD}),
    }
    return calls.get(text, f"You said: {text}")


def helper_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    task = next((text_of(m) for m in messages if m.get("role") == "user"), "")
    return f"Helper says {task}"


def deny_echo_hook(tool_name: str, tool_input: dict[str, Any], context: Any) -> Any:
    # A hook whose reason quotes the model's input, as many real hooks do.
    if tool_input.get("text", "").startswith("args "):
        return None
    return HookResultPreToolUse(permission="deny", reason=f"echo refused {tool_input['text']}")


app_ui = ui.page_sidebar(
    ui.sidebar(
        ui.h6("Team"),
        subagent_panel_ui("team"),
        ui.h6("MCP servers"),
        mcp_panel_ui("mcp"),
    ),
    agent_chat_ui("agent"),
    title="xss",
)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    def make_agent(ctx: AgentChatContext) -> Agent:
        session_id = ctx.session_id

        def wrote(tool_name: str, tool_input: dict[str, Any], context: Any, output: Any) -> None:
            mark("wrote", session_id, json.dumps(tool_input.get("path")))

        return LeadAgent(
            FunctionModel(lead_reply),
            tools=[
                tool_read_file(),
                tool_write_file(),
                tool(echo, annotations=LOCAL),
                tool(explode, annotations=LOCAL),
                *tools_interactive(callback=ctx.ask_user),
            ],
            subagents=[AgentDefinition(name="helper", description="Helps.", tools=[])],
            subagent_models={"helper": FunctionModel(helper_reply)},
            delegation_scope={"owner": "me"},
            delegation_disclosure=DelegationDisclosure(authorize=lambda who, scope, rec: True),
            working_dir=ctx.working_dir,
            approval_handler=ctx.approval_handler,
            approval_dir=ctx.approval_dir,
            agent_id=ctx.agent_id,
            session_id=ctx.session_id,
            permissions=Permissions(approval_tools=("write_file",)),
            hooks=[
                HookMatcher("PreToolUse", deny_echo_hook, pattern="^echo$"),
                HookMatcher("PostToolUse", wrote, pattern="^write_file$"),
            ],
        )

    handle = agent_chat_server(
        "agent", make_agent, mcp_config=MCP_CONFIG, persistence=CONVERSATIONS
    )
    subagent_panel_server("team", lambda: handle.agent, "me")
    mcp_panel_server("mcp", handle)


app = App(app_ui, server)
