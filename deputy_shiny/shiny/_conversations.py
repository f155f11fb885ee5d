"""Where the kit keeps each user's conversation: ``KitPersistence`` and its folders.

With ``agent_chat_server(..., persistence=KitPersistence(root))`` every user (a *key*)
has one conversation per chat, named by a hash of the key (the key itself is never on
disk). The records and the workspace live in two separate trees, so nothing under a
workspace (where model-run code and the file tools act) reaches a record by any path::

    <root>/                      0711: traversable, not listable
        records/                 0700
            .token-key           0600: the HMAC key of browser tokens (made once)
            <sha256 of kind, key and chat id>/     0700
                conversation.json   the conversation's ids (a versioned, checksummed document)
                session.json        the saved conversation (agent.save_session)
                approvals/          durable approvals waiting for this user
                checkpoints/        the file checkpoint journal
        workspaces/              0711: so sandboxed code can run as another uid
            <the same name>/     0700: the agent's working directory

A conversation is *kept* from its first message on (its ids file is written then). The
directories the agent needs exist while its session runs; a session that ends without
a message sent removes them again, so a visitor who connects and leaves leaves nothing.
A kept conversation not used for ``ttl`` is deleted, records and workspace, the next
time a session of the process starts (or when its own user comes back).

Folders of the layout before this one (``<root>/<hash>/`` with ``workspace/`` inside)
are not read, moved or deleted: their conversations are not restored. Delete them by
hand.

Examples:
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
import stat
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, SecretBytes, field_validator

from .._util.secret_paths import protect_path
from ..errors import ConfigurationError, PersistenceError
from ..models import ChatModel, resolve_model
from ..persistence.files import read_document, write_document
from ..persistence.store import Store
from ..sandbox import prepare_workspace
from ..sandbox._uids import claim_problem
from ._budget import UserBudget
from ._kit_store import KitStore, open_store

logger = logging.getLogger(__name__)

__all__ = [
    "ConversationFolder",
    "KitPersistence",
    "kit_store",
    "open_folder",
    "records_root",
    "sweep_expired",
    "token_key",
    "workspaces_root",
]

_IDS_KIND = "kit-conversation"
_TRASH_PREFIX = ".expired-"
_KEY_FILE = ".token-key"
_STORE_DIR = ".store"  # the budget's counters without a store (never swept as a folder)
_NAME = re.compile(r"[0-9a-f]{40}")
UNKEPT_GRACE = 3600.0
"""Seconds after which the sweep removes the folders of a conversation that was never
kept and that no live session holds (left over from a crash)."""


class KitPersistence(BaseModel):
    """Keep each user's conversation across page reloads and dropped connections.

    Attributes:
        root: The folder holding every user's conversation (created if missing).
        key: ``key(session) -> str | None``: who the user is, decided by the app (it
            then answers for where that comes from). None (the default), or a function
            returning None, means the trusted ``session.user`` (see
            ``trust_user_header``), else an anonymous browser token.
        ttl: How long an unused conversation is kept (default 7 days); then it is
            deleted, with its workspace.
        trust_user_header: Whether ``session.user`` (py-shiny reads it from the
            ``Shiny-Server-Credentials`` request header, which any client can send)
            names the user. None (default): only on Posit Connect, which sets that
            header itself; True: a proxy in front of the app sets it and removes any a
            client sent; False: never.
        anonymous: Whether users with no trusted identity get a saved conversation (an
            HttpOnly token cookie). None (default): yes, except on Posit Connect, where
            every piece of content shares one origin, so another content's page could
            script this app's pages and plant its cookies; True: yes, also there
            (opt-in); False: never.
        token_key: The HMAC key (32 bytes or more) that signs browser tokens; None
            keeps a random one in ``root/records/.token-key``. Processes sharing a root
            share it; a new key ends every anonymous conversation.
        store: Where conversations are kept: a SQLAlchemy URL (``sqlite+aiosqlite:///``
            for one machine, ``postgresql+psycopg://`` for several) or a
            :class:`~deputy_shiny.persistence.Store`. None (default) keeps files under
            ``root``. With a store, the conversations' ids and saved sessions, the
            takeover lease and the sweep's bookkeeping are the store's, so every
            process sharing it sees them; ``root`` keeps the workspaces (storage every
            process sees). Only the kit calls the store, on a thread of its own.
        budget: A :class:`UserBudget` each user's runs are held to, per UTC day,
            across their sessions and every process sharing the store (without a
            store, the processes sharing ``root``).
        max_conversations: How many conversations each user keeps per chat (default
            200, listed in the chat's history drawer); a new one past it deletes the
            oldest, and the chat says so.
        title_model: A model (a litellm model string, a ``ChatModel`` or a test model)
            that titles each conversation in the drawer once its first reply has come;
            None (default) titles it by its first message. Its request is the user's as
            any other: held to ``budget`` and counted in the conversation's usage; on
            any failure the first message's title stays (``_conversation_titles``).

    Examples:
        >>> import tempfile
        >>> KitPersistence(tempfile.mkdtemp(), key=lambda session: "alice").ttl.days
        7
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    root: Path
    key: Callable[[Any], str | None] | None = None
    ttl: timedelta = timedelta(days=7)
    trust_user_header: bool | None = None
    anonymous: bool | None = None
    token_key: SecretBytes | None = None
    store: Store | str | None = None
    budget: UserBudget | None = None
    max_conversations: int = 200
    title_model: ChatModel | None = None
    _link: KitStore | None = PrivateAttr(default=None)
    _link_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, root: str | os.PathLike[str], **options: Any) -> None:
        super().__init__(root=Path(root), **options)

    @field_validator("root")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().absolute()

    @field_validator("title_model", mode="before")
    @classmethod
    def _a_model(cls, value: object) -> ChatModel | None:
        return None if value is None else resolve_model(value)

    @field_validator("max_conversations")
    @classmethod
    def _at_least_one(cls, value: int) -> int:
        if value < 1:
            raise ValueError("max_conversations must be at least 1")
        return value

    @field_validator("ttl")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value.total_seconds() <= 0:
            raise ValueError("ttl must be positive")
        return value

    def model_post_init(self, context: Any, /) -> None:
        """With a store, open it now in the background (the app starts before its first
        session, which then need not wait for the schema check)."""
        if self.store is not None:
            link = kit_store(self)
            assert link is not None
            link.warm_up()

    @field_validator("store")
    @classmethod
    def _a_store(cls, value: Store | str | None) -> Store | str | None:
        if isinstance(value, str) and not value.strip():
            raise ValueError("store must be a SQLAlchemy URL, a Store or None")
        return value

    def close(self) -> None:
        """Close the store the kit opened for this persistence (tests; a process that
        ends needs nothing)."""
        with self._link_lock:
            link, self._link = self._link, None
        if link is not None:
            link.close()

    @field_validator("token_key")
    @classmethod
    def _long_enough(cls, value: SecretBytes | None) -> SecretBytes | None:
        if value is not None and len(value.get_secret_value()) < 32:
            raise ValueError("token_key must be at least 32 bytes")
        return value


def kit_store(
    persistence: KitPersistence, *, for_budget: bool = False, local: bool = False
) -> KitStore | None:
    """The store the kit uses for ``persistence`` (opened once): its ``store``; without
    one, None, except ``for_budget`` (with a budget) or ``local``: then a FileStore
    under ``root/records/.store`` keeps the budget's counters and the users' lists of
    conversations."""
    if (
        persistence.store is None
        and not local
        and not (for_budget and persistence.budget is not None)
    ):
        return None
    with persistence._link_lock:
        if persistence._link is None:
            if persistence.store is not None:
                store = open_store(persistence.store)
            else:
                from ..persistence.file_store import FileStore

                _ensure_layout(persistence)
                store = FileStore(records_root(persistence) / _STORE_DIR)
            persistence._link = KitStore(store)
        return persistence._link


def records_root(persistence: KitPersistence) -> Path:
    """``root/records``: every conversation's records (never under a workspace)."""
    return persistence.root / "records"


def workspaces_root(persistence: KitPersistence) -> Path:
    """``root/workspaces``: every conversation's workspace."""
    return persistence.root / "workspaces"


def _ensure_layout(persistence: KitPersistence) -> None:
    """Make ``root`` (traversable), ``records`` (0700) and ``workspaces`` (0711)."""
    root = persistence.root
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o711)
        mode = stat.S_IMODE(os.lstat(root).st_mode)
        if mode & 0o011 != 0o011:
            # Sandboxed code runs as another uid inside a workspace: every parent must
            # be traversable (listing is not needed, so 0711 is enough).
            os.chmod(root, mode | 0o111)
        records = records_root(persistence)
        records.mkdir(exist_ok=True, mode=0o700)
        os.chmod(records, 0o700)
        # The token key and every record: no agent's file tools or sandbox reach them,
        # even one whose working directory holds the root.
        protect_path(records)
        workspaces = workspaces_root(persistence)
        workspaces.mkdir(exist_ok=True, mode=0o711)
        os.chmod(workspaces, 0o711)
    except OSError as exc:
        raise PersistenceError(f"{root}: cannot create the conversations folder ({exc}).") from None
    for directory in (records, workspaces):
        if directory.is_symlink() or not directory.is_dir():
            raise PersistenceError(f"{directory}: is not a directory.")


