"""CallIdentity: who is calling, in one place (agent, session, run and call ids).

Every context object a callback or tool receives carries these four ids: hook
contexts, permission contexts, tool contexts and ask_user contexts all derive from
:class:`CallIdentity`, so each id is defined (and documented) once and
``context.identity`` gives them as one value.

Examples:
    >>> from deputy_shiny.hooks import HookContext
    >>> context = HookContext(event="Stop", agent_id="a1", run_id="run_1")
    >>> context.identity
    CallIdentity(agent_id='a1', session_id=None, run_id='run_1', call_id=None)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CallIdentity", "SessionId"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CallIdentity:
    """Who is calling; any id is None where it is not known (outside a run, no call yet).

    Attributes:
        agent_id: The agent's id.
        session_id: The agent's session id (one browser session in the Shiny kit).
        run_id: The run's id.
        call_id: The tool call's id (for tool events and tool calls).
    """

    agent_id: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    call_id: str | None = None

    @property
    def identity(self) -> CallIdentity:
        """The four ids alone, as one :class:`CallIdentity`."""
        return CallIdentity(
            agent_id=self.agent_id,
            session_id=self.session_id,
            run_id=self.run_id,
            call_id=self.call_id,
        )

    def ids(self) -> dict[str, str | None]:
        """The ids as keyword arguments for another context or an approval request."""
        return {
            "agent_id": self.agent_id,
            "session_id": self.session_id,
            "run_id": self.run_id,
            "call_id": self.call_id,
        }


class SessionId(str):
    """An agent's session id: a ``str`` that can also be called, as deputy's
    ``agent$session_id()``, so ``agent.session_id`` and ``agent.session_id()`` both give
    the id (calling returns a plain ``str``).

    Examples:
        >>> sid = SessionId("session_1")
        >>> sid == "session_1", sid() == "session_1", type(sid()).__name__
        (True, True, 'str')
    """

    __slots__ = ()

    def __call__(self) -> str:
        return str(self)
