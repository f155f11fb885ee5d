"""The engine's one tracing hook: a per-run observer, None unless tracing is on.

The engine asks :func:`start_observer` for an observer as each run starts. With no
factory installed (the default) it gets None and does nothing more: no OpenTelemetry
module is imported and the per-chunk path is untouched (text chunks never reach an
observer). :func:`deputy_shiny.observability.instrument` installs the OpenTelemetry
factory (``deputy_shiny/observability/_otel.py``); the engine never imports it.

An observer sees the run's events as the engine emits them (``start``, requests, tool
calls, approvals, ``stop``), each response as it is assembled, and wraps each tool's
execution (so spans and logs made by the tool, and a subagent's run, nest under the
call). It must never raise: a failing observer would break the runs it watches.

Examples:
    >>> from deputy_shiny._engine.observer import observer_factory
    >>> observer_factory() is None  # tracing is off until instrument() is called
    True
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..events import AgentEvent, AgentResult
    from ..messages import Turn
    from .deps import RunDeps

__all__ = ["ObserverFactory", "RunObserver", "observer_factory", "set_observer_factory"]


class RunObserver(Protocol):
    """What watches one run (made by an :data:`ObserverFactory` as the run starts)."""

    def on_event(self, event: AgentEvent) -> None:
        """Every event but ``text`` chunks, as the engine emits it."""

    def on_response(self, turn: Turn) -> None:
        """A model response, assembled (before its ``request_end`` event)."""

    def call_scope(self, call_id: str) -> AbstractContextManager[object]:
        """Entered around the execution of the tool call ``call_id``."""

    def finish(self, result: AgentResult, error: BaseException | None) -> None:
        """The run ended (however: also when abandoned); no awaits may happen here."""


ObserverFactory = Callable[["RunDeps", str], RunObserver]
"""``factory(deps, run_id)``: the observer of a run that starts now."""

_factory: ObserverFactory | None = None


def set_observer_factory(factory: ObserverFactory | None) -> None:
    """Install (or with None remove) the factory every later run's observer comes from."""
    global _factory
    _factory = factory


def observer_factory() -> ObserverFactory | None:
    """The installed factory, or None (tracing off)."""
    return _factory
