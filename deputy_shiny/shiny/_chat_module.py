"""The agent chat module: one Agent per browser session behind a streaming shinychat UI.

``agent_chat_ui(id)`` places the chat; ``agent_chat_server(id, agent_factory)`` calls
``agent_factory(ctx)`` once per browser session and streams that session's runs into
the chat. Shiny has one reactive lock for the whole process, so the run, approval
waits and ask_user waits all live in the stream task (shinychat runs it as an
ExtendedTask) and wait on futures that an input effect resolves; reactive values are
set from there holding the lock only for the set.

Examples:
    >>> from shiny import App, ui
    >>> from deputy_shiny import Agent
    >>> from deputy_shiny.shiny import agent_chat_server, agent_chat_ui
    >>> app_ui = ui.page_fillable(agent_chat_ui("assistant"))
    >>> def server(input, output, session):
    ...     agent_chat_server("assistant", lambda ctx: Agent("deputy/demo", **ctx.agent_options()))
    >>> app = App(app_ui, server)
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from htmltools import HTMLDependency, TagList
from shiny import module, reactive, render, ui
from shiny.session import Session
from shiny.ui.fill import as_fill_item, as_fillable_container
from shinychat import Chat

from .._util.version import package_version
from ..agent import Agent
from ..errors import ConfigurationError
from ..events import AgentUsage
from ..mcp.config import ConfigInput as McpConfigInput
from ..mcp.config import McpConfig
from ..persistence.checkpoints import FileRewind
from ..usage import format_cost
from . import _module as kit_module
from ._app_tools import app_tool_scope
from ._attachments import AttachmentPolicy, chat_ui_with_attachments
from ._chat_session import _ChatSession, tell, tell_logged
from ._chat_start import (
    AgentChatContext,
    chat_context,
    open_conversation,
    session_workspace,
    start_agent,
)
from ._conversations import KitPersistence
from ._escape import markdown_text
from ._export import conversation_json, conversation_markdown
from ._feedback import (
    FeedbackCallback,
    bind_feedback_input,
    feedback_dependency,
    session_feedback,
)
from ._history_drawer import serve_history_drawer
from ._image_guard import normalize_origins
from ._mcp_session import SessionMcp
from ._origin import normalize_allowed_origins, session_foreign_origin
from ._prompts import SessionPrompts, session_prompts
from ._render import DEFAULT_FLUSH_INTERVAL, PROGRESS_MESSAGE, check_flush_interval
from ._session_asks import SessionAsks
from ._session_branches import SessionBranches, bind_branches
from ._session_budget import SessionBudget, session_budget
from ._session_conversation import RELOAD_MESSAGE, SessionConversation
from ._strings import DEFAULT_STRINGS, KitStrings
from ._values import cheap_value_names
from ._warm import warm_up_before_serving, warm_up_in_background

logger = logging.getLogger(__name__)

FOREIGN_MESSAGE = DEFAULT_STRINGS.foreign_page


def kit_dependency() -> HTMLDependency:
    """The kit's scripts and stylesheet (modals, MCP panel buttons, the chat's height)."""
    return HTMLDependency(
        name="deputy_shiny",
        version=package_version(),
        source={"package": "deputy_shiny", "subdir": "shiny/www"},
        script=[{"src": "deputy_shiny.js"}, {"src": "deputy_chat_fit.js"}],
        stylesheet={"href": "deputy_shiny.css"},
    )


@dataclass
class AgentChatHandle(kit_module.ExpressInert):
    """What ``agent_chat_server`` returns: the session's agent and reactive state
    (Shiny Express renders it as nothing, so a bare ``agent_chat_server(...)`` line is fine).

    Attributes:
        agent: This session's Agent (None in Shiny Express's stub session, when
            ``agent_factory`` raised: the chat then says so, and once the session has
            ended and the kit has let the agent go).
        running: True while a run streams.
        usage: The conversation's AgentUsage, updated after each run.
        pending_approvals: Prompts (approvals and questions) waiting in this session.
        tool_events: Increments when a tool call ends (refresh views of the workspace).
        working_dir: The session's workspace.
        mcp: This session's MCP connections: ``await handle.mcp.connect(server)``;
            they close when the session ends.
        persistent: True when the conversation is saved (``persistence``).
        budget: Today's spend against the user's budget, as the usage line words it
            (``"Today: 3 of 50 requests · $0.02 of $1.00"``; empty until the first
            read), for an app's own meter; None without ``KitPersistence(budget=)``.
        strings: The kit's words (``agent_chat_server(strings=)``): the panels served
            for this chat use them.

    The shinychat ``Chat`` inside is not handed out: what it could do that bypasses the
    agent (append markup, or messages the agent never sees) goes through the narrow
    methods here instead. :meth:`update_user_input` fills the input box,
    :meth:`submit` sends a prompt through the agent's run, :meth:`append_message` shows
    the app's own note as text, and :meth:`conversation_markdown` /
    :meth:`conversation_json` give the conversation as a file
    (``conversation_panel_ui`` offers both as downloads).

    Examples:
        >>> from shiny import reactive
        >>> def server(input, output, session):
        ...     handle = agent_chat_server("chat", lambda ctx: Agent("deputy/demo",
        ...         working_dir=ctx.working_dir, approval_handler=ctx.approval_handler))
        ...     @reactive.effect
        ...     @reactive.event(input.explain)
        ...     async def _explain() -> None:
        ...         await handle.submit("Explain this chart")
    """

    agent: Agent | None
    running: reactive.Value[bool]
    usage: reactive.Value[AgentUsage]
    pending_approvals: reactive.Value[int]
    tool_events: reactive.Value[int]
    working_dir: Path | None
    mcp: SessionMcp
    budget: reactive.Value[str] | None = None
    strings: KitStrings = field(default=DEFAULT_STRINGS, repr=False)
    _prompts: SessionPrompts | None = field(default=None, repr=False)
    _conversation: SessionConversation | None = field(default=None, repr=False)
    _session: Session | None = field(default=None, repr=False)
    _chat_session: _ChatSession | None = field(default=None, repr=False)

    @property
    def persistent(self) -> bool:
        """True when this session's conversation is saved (``persistence``)."""
        return self._conversation is not None

    def update_user_input(
        self,
        value: str | None = None,
        *,
        placeholder: str | None = None,
        submit: bool = False,
        focus: bool = False,
    ) -> None:
        """Set the chat's input box: its text (``value``), its ``placeholder``, and
        ``focus`` it; ``submit=True`` (needs ``value``) sends it as if the user pressed
        Enter, through the same path as typing. The text is the input's value, never
        markup. Does nothing in a session without an agent."""
        if submit and value is None:
            raise ConfigurationError("update_user_input(submit=True) needs a value")
        if self._chat_session is not None:
            self._chat_session.chat.update_user_input(
                value=value, placeholder=placeholder, submit=submit, focus=focus
            )

    async def submit(self, prompt: str) -> bool:
        """Send ``prompt`` to the agent for the user (an "Explain this chart" button):
        it shows as the user's message (rendered inert, as model text is) and runs like
        a typed one, under the same permissions and approvals. Returns False, and the
        chat says the agent is busy, while a run is in progress; False in a session
        without an agent. Await it from a reactive effect (a button's), as the chat
        awaits a typed message."""
        if self._chat_session is None:
            return False
        return await self._chat_session.send(prompt)

    async def append_message(self, text: str) -> None:
        """Show the app's own note in the chat, as plain text (escaped: no markdown, no
        HTML, so it may quote anything). Only the page shows it: the agent never sees it
        and the downloads leave it out. Does nothing in a session without an agent."""
        if self._chat_session is not None:
            await tell(self._chat_session.chat, text)

    def conversation_markdown(self) -> str:
        """The conversation as the agent has it, as Markdown: each message, each tool
        call's arguments and result as code; no HTML from the model, no image that
        loads from an origin the chat does not allow, no system prompt."""
        if self._chat_session is None:
            return conversation_markdown(())
        session = self._chat_session
        return conversation_markdown(
            session.agent.get_turns(), allowed_image_origins=session.image_origins
        )

    def conversation_json(self) -> str:
        """The conversation as the agent has it, as JSON: ``{"format", "exported_at",
        "turns"}``, each turn as ``Turn.model_dump`` writes it (no system prompt)."""
        turns = () if self._chat_session is None else self._chat_session.agent.get_turns()
        return conversation_json(turns)

    async def confirm(self, title: str, body: str, confirm_label: str) -> bool:
        """Ask this session's user a yes/no question in a modal (queued behind any
        approval); False when they cancel, or the session ends or times out first.
        Await it from a task, never from a reactive effect."""
        if self._prompts is None:
            return False
        return await self._prompts.confirm(title, body, confirm_label, self.strings)

    async def rewind_files(self, checkpoint_id: str) -> FileRewind:
        """``agent.rewind_files`` (not during a run), then the conversation is saved."""
        if self.agent is None:
            raise ConfigurationError("This session has no agent.")
        rewind = await asyncio.to_thread(self.agent.rewind_files, checkpoint_id)
        async with reactive.lock():  # views of the workspace refresh
            with reactive.isolate():
                self.tool_events.set(self.tool_events() - 1)
            await reactive.flush()
        if self._chat_session is not None:
            await self._chat_session.saved()
        return rewind

    def on_feedback(self, callback: FeedbackCallback) -> Callable[[], None]:
        """Call ``callback(record)`` (a :class:`~deputy_shiny.feedback.FeedbackRecord`;
        sync or async) after each rating this session's user gives a reply (the chat
        placed with ``agent_chat_ui(id, feedback=True)``), once it is stored; the
        returned function stops that. A callback's error is logged, never shown."""
        if self._chat_session is None or self._chat_session.feedback is None:
            return lambda: None
        return self._chat_session.feedback.on_feedback(callback)

    async def new_conversation(self) -> None:
        """Start over: the page reloads with an empty chat and a new workspace. With
        ``persistence`` the conversation left stays in the user's list (the chat's
        history drawer), to switch back to."""
        if self._conversation is not None:
            await self._conversation.start_new()
        elif self._session is not None:
            await self._session.send_custom_message(RELOAD_MESSAGE, {})


