"""Thumbs up or down on each assistant reply: :class:`SessionFeedback`, one per session.

As a run's stream ends, the session remembers the reply (the run, the model, the
tools called, usage and cost, and the conversation up to it, by reference: nothing is
copied until it is rated) under a fresh random id, and sends that id to the kit's
script, which keeps it in memory (never in the page) and, when the chat was placed
with ``agent_chat_ui(id, feedback=True)``, shows the buttons under that reply. A rating
comes back as the module's ``feedback`` input; it counts only when it names a reply of
this session (an id from another session, or one that never was, is refused and
logged), with a rating of ``up`` or ``down`` and a comment of at most
:data:`~deputy_shiny.feedback.MAX_COMMENT_CHARS` characters (a longer one is refused,
not cut). An accepted rating is stored per user
(:class:`~deputy_shiny.feedback.FeedbackRecord`, with ``persistence``: in its store, or
files under its root), handed to the app's ``on_feedback`` callbacks and, with tracing
on, emitted as an OpenTelemetry event.

Examples:
    >>> FEEDBACK_REPLY_MESSAGE
    'deputy-feedback-reply'
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from htmltools import HTMLDependency
from shiny import reactive
from shiny.session import Session

from .._util.version import package_version
from ..agent import Agent
from ..events import (
    AgentEvent,
    RequestEndEvent,
    RequestStartEvent,
    StartEvent,
    ToolStartEvent,
    TurnEvent,
)
from ..feedback.records import MAX_COMMENT_CHARS, FeedbackRecord, save_feedback
from ..messages import Turn
from ..observability import feedback_event
from ._budget import budget_user
from ._conversations import KitPersistence, kit_store
from ._identity import trusted_session_user
from ._kept_beside import REPLIES_KIND, load_beside, save_beside
from ._kit_store import KitStore
from ._session_conversation import SessionConversation, _NotSaved, resolve_user

logger = logging.getLogger(__name__)

__all__ = [
    "FEEDBACK_REPLY_MESSAGE",
    "FEEDBACK_SAVED_MESSAGE",
    "FeedbackCallback",
    "FeedbackIdentity",
    "SessionFeedback",
    "bind_feedback_input",
    "feedback_dependency",
    "feedback_identity",
    "session_feedback",
]

FEEDBACK_REPLY_MESSAGE = "deputy-feedback-reply"
"""Server to browser: this reply (the newest of the chat) may be rated, by this id."""
FEEDBACK_RESTORED_MESSAGE = "deputy-feedback-restored"
"""Server to browser: the chat's last replies, shown again, may be rated by these ids
(None: that one may not)."""
FEEDBACK_SAVED_MESSAGE = "deputy-feedback-saved"
"""Server to browser: the rating of this reply was recorded."""
MAX_REPLIES = 200
"""Replies a session remembers for rating (the oldest go first)."""
MAX_RATINGS = 500
"""Ratings one session may give (each rating is a store write)."""
MAX_TURN_CHARS = 400_000
"""Characters of the conversation a rating keeps (its newest turns)."""

FeedbackCallback = Callable[[FeedbackRecord], Awaitable[None] | None]


@dataclass(frozen=True)
class FeedbackIdentity:
    """Whom a session's ratings are of: a pseudonym, and a name the kit trusts (or None)."""

    user_id: str
    user: str | None = None


def feedback_identity(persistence: KitPersistence | None, session: Session) -> FeedbackIdentity:
    """The session's rater: with ``persistence`` its user as the kit decides it (the
    same pseudonym as the user's budget counters; the name only for a user trusted by
    name), else the trusted ``session.user``, else this browser session alone."""
    if persistence is not None:
        try:
            user = resolve_user(persistence, session)
        except _NotSaved:
            pass
        else:
            name = user.key if user.kind in ("user", "custom") else None
            return FeedbackIdentity(budget_user(user.kind, user.key), name)
    name = trusted_session_user(session)
    if name is not None:
        return FeedbackIdentity(budget_user("user", name), name)
    return FeedbackIdentity(budget_user("session", session.id))


