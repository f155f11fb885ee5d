"""What the scenario apps share: reading the conversation, their directories, markers.

The e2e fixtures start every app with ``DEPUTY_E2E_WORKSPACE`` (the kit's
``workspace_root``) and ``DEPUTY_E2E_MARKERS`` (where an app records what happened on
the server, for the test to read) set to fresh directories.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from deputy_shiny import Agent, Permissions
from deputy_shiny.shiny import AgentChatContext
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file

_marker_lock = threading.Lock()

# An ask_user question with two options (the question scenarios ask it).
COLOR = {
    "header": "Color",
    "question": "Which color do you prefer?",
    "multi_select": False,
    "options": [
        {"label": "Red", "description": "Warm and bright"},
        {"label": "Blue", "description": "Cool and calm"},
    ],
}


def _env_dir(name: str) -> Path:
    value = os.environ.get(name)
    path = Path(value) if value else Path(tempfile.mkdtemp(prefix=name.lower() + "-"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def workspace_root() -> Path:
    """The kit's ``workspace_root`` for this app (one fresh dir per test server)."""
    return _env_dir("DEPUTY_E2E_WORKSPACE")


def mark(*words: object) -> None:
    """Append one line ``<time> <words...>`` to ``$DEPUTY_E2E_MARKERS/events.log``."""
    line = " ".join(str(w) for w in (f"{time.time():.3f}", *words))
    with _marker_lock, (_env_dir("DEPUTY_E2E_MARKERS") / "events.log").open("a") as fh:
        fh.write(line + "\n")


def text_of(message: dict[str, Any]) -> str:
    """The text of an OpenAI-format message (string content or text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def last_user_text(messages: list[dict[str, Any]]) -> str | None:
    """The last message's text when the user sent it, else None."""
    if messages and messages[-1].get("role") == "user":
        return text_of(messages[-1]).strip()
    return None


def last_tool_text(messages: list[dict[str, Any]]) -> str | None:
    """The last message's text when it is a tool result, else None."""
    if messages and messages[-1].get("role") == "tool":
        return text_of(messages[-1])
    return None


def numbered_words(count: int, last: str) -> str:
    """``"word 001, word 002, ... <last>"``: varied text (litellm rejects repeated chunks)."""
    return " ".join(f"word {i:03d}," for i in range(1, count + 1)) + " " + last


def long_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """A reply taller than a screen: five paragraphs, then ``End of reply <n>.``"""
    turn = sum(1 for message in messages if message.get("role") == "user")
    paragraphs = [numbered_words(24, f"(paragraph {p})") for p in range(1, 6)]
    return "\n\n".join([*paragraphs, f"End of reply {turn}."])


def long_reply_agent(ctx: AgentChatContext) -> Agent:
    """An agent that answers every message with :func:`long_reply`, at once."""
    return Agent(
        FunctionModel(long_reply),
        working_dir=ctx.working_dir,
        approval_handler=ctx.approval_handler,
    )


WRITE = re.compile(r"^write (\S+) (\S+)$")


def write_reply(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], workspace: Path | None = None
) -> Reply:
    """The write scenarios' model: "write <path> <content>" calls write_file, then reports.

    With ``workspace``, the report names it, so a test can find the session's folder.
    """
    tool_text = last_tool_text(messages)
    if tool_text is not None:
        suffix = f" Workspace: `{workspace}`" if workspace is not None else ""
        return f"Tool said: {tool_text}{suffix}"
    text = last_user_text(messages) or ""
    match = WRITE.match(text)
    if match:
        call = ScriptedToolCall("write_file", {"path": match[1], "content": match[2]})
        return ScriptedReply(tool_calls=[call])
    return f"You said: {text}"


def write_agent(ctx: AgentChatContext) -> Agent:
    """An agent whose writes need approval, answering with :func:`write_reply`."""
    return Agent(
        FunctionModel(write_reply),
        tools=[tool_write_file()],
        working_dir=ctx.working_dir,
        permissions=Permissions(approval_tools=("write_file",)),
        approval_handler=ctx.approval_handler,
    )
