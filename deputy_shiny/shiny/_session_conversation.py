"""One browser session's saved conversation: who the user is, their folder, and whose
turn it is to use it.

:class:`SessionConversation` resolves the user's key as the session starts (a custom
``key(session)``, Posit Connect's ``session.user``, else the browser's token, which
``deputy_shiny.js`` keeps in localStorage and hands over in a cookie), opens that
user's folder (:mod:`._conversations`), and makes sure one live session at a time
uses it: a newer session of the same user (a reload, a second tab) takes the
conversation over, and the older one is told and closed. Restoring, saving and
starting anew are done for the chat module by :meth:`restore`, :meth:`save` and
:meth:`start_new`.

The process-wide table of folders in use holds each live session's conversation only
through a weak reference (ARCHITECTURE rule 9), and the entry is removed as the session
ends; a session that ended without letting go no longer counts as holding its folder.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from shiny.session import Session

from .._timeouts import timeout
from ..errors import DeputyError
from ._conversations import (
    COOKIE,
    ConversationFolder,
    KitPersistence,
    check_key,
    is_browser_token,
    new_browser_token,
    open_folder,
    sweep_expired,
)

if TYPE_CHECKING:
    from ..agent import Agent

logger = logging.getLogger(__name__)

__all__ = ["SessionConversation"]

TAKEOVER_SECONDS = 20.0
"""How long a new session waits for the older session of the same user to let go."""

SWEEP_EVERY = 600.0
"""Seconds between two sweeps of expired conversations (per root)."""

TOKEN_MESSAGE = "deputy-conversation-token"
RELOAD_MESSAGE = "deputy-reload"


_in_use: dict[Path, weakref.ref[SessionConversation]] = {}
_last_sweep: dict[Path, float] = {}
_closing: set[asyncio.Future[None]] = set()  # older sessions being closed (until done)
# Root session id -> the token issued to it, so every chat of a page gets the same one.
_issued: dict[str, str] = {}


def _user_key(persistence: KitPersistence, session: Session) -> tuple[str, str, str | None]:
    """``(kind, key, issued_token)``: the user, and a new token to give the browser."""
    if persistence.key is not None:
        custom = check_key(persistence.key(session))
        if custom is not None:
            return "custom", custom, None
    user = session.user
    if user:
        return "user", user, None
    root = session.root_scope()
    issued = _issued.get(root.id)
    if issued is not None:
        return "token", issued, None
    # Only a real (App) session has an HTTP connection; its websocket carries the cookie.
    http_conn = getattr(root, "http_conn", None)
    sent = None if http_conn is None else http_conn.cookies.get(COOKIE)
    if is_browser_token(sent):
        assert sent is not None
        return "token", sent, None
    token = new_browser_token()
    _issued[root.id] = token

    def forget() -> None:
        _issued.pop(root.id, None)

    root.on_ended(forget)
    return "token", token, token


def _holder(directory: Path) -> SessionConversation | None:
    """The live session's conversation holding ``directory``, if any."""
    ref = _in_use.get(directory)
    holder = None if ref is None else ref()
    if holder is None and ref is not None:
        del _in_use[directory]  # its session ended without letting go
    return holder


class SessionConversation:
    """The saved conversation of one chat in one browser session.

    Example:
        >>> SessionConversation.__name__
        'SessionConversation'
    """

    def __init__(self, persistence: KitPersistence, session: Session, chat_id: str) -> None:
        self.persistence = persistence
        self._session = session
        self.kind, key, self._issued_token = _user_key(persistence, session)
        self.folder: ConversationFolder = open_folder(persistence, self.kind, key, chat_id)
        self.ready = asyncio.Event()  # set once restored (or found unusable)
        self.usable = False  # True while this session holds the folder
        self.discarded = False  # the user started a new conversation: save nothing more
        self.loaded = False  # the saved conversation is in the agent (or set aside)
        self._close: Callable[[], Awaitable[None]] | None = None
        self._released = asyncio.Event()

    async def send_token(self) -> None:
        """Give the browser its new token (nothing when it already had one)."""
        if self._issued_token is not None:
            await self._session.send_custom_message(TOKEN_MESSAGE, {"token": self._issued_token})

    def sweep_soon(self) -> None:
        """Delete expired conversations in the background (at most every few minutes)."""
        root = self.persistence.root
        now = time.monotonic()
        if now - _last_sweep.get(root, -SWEEP_EVERY) < SWEEP_EVERY:
            return
        _last_sweep[root] = now
        in_use = {*_in_use, self.folder.directory}

        def sweep() -> None:
            try:
                deleted = sweep_expired(self.persistence, in_use)
            except OSError:
                logger.warning("sweeping expired conversations failed", exc_info=True)
                return
            if deleted:
                logger.info("deleted %d expired conversation(s)", deleted)

        asyncio.get_running_loop().run_in_executor(None, sweep)

    async def take_over(self, close: Callable[[], Awaitable[None]]) -> bool:
        """Become the one session using this folder, closing an older one of the same
        user; False if it did not let go in time. ``close`` is how a newer session
        will close this one."""
        directory = self.folder.directory
        while (holder := _holder(directory)) is not None and holder is not self:
            # Not cancelled, even on a timeout: it runs the older session's end.
            closing = asyncio.ensure_future(holder._closed_for_newer())
            _closing.add(closing)
            closing.add_done_callback(_closing.discard)
            try:
                async with timeout(TAKEOVER_SECONDS):
                    await holder._released.wait()
            except TimeoutError:
                return False
        self._close = close
        self._released.clear()
        _in_use[directory] = weakref.ref(self)
        self.usable = True
        return True

    async def _closed_for_newer(self) -> None:
        if self._close is not None:
            await self._close()

    def release(self) -> None:
        """Let go of the folder (the session ended)."""
        self.usable = False
        if _holder(self.folder.directory) is self:
            del _in_use[self.folder.directory]
        self._close = None
        self._released.set()

    async def load(self, agent: Agent) -> str | None:
        """Load the saved conversation into ``agent``; a note for the chat when it could
        not be (the damaged file is kept aside, never deleted)."""
        path = self.folder.session_file
        if not path.exists():
            self.loaded = True
            return None
        try:
            await agent.load_session_async(path)
            self.loaded = True
        except DeputyError as exc:
            kept = path.with_name(f"session.json.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
            try:
                path.rename(kept)
            except OSError:
                kept = path
            logger.warning("a saved conversation could not be restored: %s", exc)
            self.loaded = True  # a new conversation starts; the old one is kept aside
            return (
                "Your saved conversation could not be restored "
                f"({type(exc).__name__}); it was kept on the server, and a new one started."
            )
        return None

    async def save(self, agent: Agent) -> str | None:
        """Save ``agent``'s conversation; a note for the chat when that failed. Nothing is
        saved unless this session holds the folder and loaded what was saved before
        (so a failed restore never overwrites it)."""
        if not (self.usable and self.loaded) or self.discarded or agent.running:
            return None
        try:
            await agent.save_session_async(self.folder.session_file)
            self.folder.touch()
        except DeputyError as exc:
            logger.warning("the conversation could not be saved: %s", exc)
            return f"This conversation could not be saved ({type(exc).__name__})."
        except OSError as exc:
            logger.warning("the conversation could not be saved: %s", exc)
            return "This conversation could not be saved."
        return None

    async def start_new(self) -> None:
        """Forget the conversation (its files stay) and reload the page, which starts
        the new one."""
        self.discarded = True
        await asyncio.to_thread(self.folder.start_new)
        await self._session.send_custom_message(RELOAD_MESSAGE, {})