def token_key(persistence: KitPersistence) -> bytes:
    """The key that signs browser tokens: ``token_key``, else the one kept in
    ``root/records/.token-key`` (created at first use, mode 0600, never replaced).

    Raises:
        PersistenceError: the key file cannot be made or read, or is not a key.
    """
    if persistence.token_key is not None:
        return persistence.token_key.get_secret_value()
    _ensure_layout(persistence)
    path = records_root(persistence) / _KEY_FILE
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise PersistenceError(f"{path}: cannot create the token key ({exc}).") from None
    else:
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(32).hex().encode())
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as source:
            text = source.read(200).decode("ascii", "replace").strip()
    except OSError as exc:
        raise PersistenceError(f"{path}: cannot read the token key ({exc}).") from None
    if not re.fullmatch(r"[0-9a-f]{64,}", text):
        # Another process may be writing it this very moment: wait for it once.
        time.sleep(0.05)
        try:
            text = path.read_text().strip()
        except OSError:
            text = ""
        if not re.fullmatch(r"[0-9a-f]{64,}", text):
            raise PersistenceError(f"{path}: is not a token key (64 hex digits); remove it.")
    return bytes.fromhex(text)


@dataclass(frozen=True)
class ConversationFolder:
    """One user's conversation: its records folder, its workspace, and the ids its
    agent must keep."""

    directory: Path
    workspace: Path
    session_id: str
    agent_id: str

    @property
    def session_file(self) -> Path:
        return self.directory / "session.json"

    @property
    def approvals(self) -> Path:
        return self.directory / "approvals"

    @property
    def checkpoints(self) -> Path:
        return self.directory / "checkpoints"

    @property
    def kept(self) -> bool:
        """True from the conversation's first message on (its ids are on disk)."""
        return (self.directory / _IDS_FILE).is_file()

    def keep(self) -> None:
        """Keep the conversation (its first message): write its ids, once.

        Raises:
            PersistenceError: the ids file cannot be written.
        """
        if not self.kept:
            ids = {"session_id": self.session_id, "agent_id": self.agent_id}
            write_document(self.directory / _IDS_FILE, _IDS_KIND, ids, overwrite=False)
        self.touch()

    def touch(self) -> None:
        """Mark the folder used now (its expiry counts from here)."""
        os.utime(self.directory)

    def discard_if_unkept(self) -> bool:
        """Remove the records and the workspace of a conversation that was never kept
        (its session ends without a message sent); True if removed."""
        if self.kept:
            return False
        for directory in (self.directory, self.workspace):
            _discard(directory)
        return True


