"""The ``deputy`` command line: its flags, checked into one frozen :class:`CliOptions`.

Two forms: ``deputy run TASK [flags]`` runs one task; ``deputy [chat] [flags]`` opens an
interactive session. A bad flag or value, an unknown model, a file that is not there
(``--resume``, ``--system-prompt-file``, ``--mcp-config``) or a ``--dir`` that is no
folder is a :class:`CommandLineError`, which ``main`` prints as one line and exits with
status 2 (argparse's own convention), never a traceback.

The flags are deputy's (its ``exec/deputy``), with its meanings: ``--tools`` (a preset),
``--max-requests`` and ``--max-cost`` (each run's limits), ``--system-prompt`` or
``--system-prompt-file``, ``--no-ask`` (no ``ask_user``), ``--mcp`` / ``--mcp-config``
/ ``--mcp-server`` (load MCP servers' tools), ``--dir`` (the working folder),
``--verbose``, ``--no-color``, ``--debug`` / ``--debug-file``; plus ``--model``,
``--permissions``, ``--resume`` and ``--save``.

The model: ``--model``, else ``DEPUTY_MODEL``, else the offline demo model
``deputy/demo``. A model named with ``--model`` must be usable (a known provider, its
API key set), or the command stops; one that only ``DEPUTY_MODEL`` names falls back to
the demo with a note saying why, as the reference app does.

Examples:
    >>> options = parse_args(["run", "list files", "--permissions", "readonly"])
    >>> options.command, options.task, options.permissions, options.model
    ('run', 'list files', 'readonly', None)
    >>> parse_args(["--bogus"])
    Traceback (most recent call last):
    ...
    deputy_shiny.errors.CommandLineError: unrecognized arguments: --bogus
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field

from ..errors import CommandLineError, DeputyError
from ..models import DEMO_MODEL, ChatModel, missing_credentials
from ..models._litellm import get_litellm, is_registered
from ..permissions import MODES
from ..tools import PRESETS

__all__ = ["CliOptions", "CommandLineError", "ModelChoice", "choose_model", "parse_args"]

MODEL_ENV = "DEPUTY_MODEL"
DEFAULT_MAX_REQUESTS = 25
"""Model requests a run may make unless ``--max-requests`` says otherwise (deputy's)."""


class CliOptions(BaseModel):
    """What the command line asked for.

    Attributes:
        command: ``run`` (one task) or ``chat`` (an interactive session).
        task: The task of ``run``; None for ``chat``.
        model: ``--model``, or None to take ``DEPUTY_MODEL`` or the demo.
        permissions: The permission mode (``standard``, ``plan``, ``readonly``, ``full``).
        resume: A saved session to continue, or None.
        save: Where to save the session after each run, or None.
        tools: The tool preset (``minimal``, ``standard``, ``data``, ``dev``, ``full``).
        max_requests: Model requests each run may make.
        max_cost: The cost in US dollars each run may reach, or None (no limit).
        system_prompt: The system prompt (``--system-prompt``, or the file's text), or
            None for the terminal's own.
        no_ask: True to leave out ``ask_user`` (nobody answers questions).
        mcp: True to load MCP servers' tools (``--mcp``, or ``--mcp-config`` or
            ``--mcp-server`` given).
        mcp_config: The MCP configuration to read, or None for the default one
            (``$DEPUTY_MCP_CONFIG``, else ``~/.config/mcptools/config.json``).
        mcp_server: The servers to load (none named: all of the configuration's).
        dir: The working folder (resolved); None for the current one.
        verbose: Show tool calls, results and each request in full.
        no_color: Print plain text: no colour, no styles, Markdown as written.
        debug: Write debug lines (to ``debug_file``, else standard error).
        debug_file: Where debug lines go, or None.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: Literal["run", "chat"]
    task: str | None = None
    model: str | None = None
    permissions: str = "standard"
    resume: Path | None = None
    save: Path | None = None
    tools: str = "standard"
    max_requests: int = Field(default=DEFAULT_MAX_REQUESTS, ge=1)
    max_cost: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    system_prompt: str | None = None
    no_ask: bool = False
    mcp: bool = False
    mcp_config: Path | None = None
    mcp_server: tuple[str, ...] = ()
    dir: Path | None = None
    verbose: bool = False
    no_color: bool = False
    debug: bool = False
    debug_file: Path | None = None


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise CommandLineError(message)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        help=f"a litellm model string (default: ${MODEL_ENV}, else the offline {DEMO_MODEL})",
    )
    parser.add_argument(
        "--permissions",
        choices=MODES,
        default="standard",
        help="the permission mode (default: standard: reads run, writes and bash ask first)",
    )
    parser.add_argument("--resume", type=Path, metavar="FILE", help="continue a saved session")
    parser.add_argument(
        "--save", type=Path, metavar="FILE", help="save the session to FILE after each run"
    )
    parser.add_argument(
        "-t",
        "--tools",
        choices=list(PRESETS),
        default="standard",
        help="the tool preset (default: standard: the file tools, and run_bash here)",
    )
    parser.add_argument(
        "-n",
        "--max-requests",
        type=_whole_number,
        default=DEFAULT_MAX_REQUESTS,
        metavar="N",
        help=f"model requests a run may make (default: {DEFAULT_MAX_REQUESTS})",
    )
    parser.add_argument(
        "-c", "--max-cost", type=_dollars, metavar="USD", help="the cost a run may reach"
    )
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument("-y", "--system-prompt", metavar="TEXT", help="the system prompt")
    prompt.add_argument(
        "-f", "--system-prompt-file", type=Path, metavar="FILE", help="read the system prompt"
    )
    parser.add_argument(
        "-A", "--no-ask", action="store_true", help="no ask_user tool: the agent asks nothing"
    )
    parser.add_argument(
        "-M",
        "--mcp",
        action="store_true",
        help="load the tools of the MCP servers in the default config "
        "($DEPUTY_MCP_CONFIG, else ~/.config/mcptools/config.json)",
    )
    parser.add_argument(
        "-C",
        "--mcp-config",
        type=Path,
        metavar="FILE",
        help='load the tools of the MCP servers in FILE ({"mcpServers": {...}})',
    )
    parser.add_argument(
        "--mcp-server",
        action="append",
        default=[],
        metavar="NAME",
        help="load only this server (repeatable, or comma-separated; default: all)",
    )
    parser.add_argument(
        "-d", "--dir", type=Path, metavar="DIR", help="the working folder (default: this one)"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show calls, results and requests whole"
    )
    parser.add_argument("--no-color", action="store_true", help="plain text: no colour")
    parser.add_argument("-g", "--debug", action="store_true", help="debug lines on stderr")
    parser.add_argument("-G", "--debug-file", type=Path, metavar="FILE", help="debug lines to FILE")


def _whole_number(value: str) -> int:
    """``--max-requests``: a whole number of at least 1."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of at least 1")
    return number


