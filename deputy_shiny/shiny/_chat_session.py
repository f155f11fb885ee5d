"""One browser session's chat as a state machine: :class:`_ChatSession`.

The session's state is attributes of one object and its transitions are methods:
:meth:`~_ChatSession.start` (connect the configured MCP servers, restore the saved
conversation), :meth:`~_ChatSession.restore` (the transcript and a waiting approval
coming back on reload), :meth:`~_ChatSession.submit` (a user message),
:meth:`~_ChatSession.stream` (a run, or a waiting approval's, into the chat),
:meth:`~_ChatSession.decide_pending` (a durable approval put to the user and resumed),
:meth:`~_ChatSession.stop` (interrupt) and :meth:`~_ChatSession.end` (release the
agent, the MCP servers and the workspace). Live approvals and ask_user questions are
:class:`~._session_asks.SessionAsks`'.

Shiny reaches it only through narrow collaborators: a :class:`ChatView` (what it uses
of shinychat's ``Chat``), :class:`HandleValues` (where the handle's reactive values are
set), the session's modal queue and a ``close_session`` callable. So a unit test drives
it without a browser or a Shiny server (``tests/test_chat_session.py``), and
``agent_chat_server`` only wires it to the Shiny session.

Everything here runs in the stream task or a task of the session's own, never inside a
reactive effect that waits (Shiny has one reactive lock for the whole process).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

from ..agent import Agent
from ..approvals import ApprovalDecision
from ..errors import (
    ApprovalDecidedError,
    ApprovalResumeError,
    DeputyError,
    McpError,
    RunResumeError,
    StoreUnavailableError,
)
from ..events import AgentEvent, AgentUsage, StopEvent
from ..messages import UserContent
from ..persistence.approvals import ApprovalContinuation, continues_conversation
from ..tools._scope import ToolScope
from ..tools._scope import tool_scope as scoped_tools
from ..usage import charged_to
from ._answers import decision_from_answer
from ._attachments import AttachmentsRefused, PendingMessage, SessionUploads
from ._conversation_titles import retitle
from ._escape import markdown_text
from ._feedback import SessionFeedback
from ._image_guard import ImageGuard
from ._mcp_session import SessionMcp
from ._prompts import PromptClosed, SessionPrompts
from ._render import DEFAULT_FLUSH_INTERVAL, ProgressSender, note_chunk, render_events
from ._session_asks import SessionAsks
from ._session_budget import SessionBudget
from ._session_conversation import SessionConversation
from ._session_resume import ResumedRun, find_run
from ._strings import DEFAULT_STRINGS, KitStrings
from ._transcript import TranscriptMessage, transcript_messages
from ._values import cheap_value_names

logger = logging.getLogger(__name__)

__all__ = ["ChatView", "HandleValues", "_ChatSession", "tell", "tell_logged"]

BUSY_MESSAGE = DEFAULT_STRINGS.busy
END_WAIT_POLLS = 200  # x 0.05 s: how long the end waits for an interrupted run


class ChatView(Protocol):
    """What a session uses of shinychat's ``Chat``."""

    async def append_message(self, message: Any) -> Any: ...

    async def append_message_stream(self, message: AsyncIterable[Any]) -> Any: ...

    def message_stream_context(self) -> AbstractAsyncContextManager[Any]: ...

    def update_user_input(
        self,
        *,
        value: str | None = None,
        placeholder: str | None = None,
        submit: bool = False,
        focus: bool = False,
    ) -> Any: ...


class HandleValues(Protocol):
    """Where a session sets what the handle's reactive values show."""

    async def set_running(self, running: bool) -> None: ...

    async def set_usage(self, usage: AgentUsage) -> None: ...

    async def set_tool_events(self, count: int) -> None: ...

    async def set_budget(self, line: str) -> None: ...


async def tell(chat: ChatView, message: str) -> None:
    """Say ``message`` (plain text, which may quote a server or a model) in the chat."""
    # Escaped: shinychat renders a message as markdown, and its sanitizer still lets
    # images and links through.
    await chat.append_message(markdown_text(message))