@kit_module.ui
def agent_chat_ui(
    *,
    attachments: bool | Iterable[str] | AttachmentPolicy | None = None,
    strings: KitStrings = DEFAULT_STRINGS,
    feedback: bool = False,
    **chat_ui_options: Any,
) -> TagList:
    """The chat (with its stop button) and a usage line, for ``agent_chat_server``.

    ``feedback=True`` puts "Good reply" and "Bad reply" buttons and an optional comment
    under each assistant reply; each rating is stored for the user (with
    ``persistence``) and handed to ``handle.on_feedback`` callbacks (see the kit's
    "Feedback" page).

    The chat fills its container and scrolls its own messages, so the newest reply and
    the input stay on screen: in a fillable container (``page_fillable``, a fillable
    ``page_sidebar``, a card) it is a fill item; where the page flows instead (a page
    that is not fillable, or any page on a phone) it takes the screen's height below
    its top. ``attachments`` (off by default) shows shinychat's attach button: True for
    every kind, a list of kinds (``["image", "pdf", "csv"]``) or an
    :class:`~deputy_shiny.shiny.AttachmentPolicy` with its caps; the kit checks each file
    by its content, saves it in the workspace's ``uploads/`` and names it in the user's
    turn (images also go to a model that takes them). ``strings`` (the app's
    :class:`KitStrings`, the same object as the server's) word what the page shows before
    the server answers (the input's placeholder). Extra keyword arguments go to
    shinychat's ``chat_ui``. The first call (or the first
    ``agent_chat_server``) starts importing litellm in a worker thread, so the first
    reply does not wait for it. Called as an app module is imported (no event loop
    running), it returns once that warm-up is done, so the app serves warm.
    """
    warm_up_before_serving()  # the UI is built as the app starts: serve once warm
    # shinychat's history button shows only where the server serves the drawer (saved
    # conversations); the edit control turns its history on everywhere (deputy_shiny.css).
    options = {"enable_cancel": True, "placeholder": strings.input_placeholder, **chat_ui_options}
    # One fill item that is itself a fillable container: the chat grows into what its
    # container leaves and the usage line keeps its own height under it.
    chat = ui.div(
        chat_ui_with_attachments(attachments, options, module.resolve_id("chat")),
        ui.output_text("usage", inline=False).add_class("deputy-usage"),
        class_="deputy-chat",
        data_deputy_feedback=strings.feedback_words() if feedback else None,
    )
    extra = [feedback_dependency()] if feedback else []
    return TagList(kit_dependency(), *extra, as_fillable_container(as_fill_item(chat)))


