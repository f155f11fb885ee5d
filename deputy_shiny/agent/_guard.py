"""Guard: refuses an agent change while another agent retains it or a run is in progress.

Every component of an :class:`~deputy_shiny.agent.Agent` checks through the one guard
its agent holds, so "retained" and "busy" mean the same everywhere. The agent that
retains this one sets :attr:`Guard.retained_by` (through ``Agent._set_retained``).

Examples:
    >>> from deputy_shiny._engine.loop import Engine
    >>> guard = Guard(Engine())
    >>> guard.ready("add tools")
    >>> guard.retained_by = "agent_1"
    >>> guard.free("add tools")
    Traceback (most recent call last):
    ...
    deputy_shiny.errors.AgentRetainedError: Cannot add tools: this agent is retained by ...
"""

from __future__ import annotations

from .._engine.loop import Engine
from ..errors import AgentBusyError, AgentRetainedError

__all__ = ["Guard"]


class Guard:
    """Refuses ``action`` while the agent is retained (:meth:`free`) or running (:meth:`idle`)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.retained_by: str | None = None  # the agent id of the agent retaining it

    def free(self, action: str) -> None:
        """Raise :class:`~deputy_shiny.errors.AgentRetainedError` while retained."""
        if self.retained_by is not None:
            raise AgentRetainedError(
                f"Cannot {action}: this agent is retained by agent {self.retained_by}, "
                "which must release_agent() it first."
            )

    @property
    def busy(self) -> bool:
        """True while a run is in progress."""
        return self._engine.running

    def idle(self, action: str) -> None:
        """Raise :class:`~deputy_shiny.errors.AgentBusyError` while a run is in progress."""
        if self._engine.running:
            raise AgentBusyError(f"Cannot {action} while the agent is running a task.")

    def ready(self, action: str) -> None:
        """Both checks, in that order (not retained, then not running)."""
        self.free(action)
        self.idle(action)
