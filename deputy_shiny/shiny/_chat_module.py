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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from htmltools import HTMLDependency, TagList
from shiny import module, reactive, render, ui
from shiny.session import Session
from shinychat import Chat, chat_ui

from .. import __version__
from ..agent import Agent
from ..approvals import ApprovalDecision, ApprovalRequest, new_request_id
from ..errors import (
    ApprovalDecidedError,
    ApprovalResumeError,
    ConfigurationError,
    DeputyError,
    McpError,
)
from ..events import AgentEvent, AgentUsage, StopEvent
from ..mcp.config import ConfigInput as McpConfigInput
from ..mcp.config import McpConfig
from ..persistence.approvals import ApprovalContinuation, continues_conversation
from ..persistence.checkpoints import FileRewind
from ..sandbox import prepare_workspace
from ..tools.interactive import AskUserContext, AskUserDeclined, Question
from ._answers import decision_from_answer
from ._conversations import KitPersistence
from ._escape import markdown_text
from ._image_guard import normalize_origins
from ._mcp_session import SessionMcp
from ._modals import approval_modal, confirm_modal, questions_modal
from ._origin import normalize_allowed_origins, session_foreign_origin
from ._prompts import PromptClosed, SessionPrompts, session_prompts
from ._render import note_chunk, render_events
from ._session_conversation import RELOAD_MESSAGE, SessionConversation, _NotSaved
from ._transcript import transcript_messages

logger = logging.getLogger(__name__)

