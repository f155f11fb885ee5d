"""The permission-mode switcher: shows the agent's mode; only narrower modes are offered.

The modes and their order come from :mod:`deputy_shiny.permissions`
(:func:`~deputy_shiny.permissions.allowed_modes`).

Example:
    >>> allowed_modes("full")
    ['full', 'standard', 'plan', 'readonly']
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from shiny import reactive, ui

from ..agent import Agent
from ..errors import ConfigurationError
from ..permissions import allowed_modes
from . import _module as kit_module

__all__ = ["allowed_modes", "permission_mode_server", "permission_mode_ui"]

_LABELS = {"readonly": "Read-only"}


def _label(mode: str) -> str:
    return _LABELS.get(mode, mode.capitalize())


@kit_module.ui
def permission_mode_ui(label: str = "Permission mode") -> ui.Tag:
    """A select showing the agent's permission mode (filled in by the server)."""
    return ui.input_select("mode", label, choices=[], width="100%")


@kit_module.server
def permission_mode_server(
    input: Any, output: Any, session: Any, agent: Agent | Callable[[], Agent | None]
) -> reactive.Value[str]:
    """Keep the select in step with the agent; switching calls ``set_permission_mode``.

    ``agent`` may be the Agent or a function returning it (e.g. ``lambda: handle.agent``).
    The new mode applies from the next tool call. Returns the current mode (a
    ``reactive.Value`` that Shiny Express renders as nothing, so a bare call is fine).
    """
    current: reactive.Value[str] = kit_module.InertValue("", name="deputy_permission_mode")

    def _agent() -> Agent | None:
        return agent if isinstance(agent, Agent) else agent()

    def _show(mode: str) -> None:
        choices: dict[str, str] = {m: _label(m) for m in allowed_modes(mode)}
        ui.update_select("mode", choices=choices, selected=mode)
        current.set(mode)

    @reactive.effect
    def _init() -> None:
        target = _agent()
        if target is not None:
            _show(target.get_permission_mode())
        _init.destroy()

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