def _usage_text(usage: AgentUsage, strings: KitStrings = DEFAULT_STRINGS) -> str:
    return strings.format(
        "usage_line",
        requests=usage.requests,
        tokens=usage.total_tokens,
        tool_calls=usage.tool_calls,
        cost=format_cost(usage),  # the one wording, shared with the reference app's meter
    )


@kit_module.server
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
    flush_interval: float = DEFAULT_FLUSH_INTERVAL,
    mcp_config: McpConfigInput | McpConfig | None = None,
    mcp_servers: Iterable[str] = (),
    persistence: KitPersistence | None = None,
    allowed_origins: Iterable[str] = (),
    trust_forwarded: bool = False,
    label: str | None = None,
    strings: KitStrings = DEFAULT_STRINGS,
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
        flush_interval: Seconds between the text updates a session sends the browser
            (default 0.04): model text arriving meanwhile goes together, also when the
            model pauses. Tool cards, approvals, questions, notes and the end of a reply
            are never delayed (the text before them goes first). 0 sends each model
            chunk on its own; a negative or non-finite value is a ``ConfigurationError``.
        mcp_config: The MCP config (path, dict or ``McpConfig``) whose servers this
            session may connect (``handle.mcp.connect``, the MCP panel).
        mcp_servers: Servers of ``mcp_config`` to connect as each session starts, in the
            background: their tools join the session's agent when ready, and the chat
            says so if one fails. Each session starts its own server processes, and
            they stop when it ends.
        persistence: Keep each user's conversation (a
            :class:`~deputy_shiny.shiny.KitPersistence`): it is saved after every run and
            comes back on a reload, with its workspace and any approval still waiting
            (as a modal, decided once); each user's conversations are listed in the
            chat's history drawer. The factory passes the user's ids and folders on
            with ``Agent(model, **ctx.agent_options())``.
        allowed_origins: Origins (``https://portal.example``) other than the app's own
            whose pages may open this app's chat (e.g. a page that embeds it). A session
            opened by any other origin's page (its websocket's ``Origin``) is refused:
            the chat says so in one line, and it gets no agent (``agent_factory`` is not
            called), no conversation, no prompts.
        trust_forwarded: The app's own origin is taken from ``X-Forwarded-Proto`` and
            ``X-Forwarded-Host`` rather than the request's ``Host``: only when a reverse
            proxy in front of the app sets them (any client can send them).
        label: The chat's name in its approval and question modals ("Asked by
            Analyst"), shown as text; default: the module id, shown only when the page
            has more than one chat (with one, the modal names no asker). A page's chats
            share one modal queue, and a waiting modal leaves the other chats usable.
            ``""`` names no chat.
        strings: Every word the kit shows (:class:`KitStrings`), for another language;
            give ``agent_chat_ui`` and the panels the same. Default: English.
    """
    warm_up_in_background()  # an Express app builds no UI before its first session
    origins = normalize_origins(allowed_image_origins)
    interval = check_flush_interval(flush_interval)
    autoconnect = _autoconnect(mcp_servers, mcp_config)
    allowed = normalize_allowed_origins(allowed_origins)
    if session.is_stub_session():
        return _handle_without_agent(*_handle_values(), strings)
    if session_foreign_origin(session, allowed, trust_forwarded=trust_forwarded) is not None:
        return _session_without_agent(_foreign_note(strings), strings)
    chat = _new_chat()
    mcp = _session_mcp(mcp_config, chat, autoconnect)
    prompts = session_prompts(session)
    asks = SessionAsks(prompts, approval_timeout, label, strings, default_name=str(session.ns))
    conversation, not_saved = open_conversation(persistence, session, strings)
    budget, budget_value = _budget(persistence, session, conversation, strings)
    working_dir = session_workspace(conversation, workspace_root)
    ctx = chat_context(session, working_dir, asks, mcp, conversation)
    agent = start_agent(agent_factory, ctx, conversation, session, keep_workspaces, strings)
    if isinstance(agent, str):  # the factory raised: the chat says so, in one line
        return _session_without_agent(agent, strings)
    values = _ReactiveValues(*_handle_values(), budget_value)
    chat_session = _ChatSession(
        agent=agent,
        chat=chat,
        values=values,
        asks=asks,
        mcp=mcp,
        conversation=conversation,
        working_dir=working_dir,
        budget=budget,
        image_origins=origins,
        flush_interval=interval,
        keep_workspace=keep_workspaces,
        strings=strings,
        **_session_hooks(session, persistence, agent),
    )
    served = _Served(chat, values, prompts, autoconnect, not_saved)
    return _serve_session(input, session, chat_session, served)


@dataclass(frozen=True)
class _Served:
    """What ``agent_chat_server`` made for a session that the binding needs as made
    (the chat session holds them through narrower protocols)."""

    chat: Chat
    values: _ReactiveValues
    prompts: SessionPrompts
    autoconnect: tuple[str, ...]
    not_saved: str | None


def _serve_session(
    input: Any, session: Session, chat_session: _ChatSession, served: _Served
) -> AgentChatHandle:
    """Bind the session's chat (its inputs, stop button, usage line and drawer), start
    it, and make its handle; the session's end lets go of them (``_SessionLink``)."""
    chat, values, prompts, strings = (
        served.chat,
        served.values,
        served.prompts,
        chat_session.strings,
    )
    link = _SessionLink(chat_session)
    _bind_chat_inputs(input, session, chat, link)
    _bind_stop_and_usage(input, link, values.usage, values.budget, strings)
    chat_session.start(served.autoconnect, served.not_saved)
    link.cancel_end = session.on_ended(link.end)
    link.handle = AgentChatHandle(
        chat_session.agent,
        values.running,
        values.usage,
        prompts.pending,
        values.tool_events,
        chat_session.working_dir,
        chat_session.mcp,
        values.budget,
        strings,
        _prompts=prompts,
        _conversation=chat_session.conversation,
        _session=session,
        _chat_session=chat_session,
    )
    serve_history_drawer(input, session, chat, link.handle, chat_session.conversation)
    return link.handle