async def tell_logged(chat: ChatView, message: str) -> None:
    """Show the kit's own ``message`` from a background task; a failure is logged."""
    try:
        await chat.append_message(message)
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.warning("a note could not be shown in the chat", exc_info=True)


class _ChatSession:
    """One browser session's chat: its agent, conversation and runs.

    Args:
        agent: The session's Agent (from the app's factory).
        chat: The chat it streams into.
        values: Where ``running``, ``usage`` and ``tool_events`` are set.
        asks: The session's approvals and questions (its modal queue).
        mcp: The session's MCP connections, bound to ``agent`` as it starts.
        conversation: The saved conversation (with persistence), else None.
        budget: The user's daily budget (``KitPersistence(budget=)``, saved or not),
            which every request of the session's runs is charged to; else None.
        working_dir: The session's workspace.
        image_origins: Origins images in model text may load from (normalized).
        flush_interval: Seconds between text updates sent to the browser (0: one per
            model chunk); see :func:`~._render.render_events`.
        keep_workspace: Keep ``working_dir`` when the session ends (without persistence).
        close_session: Closes the browser session (a newer one took the conversation).
        send_progress: Sends a running tool card's progress to the browser (None: not
            shown); see :func:`~._render.render_events`.
        tool_scope: Where the app's own tools run (the session that called
            ``agent_chat_server``; see ``_app_tools``); None: in the stream task's.
        chat_id: The chat's namespaced id: the attachments ``agent_chat_ui`` declared
            for it are accepted (None: none are).
        strings: The words of the notes it writes (the app's ``KitStrings``).
        feedback: The session's replies and their ratings (see ``_feedback``), or None.

    Examples:
        >>> _ChatSession.__name__
        '_ChatSession'
    """

    def __init__(
        self,
        *,
        agent: Agent,
        chat: ChatView,
        values: HandleValues,
        asks: SessionAsks,
        mcp: SessionMcp,
        conversation: SessionConversation | None,
        working_dir: Path,
        budget: SessionBudget | None = None,
        image_origins: frozenset[str] = frozenset(),
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        keep_workspace: bool = False,
        close_session: Callable[[], Awaitable[None]],
        send_progress: ProgressSender | None = None,
        tool_scope: ToolScope | None = None,
        chat_id: str | None = None,
        strings: KitStrings = DEFAULT_STRINGS,
        feedback: SessionFeedback | None = None,
    ) -> None:
        self.agent = agent
        self.chat = chat
        self.values = values
        self.asks = asks
        self.mcp = mcp
        self.conversation = conversation
        self.budget = budget
        self.working_dir = working_dir
        self.image_origins = image_origins
        self.flush_interval = flush_interval
        self.keep_workspace = keep_workspace
        self._close_session = close_session
        self.send_progress = send_progress
        self.tool_scope = tool_scope
        self.strings = strings
        self.feedback = feedback
        self.streams = 0  # runs, or approvals between a run and its resumption, in progress
        self.ended_calls = 0  # a plain count: the stream task may not read reactive values
        self.given_up: set[str] = set()  # approvals that failed to resume in this session
        self.shown: ApprovalContinuation | None = None  # the approval last put to the user
        self.restored_waiting = False  # a restored approval or run is about to be (or being) met
        self.resumed: ResumedRun | None = None  # a run whose server died, to pick up
        self.user_stopped = False  # the stop button was pressed during this stream
        self.starting = False  # the app sent a message whose stream has not started yet
        self.ending = False  # the browser session ended
        self.connecting: list[asyncio.Task[None]] = []  # the configured MCP servers' connects
        self.background: set[asyncio.Task[Any]] = set()  # held until done, cancelled at end
        self.uploads = SessionUploads(chat_id, working_dir)
        if feedback is not None:
            feedback.conversation = conversation  # each reply's run is kept with it

    @property
    def prompts(self) -> SessionPrompts:
        """The session's modal queue."""
        return self.asks.prompts

    # ------------------------------------------------------------------ start, restore

    def start(self, autoconnect: tuple[str, ...] = (), not_saved: str | None = None) -> None:
        """The session has started: connect ``autoconnect`` in the background, then
        restore the saved conversation, or say why nothing is saved (``not_saved``)."""
        self.mcp.bind(self.agent)
        for name in autoconnect:
            # Not awaited: the page and other sessions never wait for a server to start.
            self.connecting.append(self.in_background(self._autoconnect(name)))
        if self.conversation is not None:
            self.in_background(self._restore_logged())
        else:
            if not_saved is not None:
                self.in_background(tell_logged(self.chat, not_saved))
            if self.budget is not None:  # today's spend, shown as it starts
                self.in_background(self._charge())

    def in_background(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run ``work`` in a task of the session's, cancelled when it ends."""
        task = asyncio.ensure_future(work)
        self.background.add(task)  # a task nothing references may vanish
        task.add_done_callback(self.background.discard)
        return task

    async def _autoconnect(self, server: str) -> None:
        # A failure shows in the panel, and SessionMcp tells the chat.
        with contextlib.suppress(McpError):
            await self.mcp.connect(server)

    async def _restore_logged(self) -> None:
        try:
            await self.restore()
        except asyncio.CancelledError:
            raise
        except Exception:
            self.restored_waiting = False  # never hold the user up for an approval not shown
            # E.g. the browser left while the transcript was sent: nothing is lost (the
            # saved conversation is untouched), and the next visit restores it.
            logger.warning("restoring a saved conversation failed", exc_info=True)

    async def restore(self) -> None:
        """Take the saved conversation over (closing an older window of the same user),
        load it, replay its transcript, then stream its waiting approval, if any."""
        conversation = self.conversation
        assert conversation is not None
        try:
            await conversation.send_token()
            conversation.sweep_soon()
            try:
                if not await conversation.take_over(self._close_for_newer):
                    await tell(self.chat, self.strings.not_let_go)
                    return
                note = await conversation.load(self.agent)
            except StoreUnavailableError as exc:
                # Nothing is held or loaded, so nothing is saved over what the store has.
                logger.warning("the conversation store cannot be reached: %s", exc)
                conversation.release()
                await tell(self.chat, self.strings.store_down_at_start)
                return
            if note:
                await tell(self.chat, note)
            await self._charge()
            pending = await self.current_pending()
            run = None if pending is not None else await find_run(self.agent)
            if run is not None:  # its reply goes on here (_session_resume)
                self.resumed = ResumedRun(self.agent, run, self.image_origins, self.strings)
            self.restored_waiting = pending is not None or run is not None
            await self.replay(pending)
            if self.resumed is not None:
                await self._show(self.resumed.before)
            await self.values.set_usage(self.agent.usage())
            await self.values.set_tool_events(-1)  # views of the workspace refresh
        finally:
            conversation.ready.set()
        if self.restored_waiting:
            # The approval resumes only with the tools it was saved with: let the
            # session's MCP servers connect first (each has its own timeouts).
            await asyncio.gather(*self.connecting, return_exceptions=True)
            await self._stream_message(self.stream(None))

    async def replay(self, pending: ApprovalContinuation | None) -> None:
        """Show the agent's conversation in the chat (``pending``: the approval the
        conversation waits on, whose call shows no card: its modal stands for it)."""
        waiting = () if pending is None else (pending.request.call_id,)
        turns = self.agent.get_turns()
        ends = await self._show(transcript_messages(turns, self.image_origins, waiting))
        # The replies shown again may be rated (not while a resumed run's messages follow
        # them: the script places the ids on the chat's last replies).
        if self.feedback is not None and ends and self.resumed is None:
            await self.feedback.restored(turns, ends)

    async def _show(self, messages: list[TranscriptMessage]) -> list[int]:
        """Show ``messages``; where each assistant message ends (its ``turns_to``)."""
        ends: list[int] = []
        for message in messages:
            if message.role == "user":
                await self.chat.append_message({"role": "user", "content": message.chunks[0]})
                continue
            async with self.chat.message_stream_context() as stream:
                for chunk in message.chunks:
                    await stream.append(chunk)
            ends.append(message.turns_to)
        return ends

    async def _close_for_newer(self) -> None:
        with contextlib.suppress(Exception):
            await tell(self.chat, self.strings.taken_over)
        await self._close_session()

    async def saved(self) -> None:
        """Save the conversation now (with persistence); the chat says if that failed."""
        if self.conversation is not None:
            note = await self.conversation.save(self.agent)
            if note:
                await tell(self.chat, note)

    # ------------------------------------------------------------------ runs

    async def submit(self, user_input: str, attachments: tuple[Any, ...] = ()) -> None:
        """The user sent ``user_input`` (with shinychat's ``attachments``): stream its
        run, unless one is in progress. The attachments are checked and saved in the
        stream (``_attachments``); a chat that offers none refuses them there."""
        if self.agent.running or self.streams or self.starting:
            await tell(self.chat, self.strings.busy)
            return
        message: str | PendingMessage = user_input
        if attachments:
            message = PendingMessage(self.uploads, user_input, attachments)
        await self._stream_message(self.stream(message))

    async def send(self, prompt: str) -> bool:
        """The app sends ``prompt`` for the user: it shows as the user's message (rendered
        inert, as a restored one is) and runs as if typed. False, with the busy note, when
        a run is in progress."""
        if self.agent.running or self.streams or self.starting:
            await tell(self.chat, self.strings.busy)
            return False
        # Busy from now on: the stream task starts later, and a second click may come first.
        self.starting = True
        try:
            guard = ImageGuard(self.image_origins)
            shown = guard.feed(prompt) + guard.flush()
            await self.chat.append_message({"role": "user", "content": shown})
            await self._stream_message(self.stream(prompt))
        except BaseException:
            self.starting = False
            raise
        return True

    async def _stream_message(self, chunks: AsyncIterator[Any]) -> None:
        # shinychat makes an ExtendedTask (three unnamed reactive values) for every
        # streamed message: named cheaply, not by shiny's walk of the whole stack.
        # The stream task copies this context: the app's tools run in the app's session.
        with cheap_value_names(), scoped_tools(self.tool_scope):
            await self.chat.append_message_stream(chunks)

    def stop(self) -> None:
        """The stop button: end the stream in whatever state it is. The run is
        interrupted (mid-stream, in a tool, a subagent, a live approval or question), and
        every prompt this chat waits on is answered "stop": a durable approval waits
        outside any run (the run paused, saved it and ended), so no interrupt reaches it;
        it is denied and its record closed as stopped, never left pending. The stream
        ends with no note of the kit's: shinychat marks a reply the user stopped
        "Response cancelled" itself."""
        self.user_stopped = True
        self.agent.interrupt("interrupted")
        self.asks.stop()

    async def stream(self, message: str | PendingMessage | None) -> AsyncIterator[Any]:
        """A run's chunks (``message``), or a waiting approval's (None). With
        persistence, each approval pauses the run durably; the modal's answer resumes
        it, in the same chat message."""
        self.streams += 1
        self.starting = False
        self.shown = None
        self.user_stopped = False
        await self.values.set_running(True)
        try:
            # Every request of the run, its delegations' too, is charged to the budget.
            with charged_to(self.budget):
                async for chunk in self._run(message):
                    yield chunk
        except RunResumeError as exc:
            # Another process took it first, or the conversation moved on: nothing ran.
            logger.warning("an interrupted run could not be resumed: %s", exc)
            yield note_chunk(self.strings.format("run_resume_failed", error=str(exc)))
        except ApprovalResumeError as exc:
            # Decided elsewhere, or one this agent cannot resume (its tools changed).
            logger.warning("a waiting approval could not be resumed: %s", exc)
            self._give_up_shown()
            yield note_chunk(resume_failure(exc, self.strings))
        except DeputyError as exc:
            # Its record cannot be read (damaged, or removed meanwhile).
            logger.warning("a waiting approval could not be resumed: %s", exc)
            self._give_up_shown()
            yield note_chunk(
                self.strings.format("approval_resume_failed", error=type(exc).__name__)
            )
        finally:
            self.streams -= 1
            if message is None:
                self.restored_waiting = False
            if self.feedback is not None:  # the reply may be rated from now on
                await self.feedback.reply_done(self.agent.get_turns())
            await self.values.set_usage(self.agent.usage())
            await self._charge()
            await self.values.set_running(False)

    async def _charge(self) -> None:
        """Charge what the requests made so far cost (each request itself was charged
        before it was sent) and show today's spend against the budget."""
        if self.budget is None:
            return
        line = await self.budget.flush()
        if line:
            await self.values.set_budget(line)

    def _give_up_shown(self) -> None:
        if self.shown is not None:
            self.given_up.add(self.shown.id)

    async def _run(self, message: str | PendingMessage | None) -> AsyncIterator[Any]:
        conversation = self.conversation
        if conversation is not None:
            await conversation.ready.wait()
            if not conversation.usable:
                yield note_chunk(self.strings.open_elsewhere)
                return
        if message is not None and self.restored_waiting:
            # Sent while the conversation came back: its approval is decided first, its
            # interrupted reply finished first.
            busy = self.strings.busy if self.resumed is not None else None
            yield note_chunk(busy or self.strings.approval_waiting)
            return
        if self.budget is not None and message is not None:
            refusal = await self.budget.check()
            if refusal is not None:
                yield note_chunk(refusal)  # before the run: nothing is spent
                return
        first: str | None = None  # the message that listed the conversation (its title)
        if conversation is not None and message is not None:
            try:
                # The first message keeps the conversation (until then a visitor leaves
                # nothing on disk).
                title = message.text if isinstance(message, PendingMessage) else message
                listed = conversation.listing.listed
                note = await conversation.keep_async(title)
                if not listed and conversation.listing.listed:
                    first = title
                if note:
                    yield note_chunk(note)
            except StoreUnavailableError as exc:
                logger.warning("the conversation could not be kept: %s", exc)
                yield note_chunk(self.strings.store_down)
            except DeputyError as exc:
                logger.warning("the conversation could not be kept: %s", exc)
                yield note_chunk(self.strings.not_saved)
        task: str | list[UserContent] | None = None
        if isinstance(message, PendingMessage):
            resolved = await message.resolve(self.agent, self.chat)
            if isinstance(resolved, AttachmentsRefused):
                yield note_chunk(resolved.note())  # nothing saved, nothing sent
                return
            task = resolved
        else:
            task = message
        events = None if task is None else self.agent.run(task)
        resumed, self.resumed = self.resumed, None
        if message is None and resumed is not None:
            for chunk in resumed.lead:  # what the journal holds of the reply
                yield chunk
            async for chunk in resumed.prepare(lambda: self.ending):
                yield chunk
            if resumed.ready and not self.ending:
                events = resumed.events(lambda: self.user_stopped)
        while True:
            if events is not None:
                paused: list[bool] = []
                async for chunk in render_events(
                    _until_paused(events, paused, self._stopped_by_user),
                    allowed_image_origins=self.image_origins,
                    on_event=self._on_event,
                    flush_interval=self.flush_interval,
                    on_progress=self.send_progress,
                    strings=self.strings,
                ):
                    yield chunk
                if not paused:
                    break
            events = await self.decide_pending()
            if events is None:
                break
        if conversation is not None:
            note = await conversation.save(self.agent)
            if note:
                yield note_chunk(note)
            if first is not None and conversation.persistence.title_model is not None:
                self.in_background(self._titled(conversation, first))

    async def _titled(self, conversation: SessionConversation, first: str) -> None:
        """Title the conversation with its ``title_model`` (after the first reply: the
        user's run comes first on their budget), charged to the session's budget."""
        try:
            with charged_to(self.budget):
                await retitle(conversation, self.agent, first)
        except asyncio.CancelledError:
            raise
        except Exception:  # the first message's title stays
            logger.warning("a conversation could not be titled", exc_info=True)
        await self.values.set_usage(self.agent.usage())
        await self._charge()
        await self.saved()  # the title's usage is kept with the conversation

    def _stopped_by_user(self, event: StopEvent) -> bool:
        return event.stop_reason == "interrupted" and self.user_stopped

    def _on_event(self, event: AgentEvent) -> None:
        if self.feedback is not None:
            self.feedback.observe(event)
        if event.type == "tool_end":
            self.ended_calls += 1
            # Scheduled, not awaited: on_event runs inside the stream's iteration.
            self.in_background(self.values.set_tool_events(self.ended_calls))

    # ------------------------------------------------------------------ durable approvals

    async def current_pending(self) -> ApprovalContinuation | None:
        """The durable approval this conversation waits on: not one the conversation
        has moved past (it could never resume), nor one that failed here already (the
        user is never held up by it; a reload offers it again). It reads the approval
        folder in a worker thread, or the store on the store's own loop: the event loop
        never waits for either."""
        if self.agent.store is not None:
            pending = await self.agent.pending_approval_async()
        else:
            pending = await asyncio.to_thread(self.agent.pending_approval)
        if pending is None or pending.id in self.given_up:
            return None
        return pending if continues_conversation(pending, self.agent.get_turns()) else None

    async def decide_pending(self) -> AsyncIterator[AgentEvent] | None:
        """Show the durable approval the agent waits on; its answer's resumed run, or
        None (nothing waits, or the session ended: the approval stays saved)."""
        pending = self.shown = await self.current_pending()
        if pending is None:
            return None
        if self.user_stopped:
            # Stopped before its modal showed (the run was pausing): never put to the user;
            # decided as the modal's "Stop the run" would.
            decision = ApprovalDecision.stop_run()
            return self.agent.resume_approval_events(pending.source.path, decision)
        try:
            answer = await self.asks.approval(pending.request)
        except PromptClosed:
            return None
        except TimeoutError:
            decision = ApprovalDecision.deny("Nobody approved the call in time, so it is denied.")
        else:
            decision = decision_from_answer(pending.request, answer)
        return self.agent.resume_approval_events(pending.source.path, decision)

    # ------------------------------------------------------------------ end

    async def end(self) -> None:
        """The browser session ended: interrupt the run, then deny what is pending (with
        persistence an approval on screen stays waiting), save and let go of the
        conversation, stop the MCP servers and the agent, remove the workspace."""
        self.ending = True
        self.resumed = None
        self.agent.interrupt("interrupted")
        self.prompts.close()
        for _ in range(END_WAIT_POLLS):
            if not self.agent.running:
                break
            await asyncio.sleep(0.05)
        for task in list(self.background):
            task.cancel()
        if self.conversation is not None:
            # Saved, then let go at once: a reload's new session is waiting for it.
            try:
                await self.conversation.save(self.agent)
            finally:
                self.conversation.release()
        if self.feedback is not None:
            await self.feedback.aclose()  # ratings being stored finish
        await self.mcp.aclose()  # this session's MCP servers stop
        await self.agent.aclose()  # stops the session's run_python interpreters
        if self.conversation is None and not self.keep_workspace:
            await asyncio.to_thread(shutil.rmtree, self.working_dir, True)


async def _until_paused(
    events: AsyncIterator[AgentEvent],
    paused: list[bool],
    quiet: Callable[[StopEvent], bool] = lambda event: False,
) -> AsyncIterator[AgentEvent]:
    """The run's events, less its ``approval_pending`` stop (the modal comes next, not a
    "Stopped" note; ``paused`` gets True) and a stop ``quiet`` says shinychat shows
    already (the user's). Closed early (the stream was cancelled), it closes the run at
    once rather than when the run is collected."""
    try:
        async for event in events:
            if isinstance(event, StopEvent):
                if event.stop_reason == "approval_pending":
                    paused.append(True)
                    continue
                if quiet(event):
                    continue
            yield event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


def resume_failure(exc: ApprovalResumeError, strings: KitStrings = DEFAULT_STRINGS) -> str:
    """What the chat says when a waiting approval cannot be resumed (no server paths)."""
    if isinstance(exc, ApprovalDecidedError):
        return strings.approval_decided_elsewhere
    reasons = str(exc).split("cannot resume this approval here: ", 1)[-1]
    return strings.format("approval_not_resumable", reasons=reasons)
