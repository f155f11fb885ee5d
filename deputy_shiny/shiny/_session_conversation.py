"""One browser session's saved conversation: who the user is, their folder, and whose
turn it is to use it.

:class:`SessionConversation` resolves the user as the session starts
(:func:`resolve_user`: a custom ``key(session)``, the trusted ``session.user``, else the
browser's signed token, :mod:`._identity`), opens that user's folder
(:mod:`._conversations`), and makes sure one live session at a time uses it: a newer
session of the same user (a reload, a second tab) takes the conversation over, and the
older one is told and closed. Restoring, saving and starting anew are done for the chat
module by :meth:`restore`, :meth:`save` and :meth:`start_new`. A session whose user
cannot be told safely gets no saved conversation (:class:`_NotSaved` says why).

A new anonymous browser gets its token from the server in an HttpOnly cookie: the
session registers a dynamic route that answers with ``Set-Cookie``, and tells the kit's
script to fetch it (:meth:`SessionConversation.send_token`).

The process-wide table of folders in use holds each live session's conversation only
through a weak reference (a session frees what it held: nothing process-wide may keep
an ended session alive), and the entry is removed as the session ends; a session that
ended without letting go no longer counts as holding its folder.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from shiny.session import Session
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from .._util.timeouts import timeout
from ..errors import DeputyError, PersistenceError, StoreUnavailableError
from ..persistence.sessions import check_session_payload
from ..persistence.store import Lease, Store
from ._budget import budget_user
from ._conversations import (
    ConversationFolder,
    KitPersistence,
    check_key,
    kit_store,
    open_folder,
    sweep_expired,
    token_key,
)
from ._identity import (
    TOKEN_COOKIE,
    issue_token,
    on_posit_connect,
    read_claim,
    token_id,
    trusted_user,
)
from ._kit_store import KitStore
from ._session_listing import SessionListing, capped_note, forget
from ._stored_conversations import (
    CONVERSATION_KIND,
    LEASE_SECONDS,
    RENEW_EVERY,
    SESSION_KIND,
    StoredFolder,
    discard_folders,
    lease_name,
    open_stored,
    stored_session,
    sweep_store,
)
from ._strings import DEFAULT_STRINGS, KitStrings

if TYPE_CHECKING:
    from ..agent import Agent

logger = logging.getLogger(__name__)

__all__ = ["STORE_DOWN_MESSAGE", "SessionConversation", "UserKey", "resolve_user"]

STORE_DOWN_MESSAGE = DEFAULT_STRINGS.store_down

TAKEOVER_SECONDS = 20.0
"""How long a new session waits for the older session of the same user to let go."""

SWEEP_EVERY = 600.0
"""Seconds between two sweeps of expired conversations (per root)."""

TOKEN_MESSAGE = "deputy-conversation-token"
RELOAD_MESSAGE = "deputy-reload"
TOKEN_ROUTE = "deputy_conversation_token"
TOKEN_MAX_AGE = 365 * 24 * 3600  # the folder's ttl decides how long it is kept
_COOKIE_PATH = re.compile(r"/(?:[A-Za-z0-9._~!$&'()*+=:@%-]+/)*")


_in_use: dict[Path, weakref.ref[SessionConversation]] = {}
_last_sweep: dict[Path, float] = {}
_closing: set[asyncio.Future[None]] = set()  # older sessions being closed (until done)
# Root session id -> (token id, token) issued to it, so every chat of a page gets one.
_issued: dict[str, tuple[str, str]] = {}
# Records folder -> the live sessions that opened it (held or waiting to hold it).
_open: dict[Path, weakref.WeakSet[SessionConversation]] = {}
_keys: dict[Path, bytes] = {}  # root -> its token key (read from disk once)
_warned_connect: set[Path] = set()


class _NotSaved(Exception):
    """This session's conversation is not saved; the message says why (for the chat),
    in the words of the :class:`KitStrings` field ``field``."""

    def __init__(self, field: str) -> None:
        super().__init__(getattr(DEFAULT_STRINGS, field))
        self.field = field


@dataclass(frozen=True)
class UserKey:
    """Whose conversation a session opens: ``kind`` is ``custom``, ``user`` or
    ``token``; ``issued`` is a new token to give the browser (else None)."""

    kind: str
    key: str
    issued: str | None = None


def _key_for(persistence: KitPersistence) -> bytes:
    if persistence.token_key is not None:
        return persistence.token_key.get_secret_value()
    key = _keys.get(persistence.root)
    if key is None:
        key = _keys[persistence.root] = token_key(persistence)
    return key


def anonymous_allowed(persistence: KitPersistence) -> bool:
    """Whether users without a trusted identity get a saved conversation here."""
    if persistence.anonymous is not None:
        return persistence.anonymous
    if on_posit_connect():
        if persistence.root not in _warned_connect:
            _warned_connect.add(persistence.root)
            logger.warning(
                "Posit Connect serves all content on one origin, so another content's "
                "page could reach an anonymous visitor's conversation: conversations are "
                "saved for signed-in users only (KitPersistence(anonymous=True) opts in)."
            )
        return False
    return True


def resolve_user(persistence: KitPersistence, session: Session) -> UserKey:
    """Who the session's user is, by the rules of :mod:`._identity`.

    Raises:
        _NotSaved: nobody the kit can tell safely (the message is for the chat).
    """
    if persistence.key is not None:
        custom = check_key(persistence.key(session))
        if custom is not None:
            return UserKey("custom", custom)
    user = trusted_user(session.user, trust_header=persistence.trust_user_header)
    if user is not None:
        return UserKey("user", user)
    if not anonymous_allowed(persistence):
        raise _NotSaved("not_saved_signed_in_only")
    root = session.root_scope()
    issued = _issued.get(root.id)
    if issued is not None:
        return UserKey("token", issued[0])
    # Only a real (App) session has an HTTP connection; its websocket carries the cookies.
    http_conn = getattr(root, "http_conn", None)
    if http_conn is None:
        raise _NotSaved("not_saved_no_connection")
    claim = read_claim(http_conn.headers.get("cookie"))
    if claim.status == "duplicate":
        logger.warning("a browser sent a conversation cookie twice (planted?); not saved")
        raise _NotSaved("not_saved_cookie_twice")
    if claim.status == "no_binding":
        raise _NotSaved("not_saved_no_storage")
    assert claim.binding is not None
    key = _key_for(persistence)
    known = token_id(key, claim.token, claim.binding)
    if known is not None:
        return UserKey("token", known)
    if claim.token is not None:
        logger.info("ignored a conversation token this server did not issue to this browser")
    token = issue_token(key, claim.binding)
    new_id = token.split(".", 1)[0]
    _issued[root.id] = (new_id, token)

    def forget() -> None:
        _issued.pop(root.id, None)

    root.on_ended(forget)
    return UserKey("token", new_id, token)


def _token_response(token: str) -> Callable[[Request], Response]:
    """The dynamic route that puts ``token`` in the browser's HttpOnly cookie."""

    def handler(request: Request) -> Response:
        site = request.headers.get("sec-fetch-site")
        if site is not None and site != "same-origin":
            return PlainTextResponse("Forbidden", status_code=403)
        path = request.query_params.get("path", "")
        if _COOKIE_PATH.fullmatch(path) is None:
            return PlainTextResponse("Bad Request", status_code=400)
        response = Response(status_code=204, headers={"Cache-Control": "no-store"})
        response.set_cookie(
            TOKEN_COOKIE,
            token,
            max_age=TOKEN_MAX_AGE,
            path=path,
            secure=request.query_params.get("secure") == "1",
            httponly=True,
            samesite="strict",
        )
        return response

    return handler