@dataclass
class _Tally:
    """What one stream's events say about its reply."""

    run_id: str | None = None
    model: str | None = None
    tools: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("requests", "input_tokens", "output_tokens", "cached_tokens"), 0
        )
    )
    cost: float | None = 0.0
    answered: bool = False  # an assistant turn came

    def payload(self) -> dict[str, Any]:
        """The run's facts as JSON data (kept beside a saved conversation)."""
        return {
            "run_id": self.run_id,
            "model": self.model,
            "tools": self.tools,
            "usage": self.usage,
            "cost": self.cost,
        }

    @classmethod
    def from_payload(cls, data: Any) -> _Tally | None:
        """The tally :meth:`payload` made (None: not one)."""
        try:
            usage = {str(k): int(v) for k, v in data["usage"].items()}
            cost = data["cost"]
            tally = cls(
                run_id=_text(data["run_id"]),
                model=_text(data["model"]),
                tools=[str(t) for t in data["tools"]][:1000],
                usage=usage,
                cost=None if cost is None else float(cost),
                answered=True,
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return tally

    def observe(self, event: AgentEvent) -> None:
        if isinstance(event, StartEvent):
            self.run_id = event.run_id
        elif isinstance(event, RequestStartEvent):
            self.model = event.model
            self.usage["requests"] += 1
        elif isinstance(event, RequestEndEvent):
            self.usage["input_tokens"] += event.usage.input_tokens
            self.usage["output_tokens"] += event.usage.output_tokens
            self.usage["cached_tokens"] += event.usage.cached_tokens
            cost = event.cost
            self.cost = None if cost is None or self.cost is None else self.cost + cost
        elif isinstance(event, ToolStartEvent):
            self.tools.append(event.tool_name)
        elif isinstance(event, TurnEvent):
            self.answered = True


def _text(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError("not text")
    return value


def _reply_key(turns: list[Turn], end: int) -> str:
    """What names the reply ending at ``turns[end - 1]`` across reloads: where it ends
    and a digest of its last turn (another branch's reply there differs)."""
    last = json.dumps(turns[end - 1].model_dump(mode="json"), sort_keys=True)
    return f"{end}:{hashlib.sha256(last.encode()).hexdigest()[:24]}"


@dataclass(frozen=True)
class _Reply:
    """A reply that may be rated: its tally, and the conversation up to it."""

    tally: _Tally
    turns: tuple[Turn, ...]


class SessionFeedback:
    """One browser session's replies and their ratings (see :mod:`._feedback`).

    Args:
        chat: The chat module's id (recorded with each rating).
        identity: Whose ratings these are.
        link: The store ratings go to, or a function that opens it at the first
            rating (None, or a function giving None: not stored, only handed to
            callbacks).
        send: Sends a custom message to the browser.
        input_id: The ``feedback`` input's full id, and ``chat_id`` the chat element's,
            both told to the script with each reply.
        agent_id: The agent's id, and ``session_id`` its session's (in the trace event).

    Examples:
        >>> SessionFeedback.__name__
        'SessionFeedback'
    """

    def __init__(
        self,
        *,
        chat: str,
        identity: FeedbackIdentity,
        link: KitStore | Callable[[], KitStore | None] | None,
        send: Callable[[str, dict[str, Any]], Awaitable[None]],
        input_id: str,
        chat_id: str,
        agent_id: str = "",
        session_id: str = "",
    ) -> None:
        self.chat = chat
        self.identity = identity
        self._link = link
        self._send = send
        self.input_id = input_id
        self.chat_id = chat_id
        self.agent_id = agent_id
        self.session_id = session_id
        self.replies: OrderedDict[str, _Reply] = OrderedDict()
        self.callbacks: list[FeedbackCallback] = []
        self.ratings = 0
        self._tally = _Tally()
        # Each reply's run, by _reply_key: kept beside a saved conversation, so a reply
        # restored on reload is rated with its run.
        self.runs: OrderedDict[str, _Tally] = OrderedDict()
        self.conversation: SessionConversation | None = None
        self._saving: set[asyncio.Task[None]] = set()
        self._last: asyncio.Task[None] | None = None

    @property
    def link(self) -> KitStore | None:
        """The store ratings go to (opened now if it was not), or None."""
        if callable(self._link):
            self._link = self._link()
        return self._link

    def observe(self, event: AgentEvent) -> None:
        """A run's event, as the stream renders it."""
        self._tally.observe(event)

    async def reply_done(self, turns: list[Turn]) -> str | None:
        """The stream ended with ``turns`` as the conversation: remember its reply (when
        the run answered) and tell the browser; the reply's id, or None."""
        tally, self._tally = self._tally, _Tally()
        if not tally.answered or not turns or turns[-1].role != "assistant":
            return None
        reply_id = self._remember(tally, turns, len(turns))
        self.runs[_reply_key(turns, len(turns))] = tally
        while len(self.runs) > MAX_REPLIES:
            self.runs.popitem(last=False)
        if self.conversation is not None:
            payload = {key: run.payload() for key, run in self.runs.items()}
            await save_beside(self.conversation, REPLIES_KIND, payload)
        await self._tell(FEEDBACK_REPLY_MESSAGE, {"reply": reply_id})
        return reply_id

    def _remember(self, tally: _Tally, turns: list[Turn], end: int) -> str:
        reply_id = secrets.token_urlsafe(18)
        self.replies[reply_id] = _Reply(tally, tuple(turns[:end]))
        while len(self.replies) > MAX_REPLIES:
            self.replies.popitem(last=False)
        return reply_id

    async def _tell(self, kind: str, message: dict[str, Any]) -> None:
        message = {**message, "chat": self.chat_id, "input": self.input_id}
        try:
            await self._send(kind, message)
        except Exception:  # the browser left: nothing to rate from there
            logger.debug("replies' ids could not be sent", exc_info=True)

    async def restored(self, turns: list[Turn], ends: list[int]) -> None:
        """The chat shows ``turns`` again (a reload, a switch, another branch), as
        assistant messages ending at ``ends`` (each one's ``turns_to``): each that ends
        with a reply may be rated, with its run when it was kept (else unnamed)."""
        if self.conversation is not None and not self.runs:
            kept = await load_beside(self.conversation, REPLIES_KIND)
            for key, data in (kept if isinstance(kept, dict) else {}).items():
                tally = _Tally.from_payload(data)
                if tally is not None and isinstance(key, str):
                    self.runs[key] = tally
        ids: list[str | None] = []
        for end in ends[-MAX_REPLIES:]:
            if not 0 < end <= len(turns) or turns[end - 1].role != "assistant":
                ids.append(None)
                continue
            tally = self.runs.get(_reply_key(turns, end)) or _Tally(answered=True)
            ids.append(self._remember(tally, turns, end))
        if any(ids):
            await self._tell(FEEDBACK_RESTORED_MESSAGE, {"replies": ids})

    def on_feedback(self, callback: FeedbackCallback) -> Callable[[], None]:
        """Call ``callback(record)`` (sync or async) after each accepted rating; the
        returned function stops that."""
        self.callbacks.append(callback)

        def remove() -> None:
            if callback in self.callbacks:
                self.callbacks.remove(callback)

        return remove

    def receive(self, value: object) -> FeedbackRecord | None:
        """A rating from the browser (the ``feedback`` input): the record, stored and
        announced in the background, or None when refused (logged, nothing stored)."""
        problem = _problem(value, self.replies)
        if problem is None and self.ratings >= MAX_RATINGS:
            problem = "this session gave too many ratings"
        if problem is not None:
            logger.warning("a rating was refused: %s", problem)
            return None
        assert isinstance(value, dict)
        self.ratings += 1
        record = self._record(value["reply"], value["rating"], value.get("comment") or "")
        task = asyncio.ensure_future(self._accept(record, self._last))
        self._last = task
        self._saving.add(task)  # held until done (a task nothing references may vanish)
        task.add_done_callback(self._saving.discard)
        return record

    def _record(self, reply_id: str, rating: str, comment: str) -> FeedbackRecord:
        reply = self.replies[reply_id]
        turns, dropped = _newest(reply.turns)
        prompt_at = _prompt_index(reply.turns)
        prompt = "" if prompt_at is None else reply.turns[prompt_at].text
        answer = reply.turns[0 if prompt_at is None else prompt_at + 1 :]
        return FeedbackRecord(
            feedback_id=reply_id,
            rating=rating,
            comment=comment,
            user_id=self.identity.user_id,
            user=self.identity.user,
            chat=self.chat,
            run_id=reply.tally.run_id,
            model=reply.tally.model,
            tools=list(reply.tally.tools),
            usage=dict(reply.tally.usage),
            cost=reply.tally.cost,
            prompt=prompt,
            reply="\n\n".join(t.text for t in answer if t.role == "assistant" and t.text),
            turns=turns,
            truncated_turns=dropped,
        )

    async def _accept(
        self, record: FeedbackRecord, previous: asyncio.Task[None] | None = None
    ) -> None:
        if previous is not None:
            # In the order given: a rating with its comment, sent right after the rating
            # alone, is the one kept.
            await asyncio.wait([previous])
        link = self.link
        if link is not None:
            try:
                await link.run(lambda store: save_feedback(store, record))
            except Exception:
                logger.warning("a rating could not be stored", exc_info=True)
                return
        try:
            await self._send(FEEDBACK_SAVED_MESSAGE, {"reply": record.feedback_id})
        except Exception:  # the browser left; the rating is kept all the same
            logger.debug("a rating's receipt could not be sent", exc_info=True)
        for callback in list(self.callbacks):
            try:
                result = callback(record)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.warning("an on_feedback callback failed", exc_info=True)
        feedback_event(self._trace_attributes(record))

    def _trace_attributes(self, record: FeedbackRecord) -> dict[str, str | int | float | bool]:
        attributes: dict[str, str | int | float | bool | None] = {
            "gen_ai.evaluation.name": "user_feedback",
            "gen_ai.evaluation.score.label": record.rating,
            "gen_ai.evaluation.score.value": 1.0 if record.rating == "up" else 0.0,
            "gen_ai.agent.id": self.agent_id or None,
            "gen_ai.conversation.id": self.session_id or None,
            "gen_ai.request.model": record.model,
            "deputy.run.id": record.run_id,
            "deputy.feedback.id": record.feedback_id,
            "deputy.feedback.has_comment": bool(record.comment),
        }
        return {k: v for k, v in attributes.items() if v is not None}

    async def aclose(self) -> None:
        """The session ended: ratings being stored finish first."""
        if self._saving:
            await asyncio.wait(list(self._saving), timeout=5)


def _problem(value: object, replies: dict[str, _Reply]) -> str | None:
    """Why ``value`` is not a rating of one of ``replies`` (None: it is)."""
    if not isinstance(value, dict) or set(value) - {"reply", "rating", "comment"}:
        return "not a rating"
    reply, rating, comment = value.get("reply"), value.get("rating"), value.get("comment", "")
    if not isinstance(reply, str) or reply not in replies:
        return "no such reply in this session"
    if rating not in ("up", "down"):
        return "the rating is neither up nor down"
    if comment is not None and not isinstance(comment, str):
        return "the comment is not text"
    if comment and len(comment) > MAX_COMMENT_CHARS:
        return f"the comment is longer than {MAX_COMMENT_CHARS} characters"
    return None


def _prompt_index(turns: tuple[Turn, ...]) -> int | None:
    """The index of the user message the last reply answers (the last user turn with
    text: tool results come back in user turns without any)."""
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].role == "user" and turns[index].text:
            return index
    return None


def _newest(turns: tuple[Turn, ...]) -> tuple[list[dict[str, Any]], int]:
    """The turns as JSON, the oldest left out past :data:`MAX_TURN_CHARS`; and how
    many were left out."""
    kept: list[dict[str, Any]] = []
    size = 0
    for turn in reversed(turns):
        dumped = turn.model_dump(mode="json")
        size += len(json.dumps(dumped, ensure_ascii=False))
        if kept and size > MAX_TURN_CHARS:
            break
        kept.append(dumped)
    kept.reverse()
    return kept, len(turns) - len(kept)


def feedback_dependency() -> HTMLDependency:
    """The feedback buttons' script and stylesheet (``agent_chat_ui(feedback=True)``)."""
    return HTMLDependency(
        name="deputy_shiny_feedback",
        version=package_version(),
        source={"package": "deputy_shiny", "subdir": "shiny/www"},
        script=[{"src": "deputy_feedback.js"}],
        stylesheet={"href": "deputy_feedback.css"},
    )


def bind_feedback_input(input: Any, receive: Callable[[object], object]) -> None:
    """Hand each value of the module's ``feedback`` input to ``receive`` (the kit's
    session link: nothing of the session is held here)."""

    @reactive.effect
    @reactive.event(input.feedback)  # no ignore_init: see _prompts.session_prompts
    def _rate() -> None:
        value = input.feedback()
        if value is not None:
            receive(value)


def session_feedback(
    session: Session, persistence: KitPersistence | None, agent: Agent
) -> SessionFeedback:
    """The session's :class:`SessionFeedback` for ``agent``: stored in ``persistence``'s
    store (files under its root without one), else only handed to callbacks."""
    # Opened at the first rating: an app without feedback opens nothing for it.
    link = None if persistence is None else functools.partial(kit_store, persistence, local=True)
    return SessionFeedback(
        chat=str(session.ns) or "chat",
        identity=feedback_identity(persistence, session),
        link=link,
        send=session.send_custom_message,
        input_id=session.ns("feedback"),
        chat_id=session.ns("chat"),
        agent_id=agent.agent_id,
        session_id=agent.session_id,
    )
