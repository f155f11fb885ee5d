"""What a running tool may know about the call: the agent's directories and identity.

The engine sets a :class:`ToolContext` in a ``contextvars.ContextVar`` around each tool
call (``asyncio.to_thread`` copies it into the worker thread), so built-in tools find
the working directory and the directories they may touch without an extra argument in
their JSON schema. Called outside an agent, a tool sees the default context: the
current directory, for reading and writing.

Example:
    >>> from deputy_shiny.tools import current_tool_context
    >>> current_tool_context().tool_name is None
    True
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ToolContext:
    """The context of one tool call.

    Attributes:
        working_dir: Relative paths resolve against it.
        read_roots: Directories file tools may read (already resolved).
        write_roots: Directories file tools may write (empty: no writes).
        agent_id / session_id / run_id / call_id / tool_name: Who is calling.
        run_context: The run's JSON-compatible context.
    """

    working_dir: Path
    read_roots: tuple[Path, ...]
    write_roots: tuple[Path, ...]
    agent_id: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    call_id: str | None = None
    tool_name: str | None = None
    run_context: dict[str, Any] = field(default_factory=dict)


def default_tool_context() -> ToolContext:
    """The context outside an agent: the current directory for reads and writes."""
    cwd = Path(os.getcwd()).resolve()
    return ToolContext(working_dir=cwd, read_roots=(cwd,), write_roots=(cwd,))


_current: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar(
    "deputy_shiny_tool_context", default=None
)


def current_tool_context() -> ToolContext:
    """The context of the tool call in progress (or :func:`default_tool_context`)."""
    return _current.get() or default_tool_context()


@contextmanager
def tool_context(context: ToolContext) -> Iterator[ToolContext]:
    """Set the context for the calls made inside the ``with`` block."""
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)
