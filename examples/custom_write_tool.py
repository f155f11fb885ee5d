"""A custom write tool behind an approval: ``save_note`` asks before it writes.

Run it with ``shiny run examples/custom_write_tool.py``. The model is ``DEPUTY_MODEL``,
else an offline stand-in (:func:`offline_model`): say *note: buy oat milk*, approve the
dialog, and the note is saved in this session's working directory.

Standard mode denies a custom tool that may modify anything unless it is on
``tool_allowlist``. A non-empty allowlist denies every tool not on it, ``ask_user``
included, so the list names all the tools the agent may use; ``approval_tools`` then
turns the allowed ``save_note`` into a question for the user. A tool's annotations are
what the permissions judge it by, and a hint left unset is taken at its most cautious:
say ``open_world_hint=False`` for a tool that touches nothing outside the app, or it
needs ``web=True`` as well.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, Permissions, tool, tools_interactive
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, ScriptedReply, ScriptedToolCall


def note_tool(folder: Path) -> Any:
    """``save_note`` writes ``<slug>.md`` inside ``folder`` and nowhere else."""

    def save_note(title: str, text: str) -> str:
        """Save a short note as a Markdown file.

        Args:
            title: The note's title (it names the file).
            text: What the note says.
        """
        # The file name comes from the title's letters and digits only: a model cannot
        # steer it out of the folder with "../" or a path of its own.
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40] or "note"
        path = folder / f"{slug}.md"
        path.write_text(f"# {title}\n\n{text}\n", encoding="utf-8")
        return f"Saved {path.name} ({len(text)} characters)."

    return tool(
        save_note,
        annotations={"read_only_hint": False, "destructive_hint": False, "open_world_hint": False},
    )


def offline_model() -> FunctionModel:
    """Without a key: *note: <text>* calls ``save_note``; anything else is echoed."""

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        last = messages[-1]
        if last["role"] == "tool":
            return ScriptedReply(f"Done: {last['content']}")
        text = str(last.get("content") or "")
        if text.lower().startswith("note:"):
            body = text[5:].strip()
            call = ScriptedToolCall("save_note", {"title": body[:30], "text": body})
            return ScriptedReply(tool_calls=[call])
        return ScriptedReply("Say 'note: <text>' and I will save it (after you approve).")

    return FunctionModel(reply)


def make_agent(ctx: AgentChatContext) -> Agent:
    model = os.environ.get("DEPUTY_MODEL") or offline_model()
    return Agent(
        model,
        tools=[note_tool(ctx.working_dir), *tools_interactive(callback=ctx.ask_user)],
        working_dir=ctx.working_dir,
        approval_handler=ctx.approval_handler,
        permissions=Permissions(
            tool_allowlist=["save_note", "ask_user"],  # every tool the agent may use
            approval_tools=["save_note"],  # ... and this one asks first
        ),
    )


app_ui = ui.page_fillable(ui.h4("Notes"), agent_chat_ui("notes"))


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("notes", make_agent)


app = App(app_ui, server)
