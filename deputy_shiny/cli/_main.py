"""``main``: the ``deputy`` command, from its arguments to its exit status.

It checks the command line and the model first (one line and status 2 when they are
wrong), builds the agent the terminal talks to, loads ``--resume``, then runs the task
or the session on one event loop with the Ctrl-C handler installed.

The agent works in the current directory with the standard file tools, sandboxed
``run_bash`` (left out, with a note, where the sandbox is unavailable) and
``ask_user``. Reads run freely; writes and shell commands ask in the terminal first,
in every permission mode, and a hook blocks dangerous shell commands.

Examples:
    >>> main(["run", "hello", "--permissions", "sometimes"])  # says why on stderr
    2
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.text import Text

from ..agent import Agent
from ..errors import DeputyError
from ..hooks_builtin import hook_block_dangerous_bash
from ..models._litellm import warm_up
from ..permissions import Permissions
from ..sandbox import sandbox_unavailable_reason
from ..tools import tool_run_bash, tools_interactive, tools_preset
from ._args import CliOptions, CommandLineError, choose_model, parse_args
from ._prompts import TerminalPrompts, stdin_lines
from ._session import Interrupts, Terminal, banner, chat, exit_status, run_task

__all__ = ["SYSTEM_PROMPT", "build_agent", "main"]

SYSTEM_PROMPT = """\
You are a coding and research assistant working in a terminal, in the user's current
folder. Tools: read, list, search, write and edit files there; run bash commands (in a
sandbox: only this folder, no network) when run_bash is offered; ask the user
multiple-choice questions with ask_user when a choice is theirs. Writes and shell
commands need the user's approval at the terminal. A call that comes back
"Denied: <reason>" did not run: respect it and say what you would need instead.
Answer clearly and briefly."""


def build_agent(
    options: CliOptions, model: str, prompts: TerminalPrompts, working_dir: Path
) -> tuple[Agent, str | None]:
    """The terminal's agent, with ``--resume`` loaded; and a note when bash is left out."""
    bash_missing = sandbox_unavailable_reason()
    agent = Agent(
        model,
        tools=[
            *tools_preset("standard"),
            *([] if bash_missing else [tool_run_bash()]),
            *tools_interactive(callback=prompts.ask_user),
        ],
        system_prompt=SYSTEM_PROMPT,
        working_dir=working_dir,
        permissions=Permissions(
            mode=options.permissions, run_bash=True, approval_effects=("write",)
        ),
        hooks=[hook_block_dangerous_bash()],
        approval_handler=prompts.approve,
    )
    if options.resume is not None:
        try:
            agent.load_session(options.resume)
        except (DeputyError, OSError) as exc:
            raise CommandLineError(f"--resume {options.resume}: {exc}") from None
    note = f"run_bash is off: {bash_missing}" if bash_missing else None
    return agent, note


async def _run(options: CliOptions, agent: Agent, terminal: Terminal) -> int:
    with terminal.interrupts.install(asyncio.get_running_loop()):
        try:
            if options.command == "run":
                assert options.task is not None  # parse_args makes sure
                return exit_status(await run_task(agent, options.task, terminal, options.save))
            return await chat(agent, terminal, options.save)
        finally:
            await agent.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``deputy`` with ``argv`` (default: the process's arguments); the exit status."""
    if not logging.getLogger().handlers:
        # The events already say what failed; the library's warnings would say it twice.
        logging.basicConfig(level=logging.ERROR, format="deputy: %(name)s: %(message)s")
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:  # Ctrl-C before the run's handler was in place, or after
        return 130


def _main(argv: Sequence[str]) -> int:
    console = Console(highlight=False)
    errors = Console(stderr=True, highlight=False)
    try:
        options = parse_args(argv)
        if options.command == "chat":
            # litellm takes seconds to import: let that happen while the user types.
            threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()
        choice = choose_model(options.model)
        terminal = Terminal(console, stdin_lines(), Interrupts())
        agent, bash_note = build_agent(options, choice.model, terminal.prompts, Path.cwd())
    except CommandLineError as exc:
        errors.print(Text(f"deputy: {exc}"), soft_wrap=True)
        return 2
    notes = [n for n in (choice.note, bash_note) if n]
    if options.command == "chat":
        banner(console, choice.model, options.permissions, Path.cwd(), "\n".join(notes) or None)
    else:
        for note in notes:
            errors.print(Text(note, style="yellow"), soft_wrap=True)
    try:
        return asyncio.run(_run(options, agent, terminal))
    except DeputyError as exc:  # a failure outside any run: one line, not a traceback
        errors.print(Text(f"deputy: {exc}", style="red"), soft_wrap=True)
        return 1
