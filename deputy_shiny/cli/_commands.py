"""Slash commands: what a line typed at the session's prompt does when it is a command.

deputy's commands, with its meanings; none of them reaches the model:

=================  ===============================================================
``/help``          the commands
``/save [path]``   save the session (default ``deputy_session_<time>.json``)
``/clear``         forget the conversation (the next task starts afresh)
``/compact [n]``   summarise older turns, keeping the newest ``n`` (default 4)
``/cost``          tokens and cost of the session so far
``/turns``         how many turns the conversation has
``/exit``, ``/q``  leave (``/quit`` too; so does Ctrl-D)
=================  ===============================================================

A line is a command when its first word is ``/`` and a name (``/etc/hosts`` is a path,
so it goes to the model like any task); ``//text`` sends ``/text``. An unknown command
gets a message saying so and what there is, and goes nowhere either.

Examples:
    >>> parse_command("/compact 2"), parse_command("/etc/hosts what is this")
    (('/compact', ['2']), None)
    >>> parse_command("hello"), parse_command("//help me")
    (None, None)
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Literal

from rich.console import Console
from rich.text import Text

from .._util.text import plural
from ..agent import Agent
from ..errors import DeputyError
from ..usage import format_cost
from ._printer import safe_text

__all__ = ["COMMANDS", "Outcome", "parse_command", "run_command", "task_text"]

Outcome = Literal["quit", "continue", "changed"]
"""What the session does next: leave, prompt again, or prompt again after saving
(the conversation changed)."""

COMMANDS: tuple[tuple[str, str], ...] = (
    ("/help", "show these commands"),
    ("/save [path]", "save the session (default: deputy_session_<time>.json here)"),
    ("/clear", "forget the conversation: the next task starts afresh"),
    ("/compact [n]", "summarise older turns, keep the newest n (default 4)"),
    ("/cost", "tokens and cost of the session so far"),
    ("/turns", "how many turns the conversation has"),
    ("/exit, /quit, /q", "leave (Ctrl-D too)"),
)
DEFAULT_KEEP = 4
_COMMAND = re.compile(r"/([A-Za-z][\w-]*)(?:\s+(.*))?", re.DOTALL)


def parse_command(line: str) -> tuple[str, list[str]] | None:
    """``line`` as a command (its lower-case name and arguments), or None for a task."""
    match = _COMMAND.fullmatch(line.strip())
    if match is None:
        return None
    return f"/{match.group(1).lower()}", (match.group(2) or "").split()


def task_text(line: str) -> str:
    """The task a line that is not a command sends: ``//x`` sends ``/x``.

    Examples:
        >>> task_text("  //help  "), task_text("list files")
        ('/help', 'list files')
    """
    text = line.strip()
    return text[1:] if text.startswith("//") else text


async def run_command(name: str, arguments: list[str], agent: Agent, console: Console) -> Outcome:
    """Carry out the command ``name`` on ``agent``, telling ``console`` what happened."""
    if name in ("/exit", "/quit", "/q"):
        return "quit"
    if name == "/help":
        _help(console)
    elif name == "/save":
        await _save(agent, console, arguments)
    elif name == "/clear":
        agent.set_turns([])
        _say(console, "Conversation cleared: the next task starts afresh.", "green")
        return "changed"
    elif name == "/compact":
        return await _compact(agent, console, arguments)
    elif name == "/cost":
        _cost(agent, console)
    elif name == "/turns":
        _turns(agent, console)
    else:
        _say(console, f"Unknown command: {name}. Type /help for the commands.", "yellow")
    return "continue"


def _say(console: Console, text: str, style: str = "") -> None:
    console.print(safe_text(text, style), soft_wrap=True)


def _help(console: Console) -> None:
    console.print(Text("Commands", style="bold"))
    width = max(len(usage) for usage, _ in COMMANDS)
    for usage, meaning in COMMANDS:
        console.print(Text("  ") + Text(usage.ljust(width), style="bold") + Text(f"  {meaning}"))
    console.print(Text("Anything else is a task for the agent (//x sends /x).", style="dim"))


async def _save(agent: Agent, console: Console, arguments: list[str]) -> None:
    path = (
        Path(arguments[0])
        if arguments
        else Path(time.strftime("deputy_session_%Y%m%d_%H%M%S.json"))
    )
    try:
        await agent.save_session_async(path)
    except (DeputyError, OSError) as exc:
        _say(console, f"Could not save the session to {path}: {exc}", "red")
        return
    _say(console, f"Session saved to {path} (deputy --resume {path} continues it).", "green")


async def _compact(agent: Agent, console: Console, arguments: list[str]) -> Outcome:
    keep = DEFAULT_KEEP
    if arguments:
        if arguments[0].isdigit() and int(arguments[0]) >= 1:
            keep = int(arguments[0])
        else:
            _say(console, f"Not a number of turns: {arguments[0]!r}; keeping {keep}.", "yellow")
    try:
        record = await agent.compact_async(keep_last=keep)
    except DeputyError as exc:
        _say(console, f"Compaction failed: {exc}", "red")
        return "continue"
    if record is None or record.turns_removed == 0:
        _say(console, f"Nothing to compact: the newest {plural(keep, 'turn')} are all there is.")
        return "continue"
    _say(
        console,
        f"Compacted: {plural(record.turns_removed, 'older turn')} summarised "
        f"({record.tokens_before:,} → {record.tokens_after:,} tokens); kept the newest {keep}.",
        "green",
    )
    return "changed"


def _cost(agent: Agent, console: Console) -> None:
    cost = agent.cost()
    console.print(Text("Cost of this session", style="bold"))
    for label, value in (
        ("Input tokens", f"{cost.input_tokens:,}"),
        ("Output tokens", f"{cost.output_tokens:,}"),
        ("Cached tokens", f"{cost.cached_tokens:,}"),
        ("Total cost", format_cost(agent.usage())),
    ):
        console.print(Text(f"  {label}: ") + Text(value, style="bold"))
    if not cost.complete:
        console.print(
            Text(f"  ({plural(cost.missing, 'request')} with no known price)", style="dim")
        )


def _turns(agent: Agent, console: Console) -> None:
    turns = len(agent.get_turns())
    in_context = len(agent.get_context_turns())
    line = f"The conversation has {plural(turns, 'turn')}"
    if in_context != turns:
        line += f" ({in_context} in the model's context, the rest summarised)"
    _say(console, line + ".")