def _foreign_note(strings: KitStrings) -> str:
    """The refusal another origin's page sees, as markdown: the kit's English as
    written (plain prose), an app's own words escaped (they show as text)."""
    text = strings.foreign_page
    return text if text == FOREIGN_MESSAGE else markdown_text(text)


def _handle_values() -> tuple[
    reactive.Value[bool], reactive.Value[AgentUsage], reactive.Value[int]
]:
    """The handle's ``running``, ``usage`` and ``tool_events`` (named: see ``_values``)."""
    return (
        reactive.value(False, name="deputy_running"),
        reactive.value(AgentUsage(), name="deputy_usage"),
        reactive.value(0, name="deputy_tool_events"),
    )


def _autoconnect(mcp_servers: Iterable[str], mcp_config: object) -> tuple[str, ...]:
    """The servers to connect as each session starts (they need a config naming them)."""
    autoconnect = tuple(mcp_servers)
    if autoconnect and mcp_config is None:
        raise ConfigurationError("mcp_servers needs mcp_config (the config that names them)")
    return autoconnect


def _session_mcp(
    mcp_config: McpConfigInput | McpConfig | None, chat: Chat, autoconnect: tuple[str, ...]
) -> SessionMcp:
    """The session's MCP connections; a failure is told in ``chat``."""
    mcp = SessionMcp(mcp_config, on_failure=functools.partial(tell, chat))
    for name in autoconnect:
        mcp.check_server(name)  # an unknown name is the app's error, raised at once
    return mcp