FOREIGN_MESSAGE = (
    "This chat works only on its own page: this page is from another site, so it gets "
    "no conversation here."
)


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
        persistent: True when the conversation is saved (``persistence``).
    """

    agent: Agent | None
    running: reactive.Value[bool]
    usage: reactive.Value[AgentUsage]
    pending_approvals: reactive.Value[int]
    tool_events: reactive.Value[int]
    working_dir: Path | None
    mcp: SessionMcp
    _prompts: SessionPrompts | None = field(default=None, repr=False)
    _conversation: SessionConversation | None = field(default=None, repr=False)
    _saved: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)
    _session: Session | None = field(default=None, repr=False)

    @property
    def persistent(self) -> bool:
        """True when this session's conversation is saved (``persistence``)."""
        return self._conversation is not None

    async def confirm(self, title: str, body: str, confirm_label: str) -> bool:
        """Ask this session's user a yes/no question in a modal (queued behind any
        approval); False when they cancel, or the session ends or times out first.
        Await it from a task, never from a reactive effect."""
        if self._prompts is None:
            return False
        request_id = new_request_id()
        try:
            answer = await self._prompts.ask(
                request_id, confirm_modal(request_id, title, body, confirm_label), None
            )
        except (PromptClosed, TimeoutError):
            return False
        return answer.get("action") == "confirm"

    async def rewind_files(self, checkpoint_id: str) -> FileRewind:
        """``agent.rewind_files`` (not during a run), then the conversation is saved."""
        if self.agent is None:
            raise ConfigurationError("This session has no agent.")
        rewind = await asyncio.to_thread(self.agent.rewind_files, checkpoint_id)
        async with reactive.lock():  # views of the workspace refresh
            with reactive.isolate():
                self.tool_events.set(self.tool_events() - 1)
            await reactive.flush()
        if self._saved is not None:
            await self._saved()
        return rewind

    async def new_conversation(self) -> None:
        """Start over: the page reloads with an empty chat. With ``persistence`` the
        saved conversation (transcript, waiting approvals, checkpoints) is forgotten and
        the workspace's files stay; without it the new session gets a new workspace."""
        if self._conversation is not None:
            await self._conversation.start_new()
        elif self._session is not None:
            await self._session.send_custom_message(RELOAD_MESSAGE, {})


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
    persistence: KitPersistence | None = None,
    allowed_origins: Iterable[str] = (),
    trust_forwarded: bool = False,
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
        persistence: Keep each user's conversation (a
            :class:`~deputy_shiny.shiny.KitPersistence`): it is saved after every run and
            comes back on a reload, with its workspace and any approval still waiting
            (as a modal, decided once). The factory must pass ``ctx``'s ids and
            directories to the Agent (see :class:`AgentChatContext`).
        allowed_origins: Origins (``https://portal.example``) other than the app's own
            whose pages may open this app's chat (e.g. a page that embeds it). A session
            opened by any other origin's page (its websocket's ``Origin``) is refused:
            the chat says so in one line, and it gets no agent (``agent_factory`` is not
            called), no conversation, no prompts.
        trust_forwarded: The app's own origin is taken from ``X-Forwarded-Proto`` and
            ``X-Forwarded-Host`` rather than the request's ``Host``: only when a reverse
            proxy in front of the app sets them (any client can send them).
    """
    running = reactive.value(False)
    usage_value = reactive.value(AgentUsage())
    tool_events = reactive.value(0)
    origins = normalize_origins(allowed_image_origins)
    autoconnect = tuple(mcp_servers)
    if autoconnect and mcp_config is None:
        raise ConfigurationError("mcp_servers needs mcp_config (the config that names them)")
    allowed = normalize_allowed_origins(allowed_origins)
    if session.is_stub_session():
        return AgentChatHandle(
            None, running, usage_value, reactive.value(0), tool_events, None, SessionMcp(None)
        )
    if session_foreign_origin(session, allowed, trust_forwarded=trust_forwarded) is not None:
        return _foreign_session(running, usage_value, tool_events)

    async def tell_chat(message: str) -> None:
        """Say ``message`` (plain text, which may quote a server or a model) in the chat."""
        # Escaped: shinychat renders a message as markdown, and its sanitizer still
        # lets images and links through.
        await chat.append_message(markdown_text(message))

    mcp = SessionMcp(mcp_config, on_failure=tell_chat)
    for name in autoconnect:
        mcp.check_server(name)  # an unknown name is the app's error, raised at once
    prompts = session_prompts(session)
    conversation = None
    not_saved: str | None = None
    if persistence is not None:
        try:
            conversation = SessionConversation(persistence, session, str(session.ns) or "chat")
        except _NotSaved as exc:
            not_saved = str(exc)  # the session runs unsaved, and the chat says why
    if conversation is not None:
        working_dir = conversation.folder.workspace
    else:
        root = (
            Path(workspace_root)
            if workspace_root is not None
            else Path(tempfile.gettempdir()) / "deputy_shiny"
        )
        root.mkdir(parents=True, exist_ok=True)
        # Model-run code runs as the workspace's owner, never as root (see sandbox.py).
        working_dir = prepare_workspace(tempfile.mkdtemp(prefix="session-", dir=root))

    async def ask_approval(request: ApprovalRequest) -> dict[str, Any]:
        """The modal's answer (TimeoutError, PromptClosed: nobody answered)."""
        return await prompts.ask(
            request.request_id,
            lambda waiting: approval_modal(request, waiting),
            approval_timeout,
            group=request.run_id,
            also_waiting=request.calls_after,
        )

    async def approval_handler(request: ApprovalRequest) -> ApprovalDecision:
        try:
            answer = await ask_approval(request)
        except PromptClosed:
            return ApprovalDecision.deny("The user left before deciding.")
        return decision_from_answer(request, answer)

    async def ask_user(questions: list[Question], context: AskUserContext) -> list[Any]:
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

    folder = None if conversation is None else conversation.folder
    ctx = AgentChatContext(
        session_id=session.id if folder is None else folder.session_id,
        working_dir=working_dir,
        ask_user=ask_user,
        approval_handler=approval_handler if folder is None else None,
        mcp=mcp,
        agent_id=None if folder is None else folder.agent_id,
        approval_dir=None if folder is None else folder.approvals,
        checkpoint_dir=None if folder is None else folder.checkpoints,
    )
    agent = agent_factory(ctx)
    if not isinstance(agent, Agent):
        raise TypeError(f"agent_factory must return an Agent, not {type(agent).__name__}")
    if conversation is not None:
        _check_persistent_agent(agent, ctx)
    _warn_unbound_ask_user(agent, ask_user)
    chat = Chat("chat", history=False)

    async def saved() -> None:
        if conversation is not None:
            note = await conversation.save(agent)
            if note:
                await tell_chat(note)

    handle = AgentChatHandle(
        agent,
        running,
        usage_value,
        prompts.pending,
        tool_events,
        working_dir,
        mcp,
        _prompts=prompts,
        _conversation=conversation,
        _saved=saved,
        _session=session,
    )
    mcp.bind(agent)
    background: set[asyncio.Task[Any]] = set()

    async def autoconnect_one(server: str) -> None:
        # A failure shows in the panel, and SessionMcp tells the chat.
        with contextlib.suppress(McpError):
            await mcp.connect(server)

    connecting: list[asyncio.Task[None]] = []
    for name in autoconnect:
        # Not awaited: the page and other sessions never wait for a server to start.
        task = asyncio.get_running_loop().create_task(autoconnect_one(name))
        background.add(task)
        task.add_done_callback(background.discard)
        connecting.append(task)

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

    streams = 0  # runs, or approvals between a run and its resumption, in progress
    given_up: set[str] = set()  # approvals that failed to resume in this session
    shown: ApprovalContinuation | None = None  # the approval last put to the user

    restored_waiting = False  # a restored approval is about to be (or being) decided

    def _current_pending() -> ApprovalContinuation | None:
        """The durable approval this conversation waits on: not one the conversation
        has moved past (it could never resume), nor one that failed here already (the
        user is never held up by it; a reload offers it again). It reads the approval
        folder: call it in a worker thread."""
        pending = agent.pending_approval()
        if pending is None or pending.id in given_up:
            return None
        return pending if continues_conversation(pending, agent.get_turns()) else None

    async def _stream(message: str | None) -> AsyncIterator[Any]:
        """A run's chunks (``message``), or a waiting approval's (None). With
        persistence, each approval pauses the run durably; the modal's answer resumes
        it, in the same chat message."""
        nonlocal streams, shown, restored_waiting
        streams += 1
        shown = None
        await _set(running, True)
        try:
            if conversation is not None:
                await conversation.ready.wait()
                if not conversation.usable:
                    yield note_chunk("This conversation is open in another window.")
                    return
            if message is not None and restored_waiting:
                # Sent while the conversation came back: its approval is decided first.
                yield note_chunk("An approval is waiting: decide it first, then ask again.")
                return
            if conversation is not None and message is not None:
                try:
                    # The first message keeps the conversation (until then a visitor
                    # leaves nothing on disk).
                    await asyncio.to_thread(conversation.keep)
                except DeputyError as exc:
                    logger.warning("the conversation could not be kept: %s", exc)
                    yield note_chunk("This conversation could not be saved.")
            events = None if message is None else agent.run(message)
            while True:
                if events is not None:
                    paused: list[bool] = []
                    async for chunk in render_events(
                        _until_paused(events, paused),
                        allowed_image_origins=origins,
                        on_event=_on_event,
                    ):
                        yield chunk
                    if not paused:
                        break
                events = await _decide_pending()
                if events is None:
                    break
            if conversation is not None:
                note = await conversation.save(agent)
                if note:
                    yield note_chunk(note)
        except ApprovalResumeError as exc:
            # Decided elsewhere, or one this agent cannot resume (its tools changed).
            logger.warning("a waiting approval could not be resumed: %s", exc)
            if shown is not None:
                given_up.add(shown.id)
            yield note_chunk(_resume_failure(exc))
        except DeputyError as exc:
            # Its record cannot be read (damaged, or removed meanwhile).
            logger.warning("a waiting approval could not be resumed: %s", exc)
            if shown is not None:
                given_up.add(shown.id)
            yield note_chunk(f"The approval could not be resumed ({type(exc).__name__}).")
        finally:
            streams -= 1
            if message is None:
                restored_waiting = False
            await _set(usage_value, agent.usage())
            await _set(running, False)

    async def _decide_pending() -> AsyncIterator[AgentEvent] | None:
        """Show the durable approval the agent waits on; its answer's resumed run, or
        None (nothing waits, or the session ended: the approval stays saved)."""
        nonlocal shown
        pending = shown = await asyncio.to_thread(_current_pending)
        if pending is None:
            return None
        try:
            decision = decision_from_answer(pending.request, await ask_approval(pending.request))
        except PromptClosed:
            return None
        except TimeoutError:
            decision = ApprovalDecision.deny("Nobody approved the call in time, so it is denied.")
        return agent.resume_approval_events(pending.source.path, decision)

    @chat.on_user_submit
    async def _submit(user_input: str) -> None:
        if agent.running or streams:
            await tell_chat("The agent is still working; stop it first or wait.")
            return
        await chat.append_message_stream(_stream(user_input))

    async def _replay(pending: ApprovalContinuation | None) -> None:
        waiting = () if pending is None else (pending.request.call_id,)
        for message in transcript_messages(agent.get_turns(), origins, waiting):
            if message.role == "user":
                await chat.append_message({"role": "user", "content": message.chunks[0]})
                continue
            async with chat.message_stream_context() as stream:
                for chunk in message.chunks:
                    await stream.append(chunk)

    async def _close_for_newer() -> None:
        with contextlib.suppress(Exception):
            await tell_chat("This conversation was opened in another window; it continues there.")
        await session.close()

    async def _restore() -> None:
        nonlocal restored_waiting
        assert conversation is not None
        try:
            await conversation.send_token()
            conversation.sweep_soon()
            if not await conversation.take_over(_close_for_newer):
                await tell_chat(
                    "This conversation is open in another window that did not let go. "
                    "Close it there, then reload this page."
                )
                return
            note = await conversation.load(agent)
            if note:
                await tell_chat(note)
            pending = await asyncio.to_thread(_current_pending)
            restored_waiting = pending is not None
            await _replay(pending)
            await _set(usage_value, agent.usage())
            await _set(tool_events, -1)  # views of the workspace refresh
        finally:
            conversation.ready.set()
        if restored_waiting:
            # The approval resumes only with the tools it was saved with: let the
            # session's MCP servers connect first (each has its own timeouts).
            await asyncio.gather(*connecting, return_exceptions=True)
            await chat.append_message_stream(_stream(None))

    async def _restore_logged() -> None:
        nonlocal restored_waiting
        try:
            await _restore()
        except asyncio.CancelledError:
            raise
        except Exception:
            restored_waiting = False  # never hold the user up for an approval not shown
            # E.g. the browser left while the transcript was sent: nothing is lost (the
            # saved conversation is untouched), and the next visit restores it.
            logger.warning("restoring a saved conversation failed", exc_info=True)

    if conversation is not None:
        restoring = asyncio.get_running_loop().create_task(_restore_logged())
        background.add(restoring)
        restoring.add_done_callback(background.discard)
    elif not_saved is not None:
        telling = asyncio.get_running_loop().create_task(_tell_logged(chat, not_saved))
        background.add(telling)
        telling.add_done_callback(background.discard)

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
        if conversation is not None:
            # Saved, then let go at once: a reload's new session is waiting for it.
            try:
                await conversation.save(agent)
            finally:
                conversation.release()
        await mcp.aclose()  # this session's MCP servers stop
        await agent.aclose()  # stops the session's run_python interpreters
        if conversation is None and not keep_workspaces:
            await asyncio.to_thread(shutil.rmtree, working_dir, True)

    session.on_ended(_end)
    return handle


