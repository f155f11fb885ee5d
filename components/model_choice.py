"""Which model the reference app talks to: ``DEPUTY_MODEL``, else the offline demo."""

from __future__ import annotations

import os

from deputy_shiny import DEMO_MODEL


def chosen_model(environ: dict[str, str] | None = None) -> str:
    """The litellm model string from ``DEPUTY_MODEL``, or ``deputy/demo`` when unset.

    Example:
        >>> chosen_model({})
        'deputy/demo'
        >>> chosen_model({"DEPUTY_MODEL": "openai/gpt-4.1-mini"})
        'openai/gpt-4.1-mini'
    """
    env = os.environ if environ is None else environ
    return env.get("DEPUTY_MODEL", "").strip() or DEMO_MODEL
