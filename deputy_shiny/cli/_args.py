"""The ``deputy`` command line: its flags, checked into one frozen :class:`CliOptions`.

Two forms: ``deputy run TASK [flags]`` runs one task; ``deputy [chat] [flags]`` opens an
interactive session. A bad flag, an unknown model or a session file that is not there
is a :class:`CommandLineError`, which ``main`` prints as one line and exits with status 2
(argparse's own convention), never a traceback.

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

from pydantic import BaseModel, ConfigDict

from ..errors import CommandLineError, DeputyError
from ..models import DEMO_MODEL, ChatModel, missing_credentials
from ..models._litellm import get_litellm, is_registered
from ..permissions import MODES

__all__ = ["CliOptions", "CommandLineError", "ModelChoice", "choose_model", "parse_args"]

MODEL_ENV = "DEPUTY_MODEL"


class CliOptions(BaseModel):
    """What the command line asked for.

    Attributes:
        command: ``run`` (one task) or ``chat`` (an interactive session).
        task: The task of ``run``; None for ``chat``.
        model: ``--model``, or None to take ``DEPUTY_MODEL`` or the demo.
        permissions: The permission mode (``standard``, ``plan``, ``readonly``, ``full``).
        resume: A saved session to continue, or None.
        save: Where to save the session after each run, or None.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: Literal["run", "chat"]
    task: str | None = None
    model: str | None = None
    permissions: str = "standard"
    resume: Path | None = None
    save: Path | None = None


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
    namespace = build_parser().parse_args(args)
    options = CliOptions(**vars(namespace))
    if options.command == "run" and not (options.task or "").strip():
        raise CommandLineError('the task is empty: deputy run "what to do"')
    if options.resume is not None and not options.resume.is_file():
        raise CommandLineError(f"--resume {options.resume}: no such file")
    if options.save is not None and not options.save.parent.is_dir():
        raise CommandLineError(
            f"--save {options.save}: the folder {options.save.parent} does not exist"
        )
    return options


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