async def _tell_logged(chat: Chat, message: str) -> None:
    try:
        await chat.append_message(message)
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.warning("a note could not be shown in the chat", exc_info=True)


_foreign_chats: set[asyncio.Task[None]] = set()


def _foreign_session(
    running: reactive.Value[bool],
    usage_value: reactive.Value[AgentUsage],
    tool_events: reactive.Value[int],
) -> AgentChatHandle:
    """A session opened by another origin's page: one line in the chat, and nothing
    else (no agent, no conversation, no prompts; what it sends is answered with the
    same line)."""
    chat = Chat("chat", history=False)

    @chat.on_user_submit
    async def _refuse(_user_input: str) -> None:
        await chat.append_message(FOREIGN_MESSAGE)

    task = asyncio.get_running_loop().create_task(_tell_logged(chat, FOREIGN_MESSAGE))
    _foreign_chats.add(task)  # held until done (a task nothing references may vanish)
    task.add_done_callback(_foreign_chats.discard)

    @render.text
    def usage() -> str:
        return _usage_text(usage_value())

    return AgentChatHandle(
        None, running, usage_value, reactive.value(0), tool_events, None, SessionMcp(None)
    )


async def _until_paused(
    events: AsyncIterator[AgentEvent], paused: list[bool]
) -> AsyncIterator[AgentEvent]:
    """The run's events, less its ``approval_pending`` stop (the modal comes next, not a
    "Stopped" note); ``paused`` gets True when it paused."""
    async for event in events:
        if isinstance(event, StopEvent) and event.stop_reason == "approval_pending":
            paused.append(True)
            continue
        yield event


def _resume_failure(exc: ApprovalResumeError) -> str:
    """What the chat says when a waiting approval cannot be resumed (no server paths)."""
    if isinstance(exc, ApprovalDecidedError):
        return "This approval was decided already (in another window); it runs only once."
    reasons = str(exc).split("cannot resume this approval here: ", 1)[-1]
    return f"This approval can no longer be resumed here: {reasons}"


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