_IDS_FILE = "conversation.json"


def folder_name(kind: str, key: str, chat_id: str) -> str:
    """The name of one user's chat (records and workspace): a hash, so no key reaches
    the file system.

    Examples:
        >>> folder_name("user", "alice", "chat") == folder_name("token", "alice", "chat")
        False
    """
    digest = hashlib.sha256(f"{kind}\0{key}\0{chat_id}".encode()).hexdigest()
    return digest[:40]


def open_folder(
    persistence: KitPersistence, kind: str, key: str, chat_id: str
) -> ConversationFolder:
    """The user's conversation, its directories made ready (an expired one is deleted
    first). Nothing is written but empty directories until :meth:`~ConversationFolder.keep`.

    Raises:
        PersistenceError: the folders cannot be made.
    """
    _ensure_layout(persistence)
    name = folder_name(kind, key, chat_id)
    directory = records_root(persistence) / name
    workspace = workspaces_root(persistence) / name
    if directory.is_dir() and _expired(directory, persistence.ttl, time.time()):
        # Renamed now (nothing of it is opened again); removed in the background, as
        # a large workspace would hold up the event loop.
        for old in (directory, workspace):
            trash = _discard(old, remove=False)
            if trash is not None:
                threading.Thread(
                    target=shutil.rmtree, args=(trash, True), name="deputy-expire", daemon=True
                ).start()
    return _prepare(directory, workspace)


