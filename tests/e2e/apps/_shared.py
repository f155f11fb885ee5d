"""What the scenario apps share: reading the conversation, their directories, markers.

The e2e fixtures start every app with ``DEPUTY_E2E_WORKSPACE`` (the kit's
``workspace_root``) and ``DEPUTY_E2E_MARKERS`` (where an app records what happened on
the server, for the test to read) set to fresh directories.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_marker_lock = threading.Lock()


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
