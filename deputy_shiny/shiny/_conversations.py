"""Where the kit keeps each user's conversation: ``KitPersistence`` and its folders.

With ``agent_chat_server(..., persistence=KitPersistence(root))`` every user (a *key*)
has one folder under ``root``, named by a hash of the key (the key itself is never on
disk)::

    <root>/<sha256 of kind, key and chat id>/
        conversation.json   the conversation's ids (a versioned, checksummed document)
        session.json        the saved conversation (agent.save_session)
        workspace/          the agent's working directory
        approvals/          durable approvals waiting for this user
        checkpoints/        the file checkpoint journal

A folder not used for ``ttl`` is deleted, with everything in it, the next time any
session of the process starts (or when its own user comes back).

Example:
    >>> import tempfile
    >>> from datetime import timedelta
    >>> persistence = KitPersistence(tempfile.mkdtemp(), ttl=timedelta(days=1))
    >>> persistence.ttl.days
    1
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from ..errors import ConfigurationError, PersistenceError
from ..persistence.files import read_document, write_document

logger = logging.getLogger(__name__)

__all__ = [
    "COOKIE",
    "ConversationFolder",
    "KitPersistence",
    "is_browser_token",
    "new_browser_token",
    "open_folder",
    "sweep_expired",
]

COOKIE = "deputy_shiny_conversation"
"""The cookie ``deputy_shiny.js`` sets from localStorage, so the server knows the
browser's token as the session starts."""

_IDS_KIND = "kit-conversation"
_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")
_TRASH_PREFIX = ".expired-"


class KitPersistence(BaseModel):
    """Keep each user's conversation across page reloads and dropped connections.

    Attributes:
        root: The folder holding every user's conversation (created if missing).
        key: ``key(session) -> str | None``: who the user is. None (the default), or a
            function returning None, means Posit Connect's ``session.user`` when set,
            else an unguessable token kept in the browser's localStorage.
        ttl: How long an unused conversation is kept (default 7 days); then it is
            deleted, with its workspace.

    Example:
        >>> import tempfile
        >>> KitPersistence(tempfile.mkdtemp(), key=lambda session: "alice").ttl.days
        7
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    root: Path
    key: Callable[[Any], str | None] | None = None
    ttl: timedelta = timedelta(days=7)

    def __init__(self, root: str | os.PathLike[str], **options: Any) -> None:
        super().__init__(root=Path(root), **options)

    @field_validator("root")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().absolute()

    @field_validator("ttl")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value.total_seconds() <= 0:
            raise ValueError("ttl must be positive")
        return value


def new_browser_token() -> str:
    """A fresh browser token: 256 random bits, URL-safe (43 characters)."""
    return secrets.token_urlsafe(32)


def is_browser_token(value: object) -> bool:
    """True for a string shaped like :func:`new_browser_token`'s (anything else is
    ignored: a new token is issued).

    Example:
        >>> is_browser_token(new_browser_token()), is_browser_token("../etc")
        (True, False)
    """
    return isinstance(value, str) and _TOKEN.fullmatch(value) is not None


@dataclass(frozen=True)
class ConversationFolder:
    """One user's conversation folder and the ids its agent must keep."""

    directory: Path
    session_id: str
    agent_id: str

    @property
    def session_file(self) -> Path:
        return self.directory / "session.json"

    @property
    def workspace(self) -> Path:
        return self.directory / "workspace"

    @property
    def approvals(self) -> Path:
        return self.directory / "approvals"

    @property
    def checkpoints(self) -> Path:
        return self.directory / "checkpoints"

    def touch(self) -> None:
        """Mark the folder used now (its expiry counts from here)."""
        os.utime(self.directory)

    def start_new(self) -> ConversationFolder:
        """Forget this conversation (transcript, pending approvals, checkpoints) and give
        new ids; the workspace's files stay. Returns the new folder."""
        for path in (self.session_file, self.directory / _IDS_FILE):
            path.unlink(missing_ok=True)
        for directory in (self.approvals, self.checkpoints):
            shutil.rmtree(directory, ignore_errors=True)
        return _prepare(self.directory)


_IDS_FILE = "conversation.json"


def folder_name(kind: str, key: str, chat_id: str) -> str:
    """The folder of one user's chat: a hash, so no key reaches the file system.

    Example:
        >>> folder_name("user", "alice", "chat") == folder_name("token", "alice", "chat")
        False
    """
    digest = hashlib.sha256(f"{kind}\0{key}\0{chat_id}".encode()).hexdigest()
    return digest[:40]


