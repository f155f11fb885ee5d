"""Attachments: what the user uploads with a message, and what the model gets of it.

``agent_chat_ui(id, attachments=...)`` shows shinychat's attach button (off by
default). Nothing the browser sends is taken at its word (:mod:`._upload_checks`
decides each file's kind by its bytes); then:

* an **image** goes to the model as image content when the model takes images
  (``AttachmentPolicy.images_to_model``, by default litellm's ``supports_vision``);
  otherwise nothing is sent and the chat says so in one line;
* every accepted file is saved in the session's workspace under ``uploads/`` (opened
  beneath the workspace's descriptor, never following a link, never over an existing
  file: ``report-2.pdf`` instead), and the user turn names it (path, kind, size), so
  the file tools read it under the same permissions as any other file. The saved
  conversation, its transcript and its downloads keep those lines; the bytes stay in
  the workspace.

A message is all or nothing: when any file is refused (its kind, a cap, a name that
lies, markup, a decompression bomb) nothing is saved or sent, one note lists why, and
the message's text goes back into the input box.

Examples:
    >>> policy = resolve_attachments(["image", "pdf"])
    >>> policy.kinds, policy.max_file_bytes
    (('image', 'pdf'), 10485760)
    >>> resolve_attachments(None) is None
    True
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from htmltools import Tag
from pydantic import BaseModel, ConfigDict, Field, model_validator

from .._util import safe_fs
from ..errors import AttachmentsRefused, ConfigurationError, PathDenied
from ..messages import ContentImage, ContentText, UserContent
from ._upload_checks import (
    KIND_LABELS,
    AttachmentKind,
    AttachmentRefused,
    human_size,
    image_media_type,
    safe_name,
    sniff,
)

if TYPE_CHECKING:
    from ..agent import Agent

logger = logging.getLogger(__name__)

__all__ = [
    "UPLOADS_DIR",
    "AttachmentPolicy",
    "AttachmentsRefused",
    "PendingMessage",
    "SessionUploads",
    "chat_ui_with_attachments",
    "policy_for",
    "register_policy",
    "resolve_attachments",
    "shinychat_types",
]

UPLOADS_DIR = "uploads"
"""The workspace folder uploads are saved in."""

ALL_KINDS: tuple[AttachmentKind, ...] = get_args(AttachmentKind)

MIB = 1024 * 1024

# The MIME types shinychat's attach button offers for each kind. shinychat 0.7 has no
# DOCX or XLSX among them: its button cannot pick those (see the kit's attachments page).
_SHINYCHAT_TYPES: dict[str, tuple[str, ...]] = {
    "image": ("image/png", "image/jpeg", "image/gif", "image/webp"),
    "pdf": ("application/pdf",),
    "csv": ("text/csv",),
    "markdown": ("text/markdown",),
    "text": ("text/plain",),
}


class AttachmentPolicy(BaseModel):
    """What a chat accepts as attachments, and how much.

    Attributes:
        kinds: The kinds accepted: ``image`` (PNG, JPEG, GIF, WebP), ``pdf``, ``docx``,
            ``xlsx``, ``csv``, ``markdown``, ``text``. Decided by content, not by name.
        max_file_bytes: The largest file (default 10 MiB).
        max_message_bytes: All files of one message together (default 11 MiB). The
            browser is told the smaller of this and shinychat's own cap
            (``SHINYCHAT_MAX_ATTACHMENT_SIZE``, 30 MB by default), so it refuses a larger
            one before sending. A message travels base64-encoded over the websocket,
            whose server (uvicorn) takes at most 16 MiB per message by default.
        max_conversation_bytes: All of the workspace's ``uploads/`` folder (default
            100 MiB): a message that would grow it past this is refused.
        max_unpacked_bytes: What a DOCX or XLSX may unpack to (default 50 MiB), read
            from its directory before anything is inflated.
        images_to_model: Whether images go to the model. None (default) asks litellm
            (``litellm.supports_vision``) for the agent's model; True when the app
            knows better (a local server litellm does not know); False never.

    Examples:
        >>> AttachmentPolicy(kinds=("pdf",), max_file_bytes=2_000_000).max_file_bytes
        2000000
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    kinds: tuple[AttachmentKind, ...] = ALL_KINDS
    max_file_bytes: int = Field(default=10 * MIB, gt=0)
    max_message_bytes: int = Field(default=11 * MIB, gt=0)
    max_conversation_bytes: int = Field(default=100 * MIB, gt=0)
    max_unpacked_bytes: int = Field(default=50 * MIB, gt=0)
    images_to_model: bool | None = None

    @model_validator(mode="after")
    def _some_kind(self) -> AttachmentPolicy:
        if not self.kinds:
            raise ValueError("kinds is empty: pass attachments=None for no attachments")
        return self