def _dollars(value: str) -> float:
    """``--max-cost``: a positive amount of US dollars (a leading ``$`` is allowed)."""
    try:
        amount = float(value.strip().removeprefix("$"))
    except ValueError:
        amount = float("nan")
    if not amount > 0 or amount == float("inf"):  # NaN fails the comparison too
        raise argparse.ArgumentTypeError(f"{value!r} is not an amount of US dollars above 0")
    return amount


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``deputy``: the ``run`` and ``chat`` subcommands, ``chat`` implied."""
    parser = _Parser(prog="deputy", description="Run a deputy_shiny agent in the terminal.")
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    run = commands.add_parser("run", help="run one task, printing what the agent does")
    run.add_argument("task", help="the task, in quotes")
    _add_common(run)
    chat = commands.add_parser("chat", help="an interactive session (the default)")
    _add_common(chat)
    return parser


def parse_args(argv: Sequence[str]) -> CliOptions:
    """Parse ``argv`` (without the program name); :class:`CommandLineError` on any mistake."""
    args = list(argv)
    if not args or args[0] not in ("run", "chat", "-h", "--help"):
        args.insert(0, "chat")  # `deputy` and `deputy --model M` open a session
    values = vars(build_parser().parse_args(args))
    prompt_file = values.pop("system_prompt_file")
    servers = [n.strip() for given in values["mcp_server"] for n in given.split(",")]
    values["mcp_server"] = tuple(dict.fromkeys(n for n in servers if n))
    values["mcp"] = bool(values["mcp"] or values["mcp_config"] or values["mcp_server"])
    if prompt_file is not None:
        values["system_prompt"] = _read_prompt(prompt_file)
    elif values["system_prompt"] is not None and not values["system_prompt"].strip():
        raise CommandLineError("--system-prompt: the prompt is empty")
    options = CliOptions(**values)
    if options.command == "run" and not (options.task or "").strip():
        raise CommandLineError('the task is empty: deputy run "what to do"')
    if options.resume is not None and not options.resume.is_file():
        raise CommandLineError(f"--resume {options.resume}: no such file")
    if options.save is not None and not options.save.parent.is_dir():
        raise CommandLineError(
            f"--save {options.save}: the folder {options.save.parent} does not exist"
        )
    if options.mcp_config is not None and not options.mcp_config.is_file():
        raise CommandLineError(f"--mcp-config {options.mcp_config}: no such file")
    if options.dir is not None:
        if not options.dir.is_dir():
            raise CommandLineError(f"--dir {options.dir}: no such folder")
        options = options.model_copy(update={"dir": options.dir.resolve()})
    if options.debug_file is not None:
        if not options.debug_file.parent.is_dir():
            raise CommandLineError(
                f"--debug-file {options.debug_file}: the folder "
                f"{options.debug_file.parent} does not exist"
            )
        options = options.model_copy(update={"debug": True})  # a file implies debugging
    return options


def _read_prompt(path: Path) -> str:
    """The system prompt in ``path``: its text, which must not be empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CommandLineError(f"--system-prompt-file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise CommandLineError(f"--system-prompt-file {path}: {reason}") from None
    if not text.strip():
        raise CommandLineError(f"--system-prompt-file {path}: the file is empty")
    return text.strip()


class ModelChoice(BaseModel):
    """The model a session runs on, and a note to show when it is not the one asked for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    note: str | None = None


def _problem(model: str, missing: Callable[[ChatModel], list[str]]) -> str | None:
    """Why ``model`` cannot run here (not a model string, unknown provider, no key), or None."""
    try:
        chat_model = ChatModel(model=model)
    except (DeputyError, ValueError):
        return f"{model!r} is not a litellm model string (like openai/gpt-4.1-mini)"
    if not is_registered(chat_model.provider):
        try:
            get_litellm().get_llm_provider(model)
        except Exception:  # litellm's BadRequestError: it knows no such provider
            return f"{model!r} names no provider litellm knows ({chat_model.provider!r})"
    keys = missing(chat_model)
    if keys:
        return f"{model} needs {' or '.join(keys)}, which is not set"
    return None


def choose_model(
    requested: str | None,
    environ: Mapping[str, str] | None = None,
    missing: Callable[[ChatModel], list[str]] = missing_credentials,
) -> ModelChoice:
    """The model to run: ``requested`` (it must work), else ``DEPUTY_MODEL``, else the demo.

    Checking a real model imports litellm (seconds); the demo needs no check.

    Examples:
        >>> choose_model(None, {}).model
        'deputy/demo'
        >>> choose_model(None, {"DEPUTY_MODEL": "openai/gpt-4.1-mini"},
        ...              missing=lambda m: ["OPENAI_API_KEY"]).note
        'DEPUTY_MODEL: openai/gpt-4.1-mini needs OPENAI_API_KEY, which is not set; using the offline demo model'
        >>> choose_model("not a model!", {})
        Traceback (most recent call last):
        ...
        deputy_shiny.errors.CommandLineError: --model: 'not a model!' is not a litellm model string (like openai/gpt-4.1-mini)
    """  # noqa: E501
    if requested is not None:
        if requested == DEMO_MODEL:
            return ModelChoice(model=DEMO_MODEL)
        problem = _problem(requested, missing)
        if problem:
            raise CommandLineError(f"--model: {problem}")
        return ModelChoice(model=requested)
    env = os.environ if environ is None else environ
    wanted = env.get(MODEL_ENV, "").strip()
    if not wanted or wanted == DEMO_MODEL:
        note = (
            None
            if wanted
            else (
                f"offline demo model: scripted replies, not an LLM (set {MODEL_ENV} or --model "
                "and the provider's API key for a real one)"
            )
        )
        return ModelChoice(model=DEMO_MODEL, note=note)
    problem = _problem(wanted, missing)
    if problem:
        return ModelChoice(
            model=DEMO_MODEL, note=f"{MODEL_ENV}: {problem}; using the offline demo model"
        )
    return ModelChoice(model=wanted)