def _session_hooks(
    session: Session, persistence: KitPersistence | None, agent: Agent
) -> dict[str, Any]:
    """What a ``_ChatSession`` is given of Shiny's session: closing it, sending a tool
    card's progress, the scope the app's own tools run in (the session, the app's or
    its module's, that called ``agent_chat_server``: see ``_app_tools``), the chat's
    namespaced id, and its replies' ratings (see ``_feedback``)."""
    return {
        "close_session": session.close,
        "send_progress": functools.partial(session.send_custom_message, PROGRESS_MESSAGE),
        "tool_scope": app_tool_scope(kit_module.caller_session() or session),
        "chat_id": session.ns("chat"),  # whose attachments agent_chat_ui declared
        "feedback": session_feedback(session, persistence, agent),
    }


@dataclass(eq=False)
class _SessionLink:
    """The one way from Shiny's per-session objects (the chat's submit effect, the stop
    button's, the ``on_ended`` callback) to the kit's :class:`_ChatSession`, cut when the
    session has ended, together with the handle's references to it and its agent.

    Shiny's session is a tangle of reference cycles (the session and its outputs, its
    effects and values), freed only by a full garbage collection: with litellm's
    start-up heap that runs every 15-25 s under load, so ended sessions' agents would pile
    up beside the live ones. Cut loose here, the agent, its conversation and the
    ``_ChatSession`` are freed by reference count as the session's cleanup finishes.
    """

    chat_session: _ChatSession | None
    handle: AgentChatHandle | None = None
    cancel_end: Callable[[], None] | None = None
    branches: SessionBranches | None = None

    async def submit(self, user_input: str, attachments: list[Any]) -> None:
        if self.chat_session is not None:
            await self.chat_session.submit(user_input, tuple(attachments))

    def stop(self) -> None:
        if self.chat_session is not None:
            self.chat_session.stop()

    def rate(self, value: object) -> None:
        if self.chat_session is not None and self.chat_session.feedback is not None:
            self.chat_session.feedback.receive(value)

    async def end(self) -> None:
        chat_session = self.chat_session
        if chat_session is None:
            return
        if self.branches is not None:
            self.branches.close()
        try:
            await chat_session.end()
        finally:
            self.chat_session = self.branches = None
            if self.handle is not None:
                self.handle.agent = None
                self.handle._chat_session = None
            if self.cancel_end is not None:
                self.cancel_end()  # the session's callback list lets go of this link
            self.handle = self.cancel_end = None


