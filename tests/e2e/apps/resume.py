"""A reply whose process is killed mid-stream goes on in another process (the run journal).

Run as two processes on one store (``DEPUTY_STORE_URL``) and one conversations folder
(``DEPUTY_CONVERSATIONS_DIR``), behind nginx. The model answers ``go`` with a call to
``record_step("one")`` (a tool that appends a line to ``$DEPUTY_E2E_LEDGER``, outside
the app, so a test counts its executions; not idempotent), then, after its result, with
:data:`REPLY`, streamed slowly (about 8 s): long enough to kill the process mid-reply.
Anything else is answered ``You said: <message>``.

A run's lease lasts ``DEPUTY_E2E_LEASE_TTL`` seconds (default 3, instead of 30): a
killed process's run reads interrupted that much later.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, Permissions, tool, tool_annotations, warm_up
from deputy_shiny.persistence import run_journal
from deputy_shiny.shiny import AgentChatContext, KitPersistence, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from tests.e2e.apps._shared import last_tool_text, last_user_text, numbered_words

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

run_journal.LEASE_TTL = float(os.environ.get("DEPUTY_E2E_LEASE_TTL", "3"))

REPLY = numbered_words(160, "REPLY-END.")
PERSISTENCE = KitPersistence(
    Path(os.environ["DEPUTY_CONVERSATIONS_DIR"]),
    anonymous=True,
    store=os.environ["DEPUTY_STORE_URL"],
)


def record_step(step: str) -> str:
    """Record a step in the ledger (a side effect that must happen once).

    Args:
        step: The step's name.
    """
    with Path(os.environ["DEPUTY_E2E_LEDGER"]).open("a") as ledger:
        ledger.write(f"{step} {os.getpid()}\n")
    return f"recorded {step}"


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    tool_text = last_tool_text(messages)
    if tool_text is not None:
        assert tool_text.startswith("recorded"), tool_text  # it must run, not be refused
        return ScriptedReply(f"After {tool_text}: {REPLY}", chunk_size=8, delay=0.05)
    text = last_user_text(messages) or ""
    if text == "go":
        return ScriptedReply(tool_calls=[ScriptedToolCall("record_step", {"step": "one"})])
    return f"You said: {text}"


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(
        FunctionModel(reply),
        # A local side effect, not safe to repeat (not idempotent).
        tools=[tool(record_step, annotations=tool_annotations(open_world_hint=False))],
        permissions=Permissions(tool_allowlist=("record_step",)),
        **ctx.agent_options(),
    )


app_ui = ui.page_fillable(agent_chat_ui("chat"), title="resume")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("chat", make_agent, persistence=PERSISTENCE)


app = App(app_ui, server)
