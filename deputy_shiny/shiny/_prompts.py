"""One queue of modal prompts per browser session: approvals and ask_user forms.

Shiny shows one modal at a time (``#shiny-modal``), so every module instance of a
session shares one :class:`SessionPrompts`. A prompt waits on an ``asyncio.Future``
inside the agent's stream task (never inside a reactive effect: Shiny has one reactive
lock for the whole process). The browser answers through one input,
``deputy_modal_answer`` (set by ``deputy_shiny.js``), which an effect hands to
:meth:`SessionPrompts.answer`. An answer counts only if its ``request_id`` is the
prompt this session is showing: ids are unguessable (``secrets.token_urlsafe``), and
another session's id is simply unknown here.

An answer also needs the prompt's *key*: a second secret, sent to the kit's script in a
custom message (``deputy-prompt-key``) just before the modal shows, kept in the script's
closure and never in the page, and sent back only by the handler of a real (trusted)
click. The request id is in the page (``data-request-id``), so without the key a page
script could decide a prompt with ``Shiny.setInputValue``. This is a second line of
defence, not a boundary: script running in the page could still hook the socket or the
kit's script before a prompt arrives. The first line is that nothing a model writes ever
becomes markup (:mod:`._escape`).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from htmltools import Tag
from shiny import reactive, ui
from shiny.session import Session

from .._util.timeouts import timeout
from ..approvals import new_request_id
from ..errors import PromptClosed
from ._modals import confirm_modal, waiting_text

logger = logging.getLogger(__name__)

ANSWER_INPUT = "deputy_modal_answer"
KEY_MESSAGE = "deputy-prompt-key"
"""The custom message that hands the kit's script a prompt's key (``deputy_shiny.js``)."""
WAITING_MESSAGE = "deputy-prompt-waiting"
"""The custom message that updates the open modal's "1 of N waiting" line (as text)."""


ModalFactory = Callable[[int], Tag]
"""Builds a prompt's modal, given how many prompts wait (this one included)."""


@dataclass
class _Prompt:
    request_id: str
    modal: ModalFactory
    future: asyncio.Future[dict[str, Any]] = field(repr=False)
    group: str | None = None  # the run it belongs to: "Stop the run" answers them all
    also_waiting: int = 0  # calls behind it that are not queued yet (same response)
    shown_waiting: int = 0  # the count its modal shows now (0: not shown yet)
    # The answer's proof that the kit's script sent it (see the module docstring).
    key: str = field(default_factory=lambda: secrets.token_urlsafe(24), repr=False)