def resolve_attachments(
    value: bool | Iterable[str] | AttachmentPolicy | None,
) -> AttachmentPolicy | None:
    """``agent_chat_ui(attachments=)`` as a policy: None/False off, True every kind, a
    list of kinds, or an :class:`AttachmentPolicy`.

    Raises:
        ConfigurationError: an unknown kind, or an empty list.
    """
    if value is None or value is False:
        return None
    if value is True:
        return AttachmentPolicy()
    if isinstance(value, AttachmentPolicy):
        return value
    if isinstance(value, str):
        value = (value,)
    kinds = tuple(value)
    unknown = sorted(set(kinds) - set(ALL_KINDS))
    if unknown or not kinds:
        raise ConfigurationError(
            f"attachments: unknown kind(s) {unknown or kinds}; use a list of {list(ALL_KINDS)}, "
            "True (all) or an AttachmentPolicy"
        )
    return AttachmentPolicy(kinds=kinds)


def chat_ui_with_attachments(
    attachments: bool | Iterable[str] | AttachmentPolicy | None,
    options: dict[str, Any],
    chat_id: str,
) -> Tag:
    """shinychat's ``chat_ui("chat", **options)``, its attach button set from
    ``attachments``, whose policy is recorded for the chat's server (``chat_id``: the
    chat's namespaced id). The browser's size cap is the smaller of the policy's
    ``max_message_bytes`` and shinychat's own.

    Raises:
        ConfigurationError: ``allow_attachments`` among ``options`` (the kit would not
            check what that lets through: use ``attachments=``), or a bad policy.
    """
    from shinychat import chat_ui
    from shinychat._attachments import resolve_max_attachment_size

    if "allow_attachments" in options:
        raise ConfigurationError(
            "agent_chat_ui: use attachments=[...] instead of shinychat's allow_attachments "
            "(the kit checks and saves what the user attaches)"
        )
    policy = resolve_attachments(attachments)
    register_policy(chat_id, policy)
    if policy is None:
        return chat_ui("chat", **options)
    tag = chat_ui("chat", allow_attachments=shinychat_types(policy) or False, **options)
    cap = min(policy.max_message_bytes, resolve_max_attachment_size())
    tag.attrs["max-attachment-size"] = str(cap)
    return tag


def shinychat_types(policy: AttachmentPolicy) -> list[str]:
    """The MIME types shinychat's attach button is told to offer (``attachment-accept``)."""
    return [mime for kind in policy.kinds for mime in _SHINYCHAT_TYPES.get(kind, ())]


# The UI declares a chat's policy as the app builds its page; the chat's server reads it
# at each message (keyed by the chat's namespaced id, e.g. "assistant-chat").
_POLICIES: dict[str, AttachmentPolicy] = {}


def register_policy(chat_id: str, policy: AttachmentPolicy | None) -> None:
    """Record what ``agent_chat_ui`` offered for the chat ``chat_id``."""
    if policy is None:
        _POLICIES.pop(chat_id, None)
    else:
        _POLICIES[chat_id] = policy


def policy_for(chat_id: str | None) -> AttachmentPolicy | None:
    """The policy ``agent_chat_ui`` declared for ``chat_id`` (None: attachments off)."""
    return None if chat_id is None else _POLICIES.get(chat_id)


@dataclass(frozen=True)
class _Upload:
    name: str  # as the browser gave it
    data: bytes


@dataclass(frozen=True)
class _Saved:
    path: str  # relative to the workspace: uploads/<name>
    kind: AttachmentKind
    size: int
    image_type: str | None