def _budget(
    persistence: KitPersistence | None,
    session: Session,
    conversation: SessionConversation | None,
    strings: KitStrings = DEFAULT_STRINGS,
) -> tuple[SessionBudget | None, reactive.Value[str] | None]:
    """The session's budget, saved or not (with ``KitPersistence(budget=)``), and the
    value its usage line is shown in (its notes in ``strings``)."""
    budget = session_budget(persistence, session, conversation)
    if budget is not None:
        budget.strings = strings
    return budget, None if budget is None else reactive.value("", name="deputy_budget")


def _bind_stop_and_usage(
    input: Any,
    chat_session: _SessionLink,
    usage_value: reactive.Value[AgentUsage],
    budget_value: reactive.Value[str] | None = None,
    strings: KitStrings = DEFAULT_STRINGS,
) -> None:
    """The stop button stops the run; the usage line shows the conversation's usage
    (and, with a budget, today's spend against it); a reply's rating goes to the
    session (see ``_feedback``)."""
    bind_feedback_input(input, chat_session.rate)

    @reactive.effect
    @reactive.event(input.chat_cancel)  # no ignore_init: see _prompts.session_prompts
    def _stop() -> None:
        chat_session.stop()

    @render.text
    def usage() -> str:
        text = _usage_text(usage_value(), strings)
        today = "" if budget_value is None else budget_value()
        return f"{text} · {today}" if today else text