def _holder(directory: Path) -> SessionConversation | None:
    """The live session's conversation holding ``directory``, if any."""
    ref = _in_use.get(directory)
    holder = None if ref is None else ref()
    if holder is None and ref is not None:
        del _in_use[directory]  # its session ended without letting go
    return holder


class SessionConversation:
    """The saved conversation of one chat in one browser session: in files under the
    persistence's root, or in its store (:mod:`._stored_conversations`).

    Examples:
        >>> SessionConversation.__name__
        'SessionConversation'
    """

    strings: KitStrings = DEFAULT_STRINGS
    """The words of its notes (the app's ``KitStrings``; ``open_conversation`` sets them)."""

    def __init__(self, persistence: KitPersistence, session: Session, chat_id: str) -> None:
        """Raises:
        _NotSaved: the user cannot be told safely, or their folder cannot be made.
        """
        self.persistence = persistence
        self._session = session
        user = resolve_user(persistence, session)
        self.kind, self._issued_token = user.kind, user.issued
        self.budget_user = budget_user(user.kind, user.key)  # its daily budget's counters
        self._link = kit_store(persistence)
        self.folder: ConversationFolder | StoredFolder
        try:
            # Which of the user's conversations this page opens (see _session_listing).
            lists = kit_store(persistence, local=True)
            assert lists is not None  # local: a file store when there is no store
            self.listing = SessionListing(persistence, lists, user.kind, user.key, chat_id)
            chat_key = self.listing.chat_key
            if self._link is None:
                self.folder = open_folder(persistence, user.kind, user.key, chat_key)
            else:
                self.folder = open_stored(persistence, self._link, user.kind, user.key, chat_key)
        except StoreUnavailableError as exc:
            logger.warning("the conversation store cannot be reached: %s", exc)
            raise _NotSaved("store_down_at_start") from None
        except PersistenceError as exc:
            logger.warning("a conversation folder could not be opened: %s", exc)
            raise _NotSaved("not_saved_here") from None
        _open.setdefault(self.folder.directory, weakref.WeakSet()).add(self)
        self.ready = asyncio.Event()  # set once restored (or found unusable)
        self.usable = False  # True while this session holds the folder
        self.discarded = False  # the user started a new conversation: save nothing more
        self.loaded = False  # the saved conversation is in the agent (or set aside)
        self._close: Callable[[], Awaitable[None]] | None = None
        self._released = asyncio.Event()
        self._holder_id = f"tab-{uuid.uuid4().hex}"  # this session, as the lease's holder
        self._lease: Lease | None = None  # held in the store (with a store)
        self._renewing: asyncio.Task[None] | None = None
        self._lost = False  # a newer session (maybe in another process) took it over
        self._renew_failing = False
        self._listed_turns = -1  # the turns when the list last moved it up (-1: unknown)
        # Called when the list changed (the drawer shows it again).
        self.listing_changed: Callable[[], Awaitable[None]] | None = None

    @property
    def stored(self) -> bool:
        """True when the conversation is kept in a store (not in files)."""
        return self._link is not None

    @property
    def link(self) -> KitStore | None:
        """The kit's link to the conversation's store (None: kept in files)."""
        return self._link

    @property
    def store(self) -> Store | None:
        """The store the conversation is kept in (its agent keeps its records there
        too), or None when it is kept in files."""
        return None if self._link is None else self._link.store

    async def send_token(self) -> None:
        """Give the browser its new token (nothing when it already had one): the kit's
        script fetches a route of this session whose answer sets the HttpOnly cookie."""
        if self._issued_token is not None:
            url = self._session.root_scope().dynamic_route(
                TOKEN_ROUTE, _token_response(self._issued_token)
            )
            await self._session.send_custom_message(TOKEN_MESSAGE, {"url": url})

    def keep(self) -> None:
        """The first message is being sent: the conversation is kept from now on (in a
        worker thread: with a store it waits for it)."""
        if not (self.usable and not self.discarded):
            return
        if isinstance(self.folder, StoredFolder):
            assert self._link is not None
            self._link.wait(self.folder.keep)
        else:
            self.folder.keep()

    async def keep_async(self, message: str | None = None) -> str | None:
        """:meth:`keep`, awaited (never blocking the event loop); the first time, the
        conversation joins the user's list, titled by ``message``. A note for the chat
        when that deleted the user's oldest conversations (past the cap)."""
        if not (self.usable and not self.discarded):
            return None
        if isinstance(self.folder, StoredFolder):
            assert self._link is not None
            await self._link.run(self.folder.keep)
        else:
            await asyncio.to_thread(self.folder.keep)
        if self.listing.listed:
            return None
        dropped = await self.listing.kept(message)
        await forget(self.persistence, self._link, dropped)
        if self.listing_changed is not None:
            await self.listing_changed()
        return capped_note(self.listing.dropped, self.persistence.max_conversations, self.strings)

    def _in_use_names(self) -> set[Path]:
        return {*_in_use, *_open, self.folder.directory}

    def sweep_soon(self) -> None:
        """Delete expired conversations in the background (at most every few minutes;
        with a store, in one process of all that share it)."""
        root = self.persistence.root
        now = time.monotonic()
        if now - _last_sweep.get(root, -SWEEP_EVERY) < SWEEP_EVERY:
            return
        _last_sweep[root] = now
        in_use = self._in_use_names()
        if self._link is not None:
            sweeping = asyncio.ensure_future(
                _sweep_stored(self.persistence, self._link.run, {p.name for p in in_use})
            )
            _closing.add(sweeping)
            sweeping.add_done_callback(_closing.discard)
            return

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
        will close this one. With a store, this session then holds the conversation's
        lease, taken over from whichever session (in any process) held it.

        Raises:
            StoreUnavailableError: the store cannot be reached (nothing is held).
        """
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
        if isinstance(self.folder, StoredFolder):
            try:
                await self._acquire(self.folder)
            except BaseException:
                self.release()
                raise
        self.usable = True
        return True

    async def _acquire(self, folder: StoredFolder) -> None:
        """Hold the conversation's lease (taking it over), and mark it used now."""
        assert self._link is not None

        async def acquire(store: Store) -> Lease | None:
            lease = await store.acquire_lease(
                lease_name(folder.name), self._holder_id, LEASE_SECONDS, take_over=True
            )
            if folder.kept:
                await folder.keep(store)  # touched: its expiry counts from now
            return lease

        self._lease = await self._link.run(acquire)
        self._renewing = asyncio.ensure_future(self._renew())

    async def _renew(self) -> None:
        """Renew the lease until this session lets go, or close it when lost."""
        while True:
            await asyncio.sleep(RENEW_EVERY)
            if not await self._still_held():
                return

    async def _still_held(self) -> bool:
        """Renew the lease: False (and this session is closing) when another holds it."""
        lease = self._lease
        if lease is None or self._link is None:
            return self.usable
        try:
            renewed = await self._link.run(lambda store: store.renew_lease(lease, LEASE_SECONDS))
        except StoreUnavailableError as exc:
            # Nobody can save through the store meanwhile; once it is back, the renewal
            # says whether this session still holds the conversation.
            if not self._renew_failing:
                logger.warning("a conversation's lease could not be renewed: %s", exc)
            self._renew_failing = True
            return True
        self._renew_failing = False
        if renewed is None:
            self._taken_over()
            return False
        self._lease = renewed
        return True

    def _taken_over(self) -> None:
        """A newer session holds the conversation now: save nothing, close this one."""
        self.usable = False
        self._lost = True
        self._lease = None
        self._renewing = None  # closing may end this very task's session: not cancelled
        closing = asyncio.ensure_future(self._closed_for_newer())
        _closing.add(closing)
        closing.add_done_callback(_closing.discard)

    async def _closed_for_newer(self) -> None:
        if self._close is not None:
            await self._close()

    def release(self) -> None:
        """Let go of the folder (the session ended). A conversation never kept (no
        message was sent) leaves nothing behind: its empty folders are removed, unless
        another session holds them now."""
        directory = self.folder.directory
        self.usable = False
        if _holder(directory) is self:
            del _in_use[directory]
        self._close = None
        self._released.set()
        if self._renewing is not None:
            self._renewing.cancel()
            self._renewing = None
        lease, self._lease = self._lease, None
        if lease is not None and self._link is not None:
            self._link.later(lambda store: store.release_lease(lease), "letting a lease go")
        sessions = _open.get(directory)
        if sessions is not None:
            sessions.discard(self)
            if not sessions:
                del _open[directory]
        if directory not in _open and _holder(directory) is None and not self._lost:
            try:
                self.folder.discard_if_unkept()
            except OSError:
                logger.warning("an unused conversation folder could not be removed", exc_info=True)

    async def load(self, agent: Agent) -> str | None:
        """Load the saved conversation into ``agent``; a note for the chat when it could
        not be (the damaged file is kept aside, never deleted).

        Raises:
            StoreUnavailableError: the store cannot be reached (nothing is loaded, so
                nothing is saved over it either).
        """
        if isinstance(self.folder, StoredFolder):
            return await self._load_stored(agent, self.folder)
        path = self.folder.session_file
        if not path.exists():
            self.loaded = True
            return None
        try:
            await agent.load_session_async(path)
            self.loaded = True
            self._listed_turns = len(agent.get_turns())  # opening it does not move it up
        except DeputyError as exc:
            kept = path.with_name(f"session.json.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
            try:
                path.rename(kept)
            except OSError:
                kept = path
            logger.warning("a saved conversation could not be restored: %s", exc)
            self.loaded = True  # a new conversation starts; the old one is kept aside
            return self.strings.format("restore_failed_kept", error=type(exc).__name__)
        return None

    async def _load_stored(self, agent: Agent, folder: StoredFolder) -> str | None:
        assert self._link is not None
        try:
            record = await self._link.run(lambda store: store.get(SESSION_KIND, folder.name))
            if record is not None:
                commit = await asyncio.to_thread(
                    check_session_payload, agent, record.payload, "the saved conversation"
                )
                commit()
        except StoreUnavailableError:
            raise
        except DeputyError as exc:
            logger.warning("a saved conversation could not be restored: %s", exc)
            self.loaded = True  # a new conversation starts (saved over the damaged one)
            return self.strings.format("restore_failed", error=type(exc).__name__)
        self.loaded = True
        self._listed_turns = len(agent.get_turns())  # opening it does not move it up
        return None

    async def save(self, agent: Agent) -> str | None:
        """Save ``agent``'s conversation; a note for the chat when that failed. Nothing is
        saved unless this session holds the folder and loaded what was saved before
        (so a failed restore never overwrites it)."""
        if not (self.usable and self.loaded) or self.discarded or agent.running:
            return None
        if not self.folder.kept:
            return None  # nothing was ever sent: nothing to keep
        turns = len(agent.get_turns())
        if turns != self._listed_turns:  # a new message: to the top of the user's list
            try:
                await self.listing.touched()
                self._listed_turns = turns
            except DeputyError as exc:
                logger.warning("the conversation list could not be updated: %s", exc)
        if isinstance(self.folder, StoredFolder):
            return await self._save_stored(agent, self.folder)
        try:
            await agent.save_session_async(self.folder.session_file)
            self.folder.touch()
        except DeputyError as exc:
            logger.warning("the conversation could not be saved: %s", exc)
            return self.strings.format("not_saved_because", error=type(exc).__name__)
        except OSError as exc:
            logger.warning("the conversation could not be saved: %s", exc)
            return self.strings.not_saved
        return None

    async def _save_stored(self, agent: Agent, folder: StoredFolder) -> str | None:
        """Save into the store, fenced by the lease: a session that lost it saves nothing."""
        assert self._link is not None
        lease = self._lease
        if lease is None:
            return None
        try:
            payload = await asyncio.to_thread(stored_session, agent, folder)

            async def write(store: Store) -> Lease | None:
                renewed = await store.renew_lease(lease, LEASE_SECONDS)
                if renewed is not None:
                    await store.put(SESSION_KIND, folder.name, payload, scope=folder.scope)
                    await store.touch(CONVERSATION_KIND, folder.name)  # its last use
                return renewed

            renewed = await self._link.run(write)
        except StoreUnavailableError as exc:
            logger.warning("the conversation could not be saved: %s", exc)
            return self.strings.store_down
        except DeputyError as exc:
            logger.warning("the conversation could not be saved: %s", exc)
            return self.strings.format("not_saved_because", error=type(exc).__name__)
        if renewed is None:
            self._taken_over()
            return None
        if self._lease is lease:
            self._lease = renewed
        return None

    async def start_new(self) -> None:
        """Start a new conversation: the page reloads and opens a new one; this one
        stays in the user's list (unless nothing was ever sent in it)."""
        await self.listing.start_new()
        await self._session.send_custom_message(RELOAD_MESSAGE, {})

    async def switch_to(self, conversation_id: object) -> bool:
        """Open one of the user's conversations: the page reloads and restores it.
        False (logged, nothing changes) when the id is not one of this user's."""
        if not await self.listing.select(conversation_id):
            return False
        await self._session.send_custom_message(RELOAD_MESSAGE, {})
        return True

    async def delete(self, conversation_id: object) -> bool:
        """Delete one of the user's conversations (records, workspace, folders); the
        page reloads when it was this one. False when refused (logged)."""
        deleted = await self.listing.delete(conversation_id)
        if deleted is None:
            return False
        if deleted == self.listing.current:
            self.discarded = True  # saved no more; its lease is taken over below
        await forget(self.persistence, self._link, [self.listing.name_of(deleted)])
        if deleted == self.listing.current:
            await self._session.send_custom_message(RELOAD_MESSAGE, {})
        return True


async def _sweep_stored(
    persistence: KitPersistence,
    run: Callable[[Callable[[Store], Awaitable[list[str] | None]]], Awaitable[list[str] | None]],
    in_use: set[str],
) -> None:
    """The store's sweep, then the swept conversations' folders (a worker thread)."""
    try:
        names = await run(lambda store: sweep_store(persistence, store, in_use, time.time()))
    except DeputyError as exc:
        logger.warning("sweeping expired conversations failed: %s", exc)
        return
    if names:
        await asyncio.to_thread(discard_folders, persistence, names)
        logger.info("deleted %d expired conversation(s)", len(names))