def _decode(attachment: Any) -> _Upload:
    name = str(getattr(attachment, "name", "") or "attachment")
    url = str(getattr(attachment, "data_url", ""))
    header, comma, payload = url.partition(",")
    if not header.lower().startswith("data:") or not header.endswith(";base64") or not comma:
        raise AttachmentRefused(f"{name} did not arrive as file data.", name=name, rule="invalid")
    try:
        # Strict (no stray characters), and fast: b64decode(validate=True) runs a regex
        # over the whole payload first, 0.2 s for a 10 MB file.
        data = binascii.a2b_base64(payload, strict_mode=True)
    except (binascii.Error, ValueError):
        raise AttachmentRefused(f"{name} arrived damaged.", name=name, rule="invalid") from None
    return _Upload(name, data)


class SessionUploads:
    """One chat session's uploads: its policy and its workspace.

    Args:
        chat_id: The chat's namespaced id, whose policy ``agent_chat_ui`` declared
            (None: a chat that offers no attachments refuses any sent).
        working_dir: The session's workspace (uploads go to its ``uploads/``).
    """

    def __init__(self, chat_id: str | None, working_dir: Path) -> None:
        self.chat_id = chat_id
        self.working_dir = working_dir

    async def turn(
        self, agent: Agent, text: str, attachments: Sequence[Any]
    ) -> str | list[UserContent]:
        """The user's message with its attachments, as the model gets it; the files are
        saved first. Runs in a worker thread (decoding, checks and writes).

        Raises:
            AttachmentsRefused: one or more files were refused; nothing was saved.
        """
        policy = policy_for(self.chat_id)
        return await asyncio.to_thread(self._turn, policy, agent, text, list(attachments))

    def _turn(
        self, policy: AttachmentPolicy | None, agent: Agent, text: str, attachments: list[Any]
    ) -> str | list[UserContent]:
        if policy is None:
            raise AttachmentsRefused(
                [AttachmentRefused("This chat takes no attachments.", name="", rule="type")]
            )
        uploads, refused = self._checked(policy, agent, attachments)
        if refused:
            raise AttachmentsRefused(refused)
        saved = self._save_all(uploads)
        return _user_contents(text, saved, uploads)

    def _checked(
        self, policy: AttachmentPolicy, agent: Agent, attachments: list[Any]
    ) -> tuple[list[tuple[_Upload, AttachmentKind]], list[AttachmentRefused]]:
        refused: list[AttachmentRefused] = []
        uploads: list[tuple[_Upload, AttachmentKind]] = []
        for attachment in attachments:
            try:
                upload = _decode(attachment)
                uploads.append((upload, _kind(upload, policy)))
            except AttachmentRefused as exc:
                refused.append(exc)
        total = sum(len(u.data) for u, _ in uploads)
        if total > policy.max_message_bytes:
            refused.append(
                AttachmentRefused(
                    f"The files together are {human_size(total)} (at most "
                    f"{human_size(policy.max_message_bytes)} a message).",
                    name="",
                    rule="message_size",
                )
            )
        if any(kind == "image" for _, kind in uploads) and not _takes_images(agent, policy):
            images = ", ".join(u.name for u, kind in uploads if kind == "image")
            refused.append(
                AttachmentRefused(
                    f"This model does not take images ({images}).", name=images, rule="images"
                )
            )
        used = uploads_size(self.working_dir)
        if not refused and used + total > policy.max_conversation_bytes:
            refused.append(
                AttachmentRefused(
                    f"This conversation's uploads would pass "
                    f"{human_size(policy.max_conversation_bytes)} ({human_size(used)} saved).",
                    name="",
                    rule="conversation_size",
                )
            )
        return uploads, refused

    def _save_all(self, uploads: list[tuple[_Upload, AttachmentKind]]) -> list[_Saved]:
        saved: list[_Saved] = []
        try:
            safe_fs.make_dirs(self.working_dir, UPLOADS_DIR)
            for upload, kind in uploads:
                path = save_upload(self.working_dir, safe_name(upload.name), upload.data)
                image = image_media_type(upload.data) if kind == "image" else None
                saved.append(_Saved(path, kind, len(upload.data), image))
        except (OSError, PathDenied) as exc:
            for done in saved:  # all or nothing: no half-sent message leaves files behind
                with contextlib.suppress(OSError, PathDenied):
                    safe_fs.unlink(self.working_dir, done.path)
            logger.warning("uploads could not be saved in %s", self.working_dir, exc_info=True)
            refusal = AttachmentRefused(
                "The files could not be saved in the workspace.", name="", rule="invalid"
            )
            raise AttachmentsRefused([refusal]) from exc
        return saved


