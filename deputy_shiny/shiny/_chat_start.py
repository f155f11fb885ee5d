"""How one browser session's chat starts: its conversation, workspace, context and agent.

``agent_chat_server`` opens the saved conversation (with ``persistence``) or makes a
fresh workspace, builds the :class:`AgentChatContext` the app's ``agent_factory`` gets,
and checks the Agent it returns (:func:`make_agent`): with persistence it must use the
context's ids and folders (``Agent(model, **ctx.agent_options())`` passes them all), and an
``ask_user`` tool must be bound to this session. When the factory fails,
:func:`factory_failure` is the one line the chat shows instead of an agent.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from shiny.session import Session

from ..agent import Agent
from ..approvals import ApprovalRequest
from ..errors import ConfigurationError
from ..persistence.store import Store
from ..sandbox import prepare_workspace
from ..tools.interactive import AskUserContext, Question
from ._conversations import KitPersistence
from ._escape import markdown_text
from ._mcp_session import SessionMcp
from ._session_asks import SessionAsks
from ._session_conversation import SessionConversation, _NotSaved
from ._strings import DEFAULT_STRINGS, KitStrings

logger = logging.getLogger(__name__)

__all__ = [
    "AgentChatContext",
    "AgentOptions",
    "chat_context",
    "factory_failure",
    "make_agent",
    "new_workspace",
    "open_conversation",
    "session_workspace",
    "start_agent",
]

FAILURE_CHARS = 400  # of the error's first line the chat quotes; the log has it all


class AgentOptions(TypedDict, total=False):
    """The ``Agent(...)`` keyword arguments a session owns (see
    :meth:`AgentChatContext.agent_options`); a type checker checks them against
    ``Agent``'s parameters when they are unpacked with ``**``.

    Examples:
        >>> sorted(AgentOptions.__optional_keys__)[:2]
        ['agent_id', 'approval_dir']
    """

    working_dir: Path
    session_id: str
    approval_handler: Callable[[ApprovalRequest], Any] | None
    agent_id: str
    approval_dir: Path
    enable_file_checkpointing: bool
    checkpoint_dir: Path
    store: Store


@dataclass(frozen=True)
class AgentChatContext:
    """What ``agent_factory`` gets for one browser session.

    ``Agent(model, **ctx.agent_options())`` gives the Agent what the session owns (its
    folders, ids and approval handler, see :meth:`agent_options`): the same factory then
    works with and without ``persistence``.

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
            approvals then wait in ``approval_dir`` or the ``store`` (and still show as
            a modal), so one survives a reload.
        mcp: This session's MCP connections (``await ctx.mcp.connect(server)`` once
            the agent exists, e.g. from an effect's task); the same as ``handle.mcp``.
        agent_id: With ``persistence``, the saved conversation's agent id (else None:
            the Agent makes one).
        approval_dir: With ``persistence`` in files, where this user's approvals wait
            (else None).
        checkpoint_dir: With ``persistence`` in files, where this user's file checkpoint
            journal lives, for ``Agent(enable_file_checkpointing=True,
            checkpoint_dir=...)`` (else None).
        store: With ``KitPersistence(store=...)``, the store itself, for
            ``Agent(store=ctx.store)``: the user's approvals, checkpoint journal and
            offloaded tool results are kept there, under the conversation's session,
            so any process sharing the store finds them (else None). It is the kit's
            own store object: the agents share its connections and its loop thread.
    """

    session_id: str
    working_dir: Path
    ask_user: Callable[[list[Question], AskUserContext], Any]
    approval_handler: Callable[[ApprovalRequest], Any] | None
    mcp: SessionMcp
    agent_id: str | None = None
    approval_dir: Path | None = None
    checkpoint_dir: Path | None = None
    store: Store | None = None

    def agent_options(self, *, file_checkpointing: bool = False) -> AgentOptions:
        """The ``Agent(...)`` arguments this session owns: ``Agent(model,
        **ctx.agent_options())``. The rest (tools, permissions, prompts) stays the app's.

        Always ``working_dir``, ``session_id`` and ``approval_handler`` (None with
        ``persistence``: approvals then wait in ``approval_dir``, so one survives a
        reload); with ``persistence`` also ``agent_id`` and ``approval_dir``, or with a
        store ``store`` instead (approvals, the checkpoint journal and offloaded tool
        results then live in the store). With ``file_checkpointing=True``,
        ``enable_file_checkpointing=True`` too, and with ``persistence`` in files the
        user's ``checkpoint_dir``, so the checkpoints come back with the conversation.
        Passing one of these again is Python's ``TypeError`` (a keyword given twice):
        the session's own value is the one that works.

        Examples:
            >>> import tempfile
            >>> from deputy_shiny import Agent
            >>> ctx = AgentChatContext(
            ...     session_id="s1",
            ...     working_dir=Path(tempfile.mkdtemp()),
            ...     ask_user=lambda questions, context: [],
            ...     approval_handler=None,
            ...     mcp=SessionMcp(None),
            ... )
            >>> sorted(ctx.agent_options())
            ['approval_handler', 'session_id', 'working_dir']
            >>> Agent("deputy/demo", **ctx.agent_options(file_checkpointing=True)).session_id
            's1'
        """
        options: AgentOptions = {
            "working_dir": self.working_dir,
            "session_id": self.session_id,
            "approval_handler": self.approval_handler,
        }
        if self.agent_id is not None:
            options["agent_id"] = self.agent_id
        if self.store is not None:
            # In place of the directories (an Agent takes one or the other).
            options["store"] = self.store
        elif self.approval_dir is not None:
            options["approval_dir"] = self.approval_dir
        if file_checkpointing:
            options["enable_file_checkpointing"] = True
            if self.store is None and self.checkpoint_dir is not None:
                options["checkpoint_dir"] = self.checkpoint_dir
        return options


def open_conversation(
    persistence: KitPersistence | None, session: Session, strings: KitStrings = DEFAULT_STRINGS
) -> tuple[SessionConversation | None, str | None]:
    """The session's saved conversation (None without persistence), and why it is not
    saved when the user cannot be told safely (the session then runs unsaved, and the
    chat says why)."""
    if persistence is None:
        return None, None
    try:
        conversation = SessionConversation(persistence, session, str(session.ns) or "chat")
    except _NotSaved as exc:
        return None, getattr(strings, exc.field)
    conversation.strings = strings
    return conversation, None


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


def session_workspace(
    conversation: SessionConversation | None, workspace_root: str | os.PathLike[str] | None
) -> Path:
    """The session's working directory: the saved conversation's workspace, else a fresh
    one under ``workspace_root`` (:func:`new_workspace`)."""
    if conversation is not None:
        return conversation.folder.workspace
    return new_workspace(workspace_root)


def chat_context(
    session: Session,
    working_dir: Path,
    asks: SessionAsks,
    mcp: SessionMcp,
    conversation: SessionConversation | None,
) -> AgentChatContext:
    """The factory's context: the conversation's ids and folders (or its store) with
    persistence, the live approval handler without."""
    folder = None if conversation is None else conversation.folder
    store = None if conversation is None else conversation.store
    return AgentChatContext(
        session_id=session.id if folder is None else folder.session_id,
        working_dir=working_dir,
        ask_user=asks.ask_user,
        approval_handler=asks.approval_handler if folder is None else None,
        mcp=mcp,
        agent_id=None if folder is None else folder.agent_id,
        approval_dir=None if folder is None or store is not None else folder.approvals,
        checkpoint_dir=None if folder is None or store is not None else folder.checkpoints,
        store=store,
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


def start_agent(
    agent_factory: Callable[[AgentChatContext], Agent],
    ctx: AgentChatContext,
    conversation: SessionConversation | None,
    session: Session,
    keep_workspace: bool,
    strings: KitStrings = DEFAULT_STRINGS,
) -> Agent | str:
    """:func:`make_agent`, or when it raised, the line the chat shows instead (markdown
    made safe: the error quotes the app's code or data). The traceback goes to the log,
    and what the session opened for the agent is let go: the saved conversation at once
    (a reload may take it), a fresh workspace when the session ends."""
    try:
        return make_agent(agent_factory, ctx, persistent=conversation is not None)
    except Exception as exc:
        # The app's bug, but raised from the server function it would close the session
        # with nothing said, and the browser's message would just wait.
        logger.exception("agent_factory failed; this session has no agent")
        if conversation is not None:
            conversation.release()
        elif not keep_workspace:
            session.on_ended(functools.partial(_remove_workspace, ctx.working_dir))
        return markdown_text(factory_failure(exc, strings))


async def _remove_workspace(working_dir: Path) -> None:
    await asyncio.to_thread(shutil.rmtree, working_dir, True)


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
    if ctx.store is not None:
        if agent.store is not ctx.store:
            problems.append("store=ctx.store")
    elif ctx.approval_dir is None or agent.approval_dir != ctx.approval_dir.resolve():
        problems.append("approval_dir=ctx.approval_dir")
    if agent.approval_handler is not None:
        problems.append("approval_handler=ctx.approval_handler (None with persistence)")
    if problems:
        raise ConfigurationError(
            "With persistence, the agent_factory must create the Agent with "
            f"{', '.join(problems)} (Agent(model, **ctx.agent_options()) passes them all): "
            "a saved conversation and its waiting approvals are resumed only by an agent "
            "with the same ids and folders (or store)."
        )


def factory_failure(exc: BaseException, strings: KitStrings = DEFAULT_STRINGS) -> str:
    """What the chat says when ``agent_factory`` raised ``exc``: one plain line (the
    error's type and the first line of its message, cut short), for the chat to escape;
    the traceback belongs in the server log.

    Examples:
        >>> factory_failure(TypeError("bad argument\\n  more detail"))
        'The agent could not be started (TypeError: bad argument). The server log has the details.'
    """
    try:
        text = str(exc)
    except Exception:  # a broken __str__ must not hide the failure itself
        text = ""
    first = next((" ".join(line.split()) for line in text.splitlines() if line.strip()), "")
    if len(first) > FAILURE_CHARS:
        first = first[: FAILURE_CHARS - 1] + "…"
    what = type(exc).__name__ + (f": {first}" if first else "")
    return strings.format("agent_not_started", error=what)


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