def open_folder(
    persistence: KitPersistence, kind: str, key: str, chat_id: str
) -> ConversationFolder:
    """The user's folder, made ready (an expired one is deleted first).

    Raises:
        PersistenceError: the folder cannot be made or its ids file is damaged beyond
            use (a damaged ids file is set aside and a new conversation starts).
    """
    root = persistence.root
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise PersistenceError(f"{root}: cannot create the conversations folder ({exc}).") from None
    directory = root / folder_name(kind, key, chat_id)
    if directory.is_dir() and _expired(directory, persistence.ttl, time.time()):
        # Renamed now (nothing of it is opened again); removed in the background, as
        # a large workspace would hold up the event loop.
        trash = _discard(directory, remove=False)
        if trash is not None:
            threading.Thread(
                target=shutil.rmtree, args=(trash, True), name="deputy-expire", daemon=True
            ).start()
    return _prepare(directory)


def _prepare(directory: Path) -> ConversationFolder:
    try:
        directory.mkdir(exist_ok=True, mode=0o700)
        for sub in ("workspace", "approvals", "checkpoints"):
            (directory / sub).mkdir(exist_ok=True, mode=0o700)
    except OSError as exc:
        raise PersistenceError(f"{directory}: cannot create it ({exc}).") from None
    ids_file = directory / _IDS_FILE
    ids = _read_ids(ids_file)
    if ids is None:
        ids = {"session_id": f"session_{uuid.uuid4().hex}", "agent_id": f"agent_{uuid.uuid4().hex}"}
        write_document(ids_file, _IDS_KIND, ids)
    folder = ConversationFolder(directory, ids["session_id"], ids["agent_id"])
    folder.touch()
    return folder


def _read_ids(path: Path) -> dict[str, str] | None:
    if not path.exists():
        return None
    try:
        data = read_document(path, _IDS_KIND)
    except PersistenceError as exc:
        # Without its ids the saved conversation cannot be resumed: keep it aside (nothing
        # is deleted) and start anew.
        logger.warning("a conversation's ids file is damaged; starting anew: %s", exc)
        _set_aside(path.parent)
        return None
    if not (
        isinstance(data, dict)
        and all(isinstance(data.get(k), str) and data[k] for k in ("session_id", "agent_id"))
    ):
        _set_aside(path.parent)
        return None
    return {"session_id": data["session_id"], "agent_id": data["agent_id"]}


def _set_aside(directory: Path) -> None:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for name in ("session.json", _IDS_FILE):
        path = directory / name
        if path.exists():
            path.rename(directory / f"{name}.damaged-{stamp}")


def _last_used(directory: Path) -> float:
    times = [directory.stat().st_mtime]
    session = directory / "session.json"
    if session.exists():
        times.append(session.stat().st_mtime)
    return max(times)


def _expired(directory: Path, ttl: timedelta, now: float) -> bool:
    try:
        return now - _last_used(directory) > ttl.total_seconds()
    except OSError:
        return False


def _discard(directory: Path, *, remove: bool = True) -> Path | None:
    """Delete a folder: renamed first (at once, so nobody opens it), then removed
    (unless not ``remove``: then the renamed folder is returned for the caller to
    remove; a sweep removes any left over)."""
    trash = directory.with_name(f"{_TRASH_PREFIX}{directory.name}-{uuid.uuid4().hex[:8]}")
    try:
        directory.rename(trash)
    except OSError:
        return None
    if remove:
        shutil.rmtree(trash, ignore_errors=True)
    return trash


def sweep_expired(persistence: KitPersistence, in_use: set[Path], now: float | None = None) -> int:
    """Delete every conversation folder under ``root`` unused for longer than ``ttl``
    (except those in ``in_use``); returns how many were deleted.

    Example:
        >>> import tempfile
        >>> sweep_expired(KitPersistence(tempfile.mkdtemp()), set())
        0
    """
    root = persistence.root
    if not root.is_dir():
        return 0
    now = time.time() if now is None else now
    deleted = 0
    for entry in root.iterdir():
        if entry.name.startswith(_TRASH_PREFIX) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)  # left over from a crash
            continue
        if entry in in_use or entry.is_symlink() or not entry.is_dir():
            continue
        if _expired(entry, persistence.ttl, now):
            _discard(entry)
            deleted += 1
    return deleted


def check_key(value: object) -> str | None:
    """A custom ``key(session)`` result: a non-empty string, or None (the default key)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigurationError(
            f"KitPersistence.key must return a string or None, not {type(value).__name__}"
        )
    return value or None
