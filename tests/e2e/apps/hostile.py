"""A hostile model: ``grep`` makes it search with a catastrophic pattern.

Every session's workspace holds ``bait.txt`` (lines of ``a``s that make the pattern
backtrack without end). ``grep`` calls ``grep_files`` with that pattern, which runs out
the budget set here (``ATTACK_BUDGET``, 8 s instead of the tool's 2 s); the model then
reports what the tool said. Anything else is echoed at once (``You said: <text>``), so a
test can time another session's round trip while one session greps.

Markers: ``grep-start <session>`` when the grep begins, ``grep-end <session>`` when it
ends.
"""

from __future__ import annotations

import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, HookMatcher, Permissions, warm_up
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import files_search, tool_grep_files
from tests.e2e.apps._shared import last_tool_text, last_user_text, mark, workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

CATASTROPHIC = r"(a|aa|aaa)+\1z"
# A freeze (a match holding the GIL) lasts its whole budget: with 8 s it dwarfs a round
# trip on a busy machine (up to ~1.2 s), where the tool's 2 s would not.
ATTACK_BUDGET = 8.0
files_search._BoundedSearch.__init__.__defaults__ = (ATTACK_BUDGET,)


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    tool_text = last_tool_text(messages)
    if tool_text is not None:
        return f"Tool said: {tool_text}"
    text = last_user_text(messages) or ""
    if text == "grep":
        return ScriptedReply(tool_calls=[ScriptedToolCall("grep_files", {"pattern": CATASTROPHIC})])
    return f"You said: {text}"


def make_agent(ctx: AgentChatContext) -> Agent:
    assert ctx.working_dir is not None
    (ctx.working_dir / "bait.txt").write_text(("a" * 45 + "\n") * 50)
    session = ctx.session_id

    def started(*_: object) -> None:
        mark("grep-start", session)

    def ended(*_: object) -> None:
        mark("grep-end", session)

    return Agent(
        FunctionModel(reply),
        tools=[tool_grep_files()],
        working_dir=ctx.working_dir,
        permissions=Permissions(mode="readonly"),
        hooks=[
            HookMatcher("PreToolUse", started),
            HookMatcher("PostToolUse", ended),
            HookMatcher("PostToolUseFailure", ended),
        ],
    )


app_ui = ui.page_fillable(agent_chat_ui("agent"), title="hostile")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("agent", make_agent, workspace_root=workspace_root())


app = App(app_ui, server)