@dataclass
class _ReactiveValues:
    """The handle's reactive values, set from the stream task: holding the lock only for
    the set, then flushing (Shiny has one reactive lock for the whole process)."""

    running: reactive.Value[bool]
    usage: reactive.Value[AgentUsage]
    tool_events: reactive.Value[int]
    budget: reactive.Value[str] | None = None

    async def set_running(self, running: bool) -> None:
        await _set(self.running, running)

    async def set_usage(self, usage: AgentUsage) -> None:
        await _set(self.usage, usage)

    async def set_tool_events(self, count: int) -> None:
        await _set(self.tool_events, count)

    async def set_budget(self, line: str) -> None:
        if self.budget is not None:
            await _set(self.budget, line)


async def _set(value: reactive.Value[Any], new: Any) -> None:
    async with reactive.lock():
        value.set(new)
        await reactive.flush()


def _bind_chat_inputs(input: Any, session: Session, chat: Chat, link: _SessionLink) -> None:
    """The chat's inputs reach the session through ``link``: a message the user sent, and
    an edit of a past one or a switch between its versions (``_session_branches``)."""
    assert link.chat_session is not None
    chat.on_user_submit(link.submit)
    link.branches = SessionBranches(link.chat_session, chat, _chat_actions(session, chat))
    bind_branches(input, lambda: link.branches)
    link.chat_session.in_background(link.branches.start())


def _chat_actions(session: Session, chat: Chat) -> Callable[[dict[str, Any]], Awaitable[None]]:
    """Sends shinychat's own actions (``{"type": ...}``) to ``chat`` in the browser."""

    async def send(action: dict[str, Any]) -> None:
        await session.send_custom_message("shinyChatMessage", {"id": chat.id, "action": action})

    return send


def _new_chat() -> Chat:
    """The session's shinychat ``Chat``; the values it makes inside are named cheaply
    (each would walk ``inspect.stack()``: see ``_values``)."""
    with cheap_value_names():
        return Chat("chat", history=False)


_agentless_notes: set[asyncio.Task[None]] = set()


def _handle_without_agent(
    running: reactive.Value[bool],
    usage_value: reactive.Value[AgentUsage],
    tool_events: reactive.Value[int],
    strings: KitStrings = DEFAULT_STRINGS,
) -> AgentChatHandle:
    """The handle of a session that gets no agent (Express's stub, another origin's page)."""
    return AgentChatHandle(
        None,
        running,
        usage_value,
        reactive.value(0, name="deputy_pending_approvals"),
        tool_events,
        None,
        SessionMcp(None),
        strings=strings,
    )


def _session_without_agent(message: str, strings: KitStrings = DEFAULT_STRINGS) -> AgentChatHandle:
    """A session that gets no agent (another origin's page, or a factory that raised):
    ``message`` (markdown the kit made safe) in the chat, and nothing else (no
    conversation, no prompts); what it sends is answered with the same line, so the
    input never waits on a reply that cannot come."""
    values = _handle_values()
    chat = _new_chat()

    @chat.on_user_submit
    async def _refuse(_user_input: str) -> None:
        await chat.append_message(message)

    task = asyncio.get_running_loop().create_task(tell_logged(chat, message))
    _agentless_notes.add(task)  # held until done (a task nothing references may vanish)
    task.add_done_callback(_agentless_notes.discard)

    @render.text
    def usage() -> str:
        return _usage_text(values[1](), strings)

    return _handle_without_agent(*values, strings)


__all__ = ["AgentChatContext", "AgentChatHandle", "agent_chat_server", "agent_chat_ui"]