@dataclass(frozen=True)
class PendingMessage:
    """A message with attachments, waiting for its run's stream to check and save them
    (the checks and writes happen there, never in the reactive effect that received it:
    an ``await`` there would hold every user's reactive lock)."""

    uploads: SessionUploads
    text: str
    attachments: tuple[Any, ...]

    async def resolve(
        self, agent: Agent, chat: Any
    ) -> str | list[UserContent] | AttachmentsRefused:
        """The model's turn, or why it was refused (the text is then put back in the
        input box: nothing the user typed is lost)."""
        try:
            return await self.uploads.turn(agent, self.text, self.attachments)
        except AttachmentsRefused as exc:
            if self.text:
                chat.update_user_input(value=self.text)
            return exc


def _kind(upload: _Upload, policy: AttachmentPolicy) -> AttachmentKind:
    name = upload.name
    if len(upload.data) > policy.max_file_bytes:
        raise AttachmentRefused(
            f"{name} is {human_size(len(upload.data))} (at most "
            f"{human_size(policy.max_file_bytes)} a file).",
            name=name,
            rule="size",
        )
    kind = sniff(upload.data, name, max_unpacked=policy.max_unpacked_bytes)
    if kind not in policy.kinds:
        raise AttachmentRefused(
            f"{name} is a {KIND_LABELS[kind]}, which this chat does not accept.",
            name=name,
            rule="type",
        )
    return kind


def _takes_images(agent: Agent, policy: AttachmentPolicy) -> bool:
    if policy.images_to_model is not None:
        return policy.images_to_model
    from ..models._litellm import get_litellm  # loaded by now: the kit warms it up

    try:
        return bool(get_litellm().supports_vision(model=agent.model.model))
    except Exception:  # litellm knows nothing of the model: no images
        return False


def uploads_size(working_dir: Path) -> int:
    """The bytes of the regular files in the workspace's ``uploads/`` (0 when missing)."""
    try:
        fd = safe_fs.open_dir(working_dir, UPLOADS_DIR)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    total = 0
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode):
                    total += info.st_size
    finally:
        os.close(fd)
    return total


def save_upload(working_dir: Path, name: str, data: bytes) -> str:
    """Write ``data`` to a new file ``uploads/<name>`` beneath ``working_dir`` and return
    its relative path; an existing name gets a suffix (``report-2.pdf``), never
    overwritten. Opened exclusively beneath the workspace's descriptor, no link followed.

    Examples:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> _ = safe_fs.make_dirs(root, "uploads")
        >>> save_upload(root, "a.txt", b"1"), save_upload(root, "a.txt", b"2")
        ('uploads/a.txt', 'uploads/a-2.txt')
    """
    stem, dot, ext = name.rpartition(".")
    if not dot:
        stem, ext = name, ""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for attempt in range(1, 1000):
        candidate = name if attempt == 1 else f"{stem}-{attempt}{dot}{ext}"
        rel = f"{UPLOADS_DIR}/{candidate}"
        try:
            fd = safe_fs.open_beneath(working_dir, rel, flags, 0o644)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except BaseException:
            with contextlib.suppress(OSError):
                safe_fs.unlink(working_dir, rel)
            raise
        return rel
    raise FileExistsError(f"{UPLOADS_DIR}/{name}: too many files of that name")


def _user_contents(
    text: str, saved: list[_Saved], uploads: list[tuple[_Upload, AttachmentKind]]
) -> str | list[UserContent]:
    lines = []
    for item in saved:
        seen = ", shown to you" if item.kind == "image" else ""
        lines.append(f"- {item.path} ({KIND_LABELS[item.kind]}, {human_size(item.size)}{seen})")
    listing = "Attached files, saved in the workspace:\n" + "\n".join(lines)
    message = f"{text}\n\n{listing}" if text.strip() else listing
    images = [
        ContentImage(data=base64.b64encode(upload.data).decode("ascii"), media_type=item.image_type)
        for item, (upload, _) in zip(saved, uploads, strict=True)
        if item.image_type is not None
    ]
    if not images:
        return message
    return [ContentText(text=message), *images]
