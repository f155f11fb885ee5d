"""The ``deputy`` terminal command: an agent run, or a chat session, in a terminal.

``deputy run "TASK" [flags]`` runs one task and prints what the agent does as it
happens: the reply streaming in (rendered as Markdown on a terminal, as written
otherwise), each tool call and result as a small panel, errors, and the usage at the
end. ``deputy`` (or ``deputy chat``) with the same flags opens an interactive session:
type a task, watch it run, type the next; slash commands (``/help``, ``/save``,
``/clear``, ``/compact``, ``/cost``, ``/turns``) act on the session and never reach the
model; Ctrl-C stops a run, ``/exit`` or Ctrl-D leaves. Approvals and the agent's
questions (``ask_user``) are asked in the terminal. The flags are deputy's: ``--model``,
``--permissions``, ``--tools``, ``--max-requests``, ``--max-cost``, ``--system-prompt``
/ ``--system-prompt-file``, ``--no-ask``, ``--mcp-config``, ``--dir``, ``--verbose``,
``--no-color``, ``--debug`` / ``--debug-file``, ``--resume`` and ``--save``.
``deputy connect-bundle APP_DIR`` readies your own app for Posit Connect
(:mod:`deputy_shiny.deploy`); ``deputy feedback export`` writes the chat's ratings as
an evaluation dataset (``_feedback.py``).
It needs the ``cli`` extra (``pip install 'deputy_shiny[cli]'``, for rich).

The parts: ``_args.py`` (the flags and the model choice), ``_printer.py`` (events as
terminal output), ``_markdown.py`` (replies rendered a block at a time), ``_safe.py``
(model text never markup, never an escape sequence), ``_commands.py`` (the slash
commands), ``_prompts.py`` (approvals and ask_user read from the terminal),
``_session.py`` (one task, the interactive loop, Ctrl-C), ``_main.py`` (the agent, the
exit status), ``__main__.py`` (``python -m``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``deputy`` command with ``argv`` (default: the process's); its exit status.

    A mistake on the command line (a bad flag, an unknown model, a missing file) is one
    line on standard error and status 2; a run that ends other than ``complete`` is 1
    (130 when Ctrl-C stopped it).

    Examples:
        >>> main(["run", "hello", "--bogus"])  # stderr: deputy: unrecognized arguments: --bogus
        2
    """
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments[:1] == ["connect-bundle"]:  # needs nothing of the [cli] extra
        from ..deploy import main as bundle

        return bundle(arguments[1:])
    if arguments[:1] == ["feedback"]:  # needs nothing of the [cli] extra either
        from ._feedback import main as feedback

        return feedback(arguments[1:])
    try:
        from ._main import main as run
    except ModuleNotFoundError as exc:  # the [cli] extra is not installed
        if (exc.name or "").partition(".")[0] != "rich":
            raise
        print("deputy: this command needs rich: pip install 'deputy_shiny[cli]'", file=sys.stderr)
        return 2
    return run(arguments)
