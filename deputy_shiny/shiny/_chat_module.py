"""The agent chat module: one Agent per browser session behind a streaming shinychat UI.

``agent_chat_ui(id)`` places the chat; ``agent_chat_server(id, agent_factory)`` calls
``agent_factory(ctx)`` once per browser session and streams that session's runs into
the chat. Shiny has one reactive lock for the whole process, so the run, approval
waits and ask_user waits all live in the stream task (shinychat runs it as an
ExtendedTask) and wait on futures that an input effect resolves; reactive values are
set from there holding the lock only for the set.

Example:
    >>> from shiny import App, ui
    >>> from deputy_shiny import Agent
    >>> from deputy_shiny.shiny import agent_chat_server, agent_chat_ui
    >>> app_ui = ui.page_fillable(agent_chat_ui("assistant"))
    >>> def server(input, output, session):
    ...     agent_chat_server("assistant", lambda ctx: Agent("deputy/demo",
    ...         working_dir=ctx.working_dir, approval_handler=ctx.approval_handler))
    >>> app = App(app_ui, server)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from htmltools import HTMLDependency, TagList
from shiny import module, reactive, render, ui
from shiny.session import Session
from shinychat import Chat, chat_ui

from .. import __version__
from ..agent import Agent
from ..approvals import ApprovalDecision, ApprovalRequest
from ..errors import ConfigurationError, McpError
from ..events import AgentEvent, AgentUsage
from ..mcp.config import ConfigInput as McpConfigInput
from ..mcp.config import McpConfig
from ..tools.interactive import AskUserContext, AskUserDeclined, Question
from ._image_guard import normalize_origins
from ._mcp_session import SessionMcp
from ._modals import approval_modal, questions_modal
from ._prompts import PromptClosed, session_prompts
from ._render import render_events

logger = logging.getLogger(__name__)


def kit_dependency() -> HTMLDependency:
    """The kit's script and stylesheet (modals, MCP panel buttons)."""
    return HTMLDependency(
        name="deputy_shiny",
        version=__version__,
        source={"package": "deputy_shiny", "subdir": "shiny/www"},
        script={"src": "deputy_shiny.js"},
        stylesheet={"href": "deputy_shiny.css"},
    )


@dataclass(frozen=True)
class AgentChatContext:
    """What ``agent_factory`` gets for one browser session.

    Attributes:
        session_id: The Shiny session's id.
        working_dir: A fresh directory for this session (removed when it ends unless
            ``keep_workspaces``).
        ask_user: Pass to ``tools_interactive(callback=ctx.ask_user)``: questions show
            as a form in this session only.
        approval_handler: Pass to ``Agent(approval_handler=ctx.approval_handler)``:
            approvals show as a modal in this session only.
        mcp: This session's MCP connections (``await ctx.mcp.connect(server)`` once
            the agent exists, e.g. from an effect's task); the same as ``handle.mcp``.
    """

    session_id: str
    working_dir: Path
    ask_user: Callable[[list[Question], AskUserContext], Any]
    approval_handler: Callable[[ApprovalRequest], Any]
    mcp: SessionMcp


@dataclass
class AgentChatHandle:
    """What ``agent_chat_server`` returns: the session's agent and reactive state.

    Attributes:
        agent: This session's Agent (None in Shiny Express's stub session).
        running: True while a run streams.
        usage: The conversation's AgentUsage, updated after each run.
        pending_approvals: Prompts (approvals and questions) waiting in this session.
        tool_events: Increments when a tool call ends (refresh views of the workspace).
        working_dir: The session's workspace.
        mcp: This session's MCP connections: ``await handle.mcp.connect(server)``;
            they close when the session ends.
    """

    agent: Agent | None
    running: reactive.Value[bool]
    usage: reactive.Value[AgentUsage]
    pending_approvals: reactive.Value[int]
    tool_events: reactive.Value[int]
    working_dir: Path | None
    mcp: SessionMcp


@module.ui
def agent_chat_ui(**chat_ui_options: Any) -> TagList:
    """The chat (with its stop button) and a usage line, for ``agent_chat_server``.

    Extra keyword arguments go to shinychat's ``chat_ui``.
    """
    options = {"enable_cancel": True, "placeholder": "Ask the agent something", **chat_ui_options}
    return TagList(
        kit_dependency(),
        chat_ui("chat", **options),
        ui.output_text("usage", inline=False).add_class("deputy-usage"),
    )


