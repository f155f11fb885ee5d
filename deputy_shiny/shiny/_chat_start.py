"""How one browser session's chat starts: its conversation, workspace, context and agent.

``agent_chat_server`` opens the saved conversation (with ``persistence``) or makes a
fresh workspace, builds the :class:`AgentChatContext` the app's ``agent_factory`` gets,
and checks the Agent it returns (:func:`make_agent`): with persistence it must use the
context's ids and folders, and an ``ask_user`` tool must be bound to this session.
"""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shiny.session import Session

from ..agent import Agent
from ..approvals import ApprovalRequest
from ..errors import ConfigurationError
from ..sandbox import prepare_workspace
from ..tools.interactive import AskUserContext, Question
from ._conversations import KitPersistence
from ._mcp_session import SessionMcp
from ._session_asks import SessionAsks
from ._session_conversation import SessionConversation, _NotSaved

logger = logging.getLogger(__name__)

__all__ = ["AgentChatContext", "chat_context", "make_agent", "new_workspace", "open_conversation"]


@dataclass(frozen=True)
class AgentChatContext:
    """What ``agent_factory`` gets for one browser session.

    Pass ``working_dir``, ``session_id``, ``agent_id``, ``approval_handler`` and
    ``approval_dir`` to the Agent as they are: the same factory then works with and
    without ``persistence``.

    Attributes:
        session_id: The Shiny session's id; with ``persistence``, the saved
            conversation's (it stays the same across reloads).
        working_dir: A fresh directory for this session (removed when it ends unless
            ``keep_workspaces``); with ``persistence``, the user's own workspace, which
            stays.
        ask_user: Pass to ``tools_interactive(callback=ctx.ask_user)``: questions show
            as a form in this session only.
        approval_handler: Pass to ``Agent(approval_handler=ctx.approval_handler)``:
            approvals show as a modal in this session only. None with ``persistence``:
            approvals then wait in ``approval_dir`` (and still show as a modal), so one
            survives a reload.
        mcp: This session's MCP connections (``await ctx.mcp.connect(server)`` once
            the agent exists, e.g. from an effect's task); the same as ``handle.mcp``.
        agent_id: With ``persistence``, the saved conversation's agent id (else None:
            the Agent makes one).
        approval_dir: With ``persistence``, where this user's approvals wait (else None).
        checkpoint_dir: With ``persistence``, where this user's file checkpoint journal
            lives, for ``Agent(enable_file_checkpointing=True, checkpoint_dir=...)``
            (else None).
    """

    session_id: str
    working_dir: Path
    ask_user: Callable[[list[Question], AskUserContext], Any]
    approval_handler: Callable[[ApprovalRequest], Any] | None
    mcp: SessionMcp
    agent_id: str | None = None
    approval_dir: Path | None = None
    checkpoint_dir: Path | None = None


def open_conversation(
    persistence: KitPersistence | None, session: Session
) -> tuple[SessionConversation | None, str | None]:
    """The session's saved conversation (None without persistence), and why it is not
    saved when the user cannot be told safely (the session then runs unsaved, and the
    chat says why)."""
    if persistence is None:
        return None, None
    try:
        return SessionConversation(persistence, session, str(session.ns) or "chat"), None
    except _NotSaved as exc:
        return None, str(exc)


def new_workspace(workspace_root: str | os.PathLike[str] | None) -> Path:
    """A fresh working directory for one session under ``workspace_root`` (default: a
    ``deputy_shiny`` folder in the system temp dir)."""
    root = (
        Path(workspace_root)
        if workspace_root is not None
        else Path(tempfile.gettempdir()) / "deputy_shiny"
    )
    root.mkdir(parents=True, exist_ok=True)
    # Model-run code runs as the workspace's owner, never as root (see sandbox.py).
    return prepare_workspace(tempfile.mkdtemp(prefix="session-", dir=root))


def chat_context(
    session: Session,
    working_dir: Path,
    asks: SessionAsks,
    mcp: SessionMcp,
    conversation: SessionConversation | None,
) -> AgentChatContext:
    """The factory's context: the conversation's ids and folders with persistence, the
    live approval handler without."""
    folder = None if conversation is None else conversation.folder
    return AgentChatContext(
        session_id=session.id if folder is None else folder.session_id,
        working_dir=working_dir,
        ask_user=asks.ask_user,
        approval_handler=asks.approval_handler if folder is None else None,
        mcp=mcp,
        agent_id=None if folder is None else folder.agent_id,
        approval_dir=None if folder is None else folder.approvals,
        checkpoint_dir=None if folder is None else folder.checkpoints,
    )


def make_agent(
    agent_factory: Callable[[AgentChatContext], Agent], ctx: AgentChatContext, *, persistent: bool
) -> Agent:
    """``agent_factory(ctx)``, checked: an Agent, using ``ctx``'s ids and folders when
    ``persistent``; a warning when its ask_user tool is bound elsewhere."""
    agent = agent_factory(ctx)
    if not isinstance(agent, Agent):
        raise TypeError(f"agent_factory must return an Agent, not {type(agent).__name__}")
    if persistent:
        _check_persistent_agent(agent, ctx)
    # ctx.ask_user is one bound method, the very object the factory handed on.
    _warn_unbound_ask_user(agent, ctx.ask_user, stacklevel=4)
    return agent


def _check_persistent_agent(agent: Agent, ctx: AgentChatContext) -> None:
    """With persistence the agent must use ``ctx``'s ids and folders, or nothing saved
    could be resumed: a ConfigurationError naming what differs."""
    problems = []
    if agent.working_dir != ctx.working_dir.resolve():
        problems.append("working_dir=ctx.working_dir")
    if agent.session_id != ctx.session_id:
        problems.append("session_id=ctx.session_id")
    if agent.agent_id != ctx.agent_id:
        problems.append("agent_id=ctx.agent_id")
    if ctx.approval_dir is None or agent.approval_dir != ctx.approval_dir.resolve():
        problems.append("approval_dir=ctx.approval_dir")
    if agent.approval_handler is not None:
        problems.append("approval_handler=ctx.approval_handler (None with persistence)")
    if problems:
        raise ConfigurationError(
            "With persistence, the agent_factory must create the Agent with "
            f"{', '.join(problems)}: a saved conversation and its waiting approvals are "
            "resumed only by an agent with the same ids and folders."
        )


def _warn_unbound_ask_user(agent: Agent, bound: Callable[..., Any], stacklevel: int = 2) -> None:
    for t in agent.get_tools().values():
        if (
            getattr(t, "name", None) == "ask_user"
            and getattr(t, "ask_user_callback", None) is not bound
        ):
            message = (
                "This agent's ask_user tool is not bound to its browser session; pass "
                "tools_interactive(callback=ctx.ask_user) so questions reach this user."
            )
            warnings.warn(message, UserWarning, stacklevel=stacklevel)
            logger.warning(message)
