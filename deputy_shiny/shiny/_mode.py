"""The permission-mode switcher: shows the agent's mode; only narrower modes are offered.

The modes and their order come from :mod:`deputy_shiny.permissions`
(:func:`~deputy_shiny.permissions.allowed_modes`).

Examples:
    >>> allowed_modes("full")
    ['full', 'standard', 'plan', 'readonly']
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from shiny import reactive, render, ui

from ..agent import Agent
from ..errors import ConfigurationError
from ..permissions import allowed_modes
from . import _module as kit_module
from ._strings import DEFAULT_STRINGS, KitStrings

__all__ = ["allowed_modes", "permission_mode_server", "permission_mode_ui"]


def _label(mode: str, strings: KitStrings) -> str:
    label: str = getattr(strings, f"mode_{mode}", mode)
    return label


def hint_text(initial: str, mode: str, strings: KitStrings = DEFAULT_STRINGS) -> str:
    """Why modes the session started with are no longer offered ("" when none are gone).

    Examples:
        >>> hint_text("standard", "readonly")
        'The mode only narrows during a session: Standard is no longer offered.'
        >>> hint_text("standard", "standard")
        ''
    """
    if not initial or not mode:
        return ""
    now = set(allowed_modes(mode))
    gone = [_label(m, strings) for m in allowed_modes(initial) if m not in now]
    if not gone:
        return ""
    if len(gone) == 1:
        return strings.format("mode_hint_one", modes=gone[0])
    names = strings.format("mode_names_and", first=", ".join(gone[:-1]), last=gone[-1])
    return strings.format("mode_hint_many", modes=names)


@kit_module.ui
def permission_mode_ui(
    label: str | None = None, *, strings: KitStrings = DEFAULT_STRINGS
) -> ui.TagList:
    """A select showing the agent's permission mode (filled in by the server), and a
    hint saying why wider modes are gone once the mode narrowed. ``label`` is the
    select's (default: ``strings.mode_label``, "Permission mode")."""
    return ui.TagList(
        ui.input_select(
            "mode", strings.mode_label if label is None else label, choices=[], width="100%"
        ),
        ui.output_text("hint", inline=False).add_class("deputy-mode-hint text-muted small"),
    )


@kit_module.server
def permission_mode_server(
    input: Any,
    output: Any,
    session: Any,
    agent: Agent | Callable[[], Agent | None],
    *,
    strings: KitStrings = DEFAULT_STRINGS,
) -> reactive.Value[str]:
    """Keep the select in step with the agent; switching calls ``set_permission_mode``.

    ``agent`` may be the Agent or a function returning it (e.g. ``lambda: handle.agent``).
    The new mode applies from the next tool call. Returns the current mode (a
    ``reactive.Value`` that Shiny Express renders as nothing, so a bare call is fine).
    ``strings`` (the app's :class:`KitStrings`, e.g. ``handle.strings``) word the modes
    and the hint.
    """
    current: reactive.Value[str] = kit_module.InertValue("", name="deputy_permission_mode")
    initial: list[str] = []  # the mode the session started with

    def _agent() -> Agent | None:
        return agent if isinstance(agent, Agent) else agent()

    def _show(mode: str) -> None:
        choices: dict[str, str] = {m: _label(m, strings) for m in allowed_modes(mode)}
        ui.update_select("mode", choices=choices, selected=mode)
        current.set(mode)

    @reactive.effect
    def _init() -> None:
        target = _agent()
        if target is not None:
            initial.append(target.get_permission_mode())
            _show(initial[0])
        _init.destroy()

    @render.text
    def hint() -> str:
        return hint_text(initial[0] if initial else "", current(), strings)

    @reactive.effect
    @reactive.event(input.mode)  # no ignore_init: it never subscribes to an unset input
    def _switch() -> None:
        target = _agent()
        wanted = input.mode()
        if target is None or not wanted or wanted == target.get_permission_mode():
            return
        # Only narrower modes are offered; a forged value changes nothing.
        with contextlib.suppress(ConfigurationError):
            target.set_permission_mode(wanted)
        _show(target.get_permission_mode())

    return current