class SessionPrompts:
    """The modal queue of one browser session.

    Examples:
        >>> SessionPrompts.__name__
        'SessionPrompts'
    """

    def __init__(self, session: Session) -> None:
        self._session = session
        self._queue: deque[_Prompt] = deque()
        self._current: _Prompt | None = None
        self._closed = False
        self.pending = reactive.value(0, name="deputy_prompts_pending")
        self.effects: list[Any] = []
        # The module ids of the chats that share this queue: a modal names its chat
        # only when there is more than one.
        self.chats: set[str] = set()

    @property
    def showing(self) -> str | None:
        """The request id of the modal on screen, if any."""
        return None if self._current is None else self._current.request_id

    async def ask(
        self,
        request_id: str,
        modal: Tag | ModalFactory,
        wait_seconds: float | None,
        *,
        group: str | None = None,
        also_waiting: int = 0,
    ) -> dict[str, Any]:
        """Show ``modal`` (after those queued before it) and wait for its answer.

        ``modal`` may be a factory taking the number of prompts waiting (this one,
        those queued behind it, and ``also_waiting`` more not queued yet). An answer
        whose action is ``"stop"`` also answers, with ``"stop"``, every queued prompt of
        the same ``group`` (a run).

        Raises:
            TimeoutError: nobody answered within ``wait_seconds``.
            PromptClosed: the session ended first.
        """
        if self._closed:
            raise PromptClosed("the browser session has ended")
        factory = modal if callable(modal) else (lambda _waiting, tag=modal: tag)
        future = asyncio.get_running_loop().create_future()
        prompt = _Prompt(request_id, factory, future, group, also_waiting)
        self._queue.append(prompt)
        await self._changed()
        try:
            # Not asyncio.timeout: its cancelled timer would keep this session's context
            # (so the whole session) alive for the rest of ``wait_seconds``.
            async with timeout(wait_seconds):
                return await prompt.future
        finally:
            # Answered, timed out, interrupted or closed: the prompt leaves the queue.
            if prompt in self._queue:
                self._queue.remove(prompt)
            if self._current is prompt:
                self._current = None
                if not self._closed:
                    ui.modal_remove(session=self._session)
            await self._changed()

    async def confirm(self, title: str, body: str, confirm_label: str) -> bool:
        """A yes/no question of the app's own (queued behind any approval): False when
        the user cancels, or the session ends or times out first."""
        request_id = new_request_id()
        try:
            answer = await self.ask(
                request_id, confirm_modal(request_id, title, body, confirm_label), None
            )
        except (PromptClosed, TimeoutError):
            return False
        return answer.get("action") == "confirm"

    async def _changed(self) -> None:
        if self._current is None and self._queue and not self._closed:
            self._current = current = self._queue.popleft()
            waiting = 1 + len(self._queue) + current.also_waiting
            # The key first: it has arrived before anyone can click the modal.
            try:
                await self._session.send_custom_message(
                    KEY_MESSAGE, {"request_id": current.request_id, "key": current.key}
                )
            except Exception:  # the connection is gone: the session is ending
                logger.warning("could not send a prompt's key", exc_info=True)
            current.shown_waiting = waiting
            ui.modal_show(current.modal(waiting), session=self._session)
        elif self._current is not None and not self._closed:
            await self._update_waiting(self._current)
        count = len(self._queue) + (self._current is not None)
        # Setting a reactive value from the stream task: hold the lock only for the set.
        async with reactive.lock():
            self.pending.set(count)
            await reactive.flush()

    async def _update_waiting(self, current: _Prompt) -> None:
        """Keep the open modal's count true: another chat of the session may queue a
        prompt behind it, or a queued one may end (only the line's text changes, so
        what the user typed into the modal stays)."""
        waiting = 1 + len(self._queue) + current.also_waiting
        if waiting == current.shown_waiting:
            return
        current.shown_waiting = waiting
        message: dict[str, object] = {
            "request_id": current.request_id,
            "text": waiting_text(waiting),
        }
        try:
            await self._session.send_custom_message(WAITING_MESSAGE, message)
        except Exception:  # the connection is gone: the session is ending
            logger.warning("could not update a prompt's count", exc_info=True)

    def answer(self, value: object) -> bool:
        """Resolve the prompt on screen with the browser's answer; False if it isn't for
        it, or lacks the prompt's key (it did not come from a real click)."""
        if not isinstance(value, dict):
            return False
        current = self._current
        if current is None or value.get("request_id") != current.request_id:
            logger.warning("ignored an answer for a prompt that is not pending in this session")
            return False
        key = value.get("key")
        # Bytes: compare_digest refuses str with non-ASCII characters (a forged key may).
        if not isinstance(key, str) or not hmac.compare_digest(key.encode(), current.key.encode()):
            logger.warning("ignored an answer without its prompt's key (not a real click)")
            return False
        answer = _plain(value)
        answer.pop("key", None)
        if not current.future.done():
            current.future.set_result(answer)
        if answer.get("action") == "stop" and current.group is not None:
            for queued in [p for p in self._queue if p.group == current.group]:
                if not queued.future.done():
                    queued.future.set_result({"action": "stop", "request_id": queued.request_id})
        return True

    def stop(self, request_ids: Iterable[str]) -> int:
        """Answer the prompts ``request_ids`` (on screen or queued) with ``"stop"``, as
        the modal's "Stop the run" would: the chat's stop button ends what its run waits
        on. Ids not waiting here are ignored; returns how many were answered."""
        wanted = set(request_ids)
        stopped = 0
        for prompt in [*self._queue, *([self._current] if self._current else [])]:
            if prompt.request_id in wanted and not prompt.future.done():
                prompt.future.set_result({"action": "stop", "request_id": prompt.request_id})
                stopped += 1
        return stopped

    def close(self) -> None:
        """End every prompt (the session ended): waiting callers get PromptClosed."""
        self._closed = True
        for prompt in [*self._queue, *([self._current] if self._current else [])]:
            if not prompt.future.done():
                prompt.future.set_exception(PromptClosed("the browser session has ended"))
        self._queue.clear()


def _plain(value: Any) -> Any:
    """The answer as JSON types: Shiny delivers JSON arrays from the browser as tuples."""
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


# Session id -> its queue, held weakly: the session owns its queue (through the
# on_ended callback registered below), so the entry dies with the session. A
# WeakKeyDictionary keyed by the session cannot do this: the queue (and its effect)
# refers to the session, so the entry would keep its own key, and every ended
# session's Agent and chat, alive for the life of the process.
_by_session: weakref.WeakValueDictionary[str, SessionPrompts] = weakref.WeakValueDictionary()


def session_prompts(session: Session) -> SessionPrompts:
    """The prompt queue of ``session``'s browser session (created on first use)."""
    root = session.root_scope()
    prompts = _by_session.get(root.id)
    if prompts is None:
        prompts = SessionPrompts(root)
        _by_session[root.id] = prompts

        # No ignore_init: with it, an effect on an input the browser has not set yet
        # never subscribes to it (shiny 1.8), and answers would never arrive. The first
        # run reads the unset input and stops quietly; every answer runs it again.
        @reactive.effect
        @reactive.event(root.input[ANSWER_INPUT])
        def _route_answer() -> None:
            prompts.answer(root.input[ANSWER_INPUT]())

        # Shiny holds effects weakly: without this reference the effect is collected
        # and answers are never routed.
        prompts.effects.append(_route_answer)
        # Also the session's (strong) reference to its queue while it lives.
        root.on_ended(prompts.close)
    return prompts
