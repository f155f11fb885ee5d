"""``main``: the ``deputy`` command, from its arguments to its exit status.

It checks the command line and the model first (one line and status 2 when they are
wrong), builds the agent the terminal talks to, loads ``--resume``, then runs the task
or the session on one event loop with the Ctrl-C handler installed.

The agent works in the current directory (``--dir``) with the tools of ``--tools``
(default ``standard``: the file tools, plus sandboxed ``run_bash`` in the terminal),
then ``ask_user`` (not with ``--no-ask``) and the tools of MCP servers (``--mcp``);
code tools are left out, with a note, where the sandbox is unavailable. Reads run
freely; writes, code and the web ask in the terminal first, in every permission
mode, and a hook blocks dangerous shell commands. Each run may make
``--max-requests`` model requests (25) and cost up to ``--max-cost``.

Examples:
    >>> main(["run", "hello", "--permissions", "sometimes"])  # says why on stderr
    2
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.text import Text

from .._util.text import plural
from ..agent import Agent
from ..errors import DeputyError
from ..hooks_builtin import hook_block_dangerous_bash
from ..mcp import load_mcp_config
from ..models import ModelLike
from ..models._litellm import warm_up
from ..models.demo import TERMINAL_ROLE
from ..permissions import Permissions
from ..sandbox import sandbox_unavailable_reason
from ..tools import Tool, tool_run_bash, tools_interactive, tools_preset
from ..usage import UsageLimits
from ._args import CliOptions, CommandLineError, choose_model, parse_args
from ._printer import safe_text
from ._prompts import TerminalPrompts, stdin_lines
from ._session import Interrupts, Terminal, banner, chat, exit_status, run_task

__all__ = ["SYSTEM_PROMPT", "build_agent", "main"]

SYSTEM_PROMPT = f"""\
{TERMINAL_ROLE}, in the user's current
folder. Tools: read, list, search, write and edit files there; run bash commands (in a
sandbox: only this folder, no network) when run_bash is offered; ask the user
multiple-choice questions with ask_user when a choice is theirs. Writes and shell
commands need the user's approval at the terminal. A call that comes back
"Denied: <reason>" did not run: respect it and say what you would need instead.
Answer clearly and briefly."""


CODE_TOOLS = ("run_bash", "run_python")
"""The tools that run code: in the sandbox, so left out where there is none."""


def terminal_tools(options: CliOptions, prompts: TerminalPrompts) -> tuple[list[Tool], str | None]:
    """The tools of ``--tools`` and ``--no-ask``; and a note when code tools are left out.

    Examples:
        >>> import io
        >>> from rich.console import Console
        >>> from deputy_shiny.cli._prompts import ScriptedLines
        >>> prompts = TerminalPrompts(Console(file=io.StringIO()), ScriptedLines([]))
        >>> tools, _ = terminal_tools(parse_args(["--tools", "minimal", "--no-ask"]), prompts)
        >>> [t.name for t in tools]
        ['read_file', 'read_markdown', 'list_files', 'glob_files', 'grep_files']
    """
    # ask_user is the terminal's own (it asks here), so a preset's is replaced.
    tools = [t for t in tools_preset(options.tools) if t.name != "ask_user"]
    if options.tools == "standard":
        tools.append(tool_run_bash())  # a terminal agent's shell: sandboxed, asked first
    missing = sandbox_unavailable_reason()
    left_out = [t.name for t in tools if t.name in CODE_TOOLS] if missing else []
    tools = [t for t in tools if t.name not in left_out]
    if not options.no_ask:
        tools.extend(tools_interactive(callback=prompts.ask_user))
    verb = "is" if len(left_out) == 1 else "are"
    note = f"{' and '.join(left_out)} {verb} off: {missing}" if left_out else None
    return tools, note


def build_agent(
    options: CliOptions, model: ModelLike, prompts: TerminalPrompts, working_dir: Path
) -> tuple[Agent, str | None]:
    """The terminal's agent, with ``--resume`` loaded; and a note when code tools are
    left out. The MCP options are checked here and loaded by :func:`load_mcp`."""
    tools, note = terminal_tools(options, prompts)
    if options.mcp:
        _check_mcp(options)
    agent = Agent(
        model,
        tools=tools,
        system_prompt=options.system_prompt or SYSTEM_PROMPT,
        usage_limits=UsageLimits(max_requests=options.max_requests, max_cost_usd=options.max_cost),
        working_dir=working_dir,
        permissions=Permissions(
            mode=options.permissions,
            run_bash=True,
            run_python=True,
            web=True,  # only --tools full offers web tools; each call asks first
            # Every shell and code call asks the person at the terminal first, so an
            # install is theirs to approve (as in deputy's CLI); the sandbox has no network.
            install_packages=True,
            approval_effects=("write", "open_world"),
        ),
        hooks=[hook_block_dangerous_bash()],
        approval_handler=prompts.approve,
    )
    if options.resume is not None:
        try:
            agent.load_session(options.resume)
        except (DeputyError, OSError) as exc:
            raise CommandLineError(f"--resume {options.resume}: {exc}") from None
    return agent, note


def _check_mcp(options: CliOptions) -> None:
    """The MCP configuration reads, and names every ``--mcp-server``."""
    flag = f"--mcp-config {options.mcp_config}" if options.mcp_config else "--mcp"
    try:
        config = load_mcp_config(options.mcp_config)
    except (DeputyError, OSError) as exc:
        raise CommandLineError(f"{flag}: {exc}") from None
    unknown = [n for n in options.mcp_server if n not in config.names()]
    if unknown:
        known = ", ".join(config.names()) or "none"
        raise CommandLineError(
            f"--mcp-server {', '.join(unknown)}: not in the MCP config (its servers: {known})"
        )


async def load_mcp(options: CliOptions, agent: Agent, console: Console) -> None:
    """Load the MCP servers' tools into ``agent`` (``--mcp``, ``--mcp-config``,
    ``--mcp-server``), saying what came of it."""
    if not options.mcp:
        return
    with warnings.catch_warnings():  # a server that fails: the note below says it once
        warnings.simplefilter("ignore")
        await agent.load_mcp_async(options.mcp_config, servers=list(options.mcp_server) or None)
    record = agent.mcp_status()[-1]
    if record.error or record.status != "connected":
        problem = record.error or f"no tools ({record.status})"
        console.print(safe_text(f"MCP: {problem}", "yellow"), soft_wrap=True)
    if record.tools:
        names = ", ".join(record.tools)
        console.print(safe_text(f"MCP: {plural(len(record.tools), 'tool')}: {names}", "dim"))


async def _run(options: CliOptions, agent: Agent, terminal: Terminal) -> int:
    with terminal.interrupts.install(asyncio.get_running_loop()):
        try:
            await load_mcp(options, agent, terminal.console)
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


def debug_logging(options: CliOptions) -> logging.Handler | None:
    """``--debug``: the library's and the session's debug lines, timestamped, on standard
    error or in ``--debug-file`` (appended); the handler, to close at the end."""
    if not options.debug:
        return None
    if options.debug_file is not None:
        handler: logging.Handler = logging.FileHandler(options.debug_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(
            "%(asctime)s [deputy-debug] %(name)s: %(message)s", datefmt="%Y-%m-%d %H:%M:%S"
        )
    )
    library = logging.getLogger("deputy_shiny")
    library.setLevel(logging.DEBUG)
    library.addHandler(handler)
    library.propagate = False  # not again through the root's error-only handler
    return handler


def _main(argv: Sequence[str]) -> int:
    errors = Console(stderr=True, highlight=False)
    try:
        options = parse_args(argv)
    except CommandLineError as exc:
        errors.print(Text(f"deputy: {exc}"), soft_wrap=True)
        return 2
    library = logging.getLogger("deputy_shiny")
    level, propagate = library.level, library.propagate
    handler = debug_logging(options)
    try:
        return _session(options, errors)
    finally:
        if handler is not None:
            # As it was: a process that runs the command again (a test, an embedding app)
            # keeps its own logging, and its records still reach the root's handlers.
            library.removeHandler(handler)
            library.setLevel(level)
            library.propagate = propagate
            handler.close()


def _session(options: CliOptions, errors: Console) -> int:
    # --no-color: no colour and no style at all; Markdown is rendered only on a terminal.
    console = Console(highlight=False, color_system=None if options.no_color else "auto")
    if options.no_color:
        errors = Console(stderr=True, highlight=False, color_system=None)
    working_dir = options.dir or Path.cwd()
    try:
        if options.command == "chat":
            # litellm takes seconds to import: let that happen while the user types.
            threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()
        choice = choose_model(options.model)
        markdown = console.is_terminal and not options.no_color
        terminal = Terminal(console, stdin_lines(), Interrupts(), markdown, options.verbose)
        agent, bash_note = build_agent(options, choice.model, terminal.prompts, working_dir)
    except CommandLineError as exc:
        errors.print(Text(f"deputy: {exc}"), soft_wrap=True)
        return 2
    logging.getLogger("deputy_shiny.cli").debug(
        "agent: model %s, tools %s, permissions %s, folder %s",
        choice.model,
        options.tools,
        options.permissions,
        working_dir,
    )
    notes = [n for n in (choice.note, bash_note) if n]
    if options.command == "chat":
        banner(console, choice.model, options.permissions, working_dir, "\n".join(notes) or None)
    else:
        for note in notes:
            errors.print(Text(note, style="yellow"), soft_wrap=True)
    try:
        return asyncio.run(_run(options, agent, terminal))
    except DeputyError as exc:  # a failure outside any run: one line, not a traceback
        errors.print(Text(f"deputy: {exc}", style="red"), soft_wrap=True)
        return 1
