"""Running in the terminal: one task, or an interactive session of them.

:func:`run_task` runs one task, printing its events, and saves the session when asked.
:func:`chat` reads tasks at a prompt and runs each in turn until ``/exit`` or the end
of input (Ctrl-D); a slash command (``/help``, ``/save``, ``/clear``, ``/compact``,
``/cost``, ``/turns``: :mod:`~deputy_shiny.cli._commands`) is carried out there and
never sent to the model. Ctrl-C stops the run in progress (it ends with ``interrupted``,
the conversation consistent) and never the session; at the prompt it only clears the
line. :class:`Interrupts` is the one SIGINT handler that makes this so, installed for
the whole command so no Ctrl-C ever lands as a ``KeyboardInterrupt`` in the middle of
something.

Examples:
    >>> import asyncio, io
    >>> from rich.console import Console
    >>> from deputy_shiny import Agent
    >>> from deputy_shiny.cli._prompts import ScriptedLines
    >>> from deputy_shiny.testing import ScriptedModel
    >>> out = io.StringIO()
    >>> terminal = Terminal(Console(file=out, width=80), ScriptedLines([]), Interrupts())
    >>> result = asyncio.run(run_task(Agent(ScriptedModel(["Done."])), "Go", terminal))
    >>> result.stop_reason, out.getvalue().splitlines()[0]
    ('complete', 'Done.')
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.text import Text

from ..agent import Agent
from ..errors import DeputyError
from ..events import AgentResult, ToolEndEvent, ToolStartEvent
from ._commands import parse_command, run_command, task_text
from ._printer import EventPrinter, safe_text
from ._prompts import Lines, TerminalPrompts

__all__ = [
    "Interrupts",
    "Terminal",
    "banner",
    "chat",
    "exit_status",
    "run_task",
]

PROMPT = "› "
log = logging.getLogger("deputy_shiny.cli")
"""The ``--debug`` lines: the session's steps (off unless ``--debug`` turns it on)."""


class Interrupts:
    """Where Ctrl-C goes: to the one action the session is doing now (or nowhere).

    :meth:`install` makes it the loop's SIGINT handler; :meth:`to` points it at an
    action for a ``with`` block (stop the run, abandon the prompt).

    Examples:
        >>> seen = []
        >>> interrupts = Interrupts()
        >>> with interrupts.to(lambda: seen.append("stop")):
        ...     interrupts.fire()
        >>> interrupts.fire()  # nothing is listening: nothing happens
        >>> seen
        ['stop']
    """

    def __init__(self) -> None:
        self._action: Callable[[], object] | None = None

    def fire(self) -> None:
        """Run the current action, if any (the SIGINT handler)."""
        if self._action is not None:
            self._action()

    @contextmanager
    def to(self, action: Callable[[], object]) -> Iterator[None]:
        """Send Ctrl-C to ``action`` inside the block, then back to what it was before."""
        previous, self._action = self._action, action
        try:
            yield
        finally:
            self._action = previous

    @contextmanager
    def install(self, loop: asyncio.AbstractEventLoop) -> Iterator[None]:
        """Handle SIGINT on ``loop`` for the block (where the loop can: not on Windows)."""
        try:
            loop.add_signal_handler(signal.SIGINT, self.fire)
        except (NotImplementedError, RuntimeError, ValueError):  # no signals here
            yield
            return
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)


@dataclass
class Terminal:
    """What a session talks to: the console, where lines come from, where Ctrl-C goes;
    whether replies render as Markdown, and whether output is ``verbose``."""

    console: Console
    lines: Lines
    interrupts: Interrupts
    markdown: bool = False
    verbose: bool = False

    @property
    def prompts(self) -> TerminalPrompts:
        """Questions asked on this terminal."""
        return TerminalPrompts(self.console, self.lines)


def exit_status(result: AgentResult | None) -> int:
    """The command's exit status for a run: 0 complete, 130 interrupted, else 1.

    Examples:
        >>> exit_status(None)
        1
    """
    if result is None:
        return 1
    if result.stop_reason == "complete":
        return 0
    return 130 if result.stop_reason == "interrupted" else 1


async def run_task(
    agent: Agent, task: str, terminal: Terminal, save: Path | None = None
) -> AgentResult | None:
    """Run ``task``, printing its events (Ctrl-C stops it); then save to ``save`` if given."""
    printer = EventPrinter(terminal.console, terminal.markdown, terminal.verbose)
    log.debug("run started")
    with terminal.interrupts.to(agent.interrupt):
        async for event in agent.run(task):
            if isinstance(event, ToolStartEvent):
                log.debug("tool_start: %s", event.tool_name)
            elif isinstance(event, ToolEndEvent):
                log.debug("tool_end %s: %s", "error" if event.is_error else "ok", event.tool_name)
            printer.handle(event)
    result = agent.last_run()
    log.debug("run stopped: %s", result.stop_reason if result else "no result")
    printer.finish(result)
    await _save(agent, printer, save)
    return result


async def _save(agent: Agent, printer: EventPrinter, save: Path | None) -> None:
    """Save the session to ``save`` (if given); a failure is a line, not the end."""
    if save is not None:
        try:
            await agent.save_session_async(save)
        except (DeputyError, OSError) as exc:
            printer.line(f"Could not save the session to {save}: {exc}", "red")


async def _prompt(terminal: Terminal) -> str | KeyboardInterrupt | None:
    """One line typed at the prompt, None at end of input, or the Ctrl-C that abandoned it."""
    reading = asyncio.ensure_future(terminal.prompts.ask(PROMPT))
    with terminal.interrupts.to(reading.cancel):
        try:
            return await reading
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the session itself is being cancelled
            return KeyboardInterrupt()


async def chat(agent: Agent, terminal: Terminal, save: Path | None = None) -> int:
    """Prompt, run, repeat, until ``/exit`` or the end of input; the exit status (0).

    A slash command is carried out here, never sent to the model; after one that
    changed the conversation (``/clear``, ``/compact``) the session is saved to ``save``
    as after a run.
    """
    console = terminal.console
    while True:
        line = await _prompt(terminal)
        if isinstance(line, KeyboardInterrupt):
            console.print()
            console.print(Text("(Ctrl-C stops a run; /exit or Ctrl-D leaves)", style="dim"))
            continue
        if line is None:
            return 0
        command = parse_command(line)
        if command is not None:
            log.debug("command: %s", command[0])
            outcome = await run_command(*command, agent, console)
            if outcome == "quit":
                return 0
            if outcome == "changed":
                await _save(agent, EventPrinter(console), save)
            continue
        if line.strip():
            await run_task(agent, task_text(line), terminal, save)
            console.print()


def banner(console: Console, model: str, mode: str, working_dir: Path, note: str | None) -> None:
    """The session's first lines: the model, the permission mode, the folder, how to leave."""
    console.print(Text("deputy", style="bold") + safe_text(f" · {model} · {mode} · {working_dir}"))
    if note:
        console.print(safe_text(note, "yellow"))
    console.print(
        Text(
            "Type a task, or /help for the commands. Ctrl-C stops a run; /exit or Ctrl-D leaves.",
            style="dim",
        ),
        end="\n\n",
    )