def _usage_text(usage: AgentUsage) -> str:
    cost = "unknown" if usage.cost is None else f"${usage.cost:.4f}"
    return (
        f"Requests: {usage.requests} · Tokens: {usage.total_tokens} · "
        f"Tool calls: {usage.tool_calls} · Cost: {cost}"
    )


@module.server
def agent_chat_server(
    input: Any,
    output: Any,
    session: Session,
    agent_factory: Callable[[AgentChatContext], Agent],
    *,
    workspace_root: str | os.PathLike[str] | None = None,
    keep_workspaces: bool = False,
    approval_timeout: float | None = 600,
    allowed_image_origins: Iterable[str] = (),
    mcp_config: McpConfigInput | McpConfig | None = None,
    mcp_servers: Iterable[str] = (),
) -> AgentChatHandle:
    """Bind one Agent per browser session to the chat placed by ``agent_chat_ui(id)``.

    Args:
        agent_factory: ``factory(ctx) -> Agent``, called once per session.
        workspace_root: Where per-session working directories are made (default: a
            ``deputy_shiny`` folder in the system temp dir).
        keep_workspaces: Keep each session's directory after it ends.
        approval_timeout: Seconds an approval or question may wait; then it is denied
            (or declined). None waits as long as the session lasts.
        allowed_image_origins: Origins (``https://images.example``) from which images in
            model text may load; every other remote image is blocked.
        mcp_config: The MCP config (path, dict or ``McpConfig``) whose servers this
            session may connect (``handle.mcp.connect``, the MCP panel).
        mcp_servers: Servers of ``mcp_config`` to connect as each session starts, in the
            background: their tools join the session's agent when ready, and the chat
            says so if one fails. Each session starts its own server processes, and
            they stop when it ends.
    """
    running = reactive.value(False)
    usage_value = reactive.value(AgentUsage())
    tool_events = reactive.value(0)
    origins = normalize_origins(allowed_image_origins)
    autoconnect = tuple(mcp_servers)
    if autoconnect and mcp_config is None:
        raise ConfigurationError("mcp_servers needs mcp_config (the config that names them)")
    if session.is_stub_session():
        return AgentChatHandle(
            None, running, usage_value, reactive.value(0), tool_events, None, SessionMcp(None)
        )

    async def tell_chat(message: str) -> None:
        await chat.append_message(message)

    mcp = SessionMcp(mcp_config, on_failure=tell_chat)
    for name in autoconnect:
        mcp.check_server(name)  # an unknown name is the app's error, raised at once
    prompts = session_prompts(session)
    root = (
        Path(workspace_root)
        if workspace_root is not None
        else Path(tempfile.gettempdir()) / "deputy_shiny"
    )
    root.mkdir(parents=True, exist_ok=True)
    working_dir = Path(tempfile.mkdtemp(prefix="session-", dir=root))

    async def approval_handler(request: ApprovalRequest) -> ApprovalDecision:
        try:
            answer = await prompts.ask(
                request.request_id,
                lambda waiting: approval_modal(request, waiting),
                approval_timeout,
                group=request.run_id,
                also_waiting=request.calls_after,
            )
        except PromptClosed:
            return ApprovalDecision.deny("The user left before deciding.")
        action = answer.get("action")
        if action == "stop":
            return ApprovalDecision.stop_run()
        if action == "approve":
            return ApprovalDecision.approve(_edited(request, answer.get("values")))
        if action == "always":
            return ApprovalDecision(
                approved=True, always=True, updated_input=_edited(request, answer.get("values"))
            )
        message = str(answer.get("message") or "").strip() or None
        return ApprovalDecision.deny(message)

    async def ask_user(questions: list[Question], context: AskUserContext) -> list[Any]:
        from ..approvals import new_request_id

        request_id = new_request_id()
        try:
            answer = await prompts.ask(
                request_id,
                questions_modal(request_id, questions),
                approval_timeout,
                group=context.run_id,
            )
        except (PromptClosed, TimeoutError):
            raise AskUserDeclined("The user did not answer.") from None
        if answer.get("action") != "submit":
            raise AskUserDeclined("The user cancelled.")
        answers = answer.get("answers")
        return answers if isinstance(answers, list) else []

    ctx = AgentChatContext(
        session_id=session.id,
        working_dir=working_dir,
        ask_user=ask_user,
        approval_handler=approval_handler,
        mcp=mcp,
    )
    agent = agent_factory(ctx)
    if not isinstance(agent, Agent):
        raise TypeError(f"agent_factory must return an Agent, not {type(agent).__name__}")
    _warn_unbound_ask_user(agent, ask_user)
    chat = Chat("chat", history=False)
    handle = AgentChatHandle(
        agent, running, usage_value, prompts.pending, tool_events, working_dir, mcp
    )
    mcp.bind(agent)
    background: set[asyncio.Task[Any]] = set()

    async def autoconnect_one(server: str) -> None:
        # A failure shows in the panel, and SessionMcp tells the chat.
        with contextlib.suppress(McpError):
            await mcp.connect(server)

    for name in autoconnect:
        # Not awaited: the page and other sessions never wait for a server to start.
        task = asyncio.get_running_loop().create_task(autoconnect_one(name))
        background.add(task)
        task.add_done_callback(background.discard)

    async def _set(value: reactive.Value[Any], new: Any) -> None:
        async with reactive.lock():
            value.set(new)
            await reactive.flush()

    ended_calls = 0  # a plain count: the stream task may not read reactive values

    def _on_event(event: AgentEvent) -> None:
        nonlocal ended_calls
        if event.type == "tool_end":
            ended_calls += 1
            # Scheduled, not awaited: on_event runs inside the stream's iteration.
            asyncio.get_running_loop().create_task(_set(tool_events, ended_calls))

    async def _stream(message: str) -> AsyncIterator[Any]:
        await _set(running, True)
        try:
            async for chunk in render_events(
                agent.run(message), allowed_image_origins=origins, on_event=_on_event
            ):
                yield chunk
        finally:
            await _set(usage_value, agent.usage())
            await _set(running, False)

    @chat.on_user_submit
    async def _submit(user_input: str) -> None:
        if agent.running:
            await chat.append_message("The agent is still working; stop it first or wait.")
            return
        await chat.append_message_stream(_stream(user_input))

    @reactive.effect
    @reactive.event(input.chat_cancel)  # no ignore_init: see _prompts.session_prompts
    def _stop() -> None:
        agent.interrupt("interrupted")

    @render.text
    def usage() -> str:
        return _usage_text(usage_value())

    async def _end() -> None:
        # Interrupt the run first, then the queue denies whatever is still pending.
        agent.interrupt("interrupted")
        prompts.close()
        for _ in range(200):
            if not agent.running:
                break
            await asyncio.sleep(0.05)
        for task in list(background):
            task.cancel()
        await mcp.aclose()  # this session's MCP servers stop
        await agent.aclose()  # stops the session's run_python interpreters
        if not keep_workspaces:
            await asyncio.to_thread(shutil.rmtree, working_dir, True)

    session.on_ended(_end)
    return handle


def _edited(request: ApprovalRequest, values: object) -> dict[str, Any] | None:
    """The arguments with the person's edits, or None when nothing changed.

    The browser sends only the fields the person touched (``deputy_shiny.js``), and a
    value counts as an edit only if it differs exactly, type included: a browser
    normalizes what it shows (CRLF to LF, a textarea's leading newline), so echoing an
    untouched field back would silently rewrite what was approved.
    """
    if not isinstance(values, dict):
        return None
    edited = dict(request.arguments)
    changed = False
    for name, value in values.items():
        if name in edited and not _same(edited[name], value):
            edited[name] = value
            changed = True
    return edited if changed else None


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _warn_unbound_ask_user(agent: Agent, bound: Callable[..., Any]) -> None:
    for t in agent.get_tools().values():
        if (
            getattr(t, "name", None) == "ask_user"
            and getattr(t, "ask_user_callback", None) is not bound
        ):
            message = (
                "This agent's ask_user tool is not bound to its browser session; pass "
                "tools_interactive(callback=ctx.ask_user) so questions reach this user."
            )
            warnings.warn(message, UserWarning, stacklevel=3)
            logger.warning(message)


__all__ = ["AgentChatContext", "AgentChatHandle", "agent_chat_server", "agent_chat_ui"]