def _prepare(directory: Path, workspace: Path) -> ConversationFolder:
    try:
        for path in (directory, directory / "approvals", directory / "checkpoints", workspace):
            path.mkdir(exist_ok=True, mode=0o700)
            if path.is_symlink() or not path.is_dir():
                raise PersistenceError(f"{path}: is not a directory.")
        owner = workspace.stat().st_uid
        if os.geteuid() == 0 and (owner == 0 or claim_problem(owner, workspace) is not None):
            # New, or sharing its uid: model-run code runs as the workspace's owner,
            # never as root, and one uid per workspace keeps process counts apart.
            prepare_workspace(workspace)
    except OSError as exc:
        raise PersistenceError(f"{directory}: cannot create it ({exc}).") from None
    ids = _read_ids(directory / _IDS_FILE)
    if ids is None:
        # In memory only: written as the first message is sent (keep()).
        ids = {"session_id": f"session_{uuid.uuid4().hex}", "agent_id": f"agent_{uuid.uuid4().hex}"}
    folder = ConversationFolder(directory, workspace, ids["session_id"], ids["agent_id"])
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


def _stale(entry: Path, now: float) -> bool:
    try:
        return now - entry.stat().st_mtime > UNKEPT_GRACE
    except OSError:
        return False


def sweep_expired(persistence: KitPersistence, in_use: set[Path], now: float | None = None) -> int:
    """Delete every conversation unused for longer than ``ttl`` (records and workspace),
    and what a crash left of conversations never kept, except those whose records
    folder is in ``in_use``; returns how many conversations were deleted.

    Examples:
        >>> import tempfile
        >>> sweep_expired(KitPersistence(tempfile.mkdtemp()), set())
        0
    """
    records, workspaces = records_root(persistence), workspaces_root(persistence)
    if not records.is_dir():
        return 0
    now = time.time() if now is None else now
    deleted = 0
    for entry in records.iterdir():
        if entry.name.startswith(_TRASH_PREFIX) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)  # left over from a crash
            continue
        if entry in in_use or entry.name == _STORE_DIR or entry.is_symlink() or not entry.is_dir():
            continue
        kept = (entry / _IDS_FILE).exists() or (entry / "session.json").exists()
        if _expired(entry, persistence.ttl, now) or (not kept and _stale(entry, now)):
            _discard(entry)
            _discard(workspaces / entry.name)
            deleted += 1
    if workspaces.is_dir():
        held = {path.name for path in in_use}
        for entry in workspaces.iterdir():
            if entry.name.startswith(_TRASH_PREFIX) and entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            elif (
                _NAME.fullmatch(entry.name)
                and entry.name not in held
                and not entry.is_symlink()
                and entry.is_dir()
                and not (records / entry.name).exists()
                and _stale(entry, now)
            ):
                _discard(entry)  # its records are gone (a crash between the two)
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
