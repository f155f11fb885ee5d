"""The demo model's words in a terminal: the ``deputy`` command has no dialogs or panels.

The demo's replies are written for the Shiny app (approve in a dialog, answer in a
form, panels that list things). When the conversation's system prompt begins with
:data:`TERMINAL_ROLE` (the ``deputy`` command's does), :func:`for_terminal` says the
same things as a terminal shows them: you type ``y`` or ``n``, you answer at the prompt,
and a real model is one ``--model`` away.

Examples:
    >>> for_terminal("Answer them in the form (or decline).")
    'Answer them at the prompt (or decline).'
"""

from __future__ import annotations

from typing import Final

__all__ = ["TERMINAL_ROLE", "for_terminal"]

TERMINAL_ROLE: Final = "You are a coding and research assistant working in a terminal"
"""How the terminal's system prompt begins (the demo then speaks as a terminal shows)."""

_WORDING: Final[tuple[tuple[str, str], ...]] = (
    (
        "so you can try this app without an API key or network access. To use a real "
        "model, set DEPUTY_MODEL to a litellm model string (for example openai/gpt-4.1-mini "
        "or anthropic/claude-sonnet-4-5) and set that provider's API key (for example "
        "OPENAI_API_KEY or ANTHROPIC_API_KEY), then start again.",
        "so you can try `deputy` without an API key or network access. To use a real "
        "model, set that provider's API key (for example OPENAI_API_KEY or "
        "ANTHROPIC_API_KEY) and run `deputy --model openai/gpt-4.1-mini` (any litellm "
        "model string; or set DEPUTY_MODEL).",
    ),
    ("you answer in a form", "you answer at the prompt"),
    ("Answer them in the form", "Answer them at the prompt"),
    ("In this app a write needs", "Here a write needs"),
    ("(a dialog: approve or deny)", "(you type y or n)"),
    (" (the app's workspace panel lists it)", ""),
    ("(the app's permission mode, for one)", "(`--permissions`, for one)"),
)


def for_terminal(text: str) -> str:
    """``text`` (a demo reply) worded for a terminal."""
    for app, terminal in _WORDING:
        text = text.replace(app, terminal)
    return text
