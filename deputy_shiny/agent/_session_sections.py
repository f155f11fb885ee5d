"""The saved session's ``permission_mode`` section (the components' own sections, the
conversation, run context, tool results and file checkpoints, are registered in
``_agent.py``, which alone reads the components).

The permission mode is saved so that a restored conversation keeps a narrowing the user
chose (read-only stays read-only after a reload). It is applied only as a narrowing of
the loading agent's own mode: a saved file can never widen an agent's permissions, and a
mode the agent cannot narrow to is left as the agent has it.

Examples:
    >>> from deputy_shiny.agent import Agent
    >>> from deputy_shiny.testing import ScriptedModel
    >>> agent = Agent(ScriptedModel([])).set_permission_mode("readonly")
    >>> _permission_mode_section(agent)
    'readonly'
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..errors import PersistenceCorruptError
from ..permissions import MODES, NARROWER
from ..persistence.sessions import Commit, SessionSection, register_session_section

if TYPE_CHECKING:
    from ._agent import Agent

logger = logging.getLogger(__name__)


def _permission_mode_section(agent: Agent) -> str:
    return agent.get_permission_mode()


def _load_permission_mode(agent: Agent, data: Any) -> Commit:
    if data not in MODES:
        raise PersistenceCorruptError(f"unknown saved permission mode {data!r}")
    current = agent.get_permission_mode()
    if data == current:
        return lambda: None
    if data not in NARROWER[current]:
        # Wider than the agent's (or beside it): the agent's own mode stands.
        logger.info("saved permission mode %r not applied to a %r agent", data, current)
        return lambda: None

    def commit() -> None:
        agent.set_permission_mode(data)

    return commit


register_session_section(
    SessionSection("permission_mode", _permission_mode_section, _load_permission_mode)
)
