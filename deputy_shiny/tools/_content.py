"""A tool's return value as content: the text the model reads, and the images it returned.

As ellmer's tools, a tool may return content objects instead of text or JSON: a
:class:`~deputy_shiny.messages.ContentText` is its text, a
:class:`~deputy_shiny.messages.ContentImage` reaches the model as an image (for models
that take images; others read a one-line note), a
:class:`~deputy_shiny.messages.ContentAudio` as input audio (likewise), a list of them
is each in turn, and a :class:`~deputy_shiny.messages.ContentToolResult` sets the output
and the error flag itself. Anything else is
:func:`~deputy_shiny.tools.format_tool_output`'s text. MCP tools' image and audio
blocks take this path too.

An image's bytes are its type: only PNG, JPEG, GIF and WebP, read from the data (the
declared media type is ignored), at most :data:`MAX_IMAGE_BYTES` each and
:data:`MAX_TOOL_IMAGES` a call; a sound only WAV or MP3, at most
:data:`MAX_AUDIO_BYTES` each and :data:`MAX_TOOL_AUDIO` a call. An image given by link
is never fetched, sent or shown (a link a tool was made to return could point
anywhere); the model reads a note.

Examples:
    >>> from deputy_shiny.messages import ContentText
    >>> content = tool_content([ContentText(text="Plotted."), content_image_inline(PNG_1PX)])
    >>> content.output, [i.media_type for i in content.images]
    ('Plotted.\\n\\n[image 1: image/png, 70 bytes]', ['image/png'])
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._util.media import audio_type, decoded_size, image_type
from ..errors import ToolInvocationError
from ..messages import (
    ContentAudio,
    ContentImage,
    ContentText,
    ContentThinking,
    ContentToolResult,
)
from ._tool import format_tool_output

__all__ = [
    "MAX_AUDIO_BYTES",
    "MAX_IMAGE_BYTES",
    "MAX_TOOL_AUDIO",
    "MAX_TOOL_IMAGES",
    "ToolContent",
    "content_image_file",
    "content_image_inline",
    "image_type",
    "tool_content",
]

MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""The largest image (decoded bytes) a tool call may return to the model."""

MAX_TOOL_IMAGES = 8
"""The most images one tool call may return; later ones become a note."""

MAX_AUDIO_BYTES = 10 * 1024 * 1024
"""The largest sound (decoded bytes) a tool call may return to the model."""

MAX_TOOL_AUDIO = 4
"""The most sounds one tool call may return; later ones become a note."""

PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
"""A 1x1 PNG, for examples and tests."""


def content_image_inline(data: bytes) -> ContentImage:
    """An image as inline content (ellmer's ``ContentImageInline``), its type read from
    its bytes.

    Raises:
        ToolInvocationError: not a PNG, JPEG, GIF or WebP image, or over
            :data:`MAX_IMAGE_BYTES` (raised in a tool, the model reads why).

    Examples:
        >>> content_image_inline(PNG_1PX).media_type
        'image/png'
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ToolInvocationError(f"An image must be bytes, not {type(data).__name__}.")
    raw = bytes(data)
    kind = image_type(raw)
    if kind is None:
        raise ToolInvocationError("Not an image: only PNG, JPEG, GIF and WebP can be sent.")
    if len(raw) > MAX_IMAGE_BYTES:
        raise ToolInvocationError(
            f"The image is {len(raw):,} bytes; at most {MAX_IMAGE_BYTES:,} can be sent."
        )
    return ContentImage(data=base64.b64encode(raw).decode("ascii"), media_type=kind)


def content_image_file(path: str | os.PathLike[str]) -> ContentImage:
    """An image file as inline content (ellmer's ``content_image_file()``).

    Return it from a tool (or in a list with text) and the model sees the image.

    Raises:
        ToolInvocationError: the file cannot be read, is not a PNG, JPEG, GIF or WebP
            image, or is over :data:`MAX_IMAGE_BYTES`.

    Examples:
        >>> import tempfile
        >>> plot = Path(tempfile.mkdtemp()) / "plot.png"
        >>> _ = plot.write_bytes(PNG_1PX)
        >>> content_image_file(plot).media_type
        'image/png'
    """
    target = Path(path)
    try:
        if target.stat().st_size > MAX_IMAGE_BYTES:
            raise ToolInvocationError(
                f"{target.name} is over {MAX_IMAGE_BYTES:,} bytes; it cannot be sent."
            )
        data = target.read_bytes()
    except OSError as exc:
        raise ToolInvocationError(
            f"The image {target.name} cannot be read ({exc.strerror or type(exc).__name__})."
        ) from None
    return content_image_inline(data)


@dataclass(frozen=True)
class ToolContent:
    """What a tool's return value gives the model: text, images, sound, and whether it
    is an error (None: the tool did not say; only a returned ContentToolResult does)."""

    output: str
    images: tuple[ContentImage, ...] = ()
    is_error: bool | None = None
    audio: tuple[ContentAudio, ...] = ()


def checked_image(image: ContentImage) -> ContentImage | str:
    """The image as it may be sent or shown (its type read from its bytes), or the note
    the model reads instead; the one check for tools', MCP servers' and the card's images.

    Examples:
        >>> checked_image(ContentImage(url="https://example.com/x.png"))
        "an image link, not fetched or sent (return the image's bytes instead)"
    """
    data = image.data
    if data is None and image.url is not None and image.url.startswith("data:"):
        data = image.url.partition(",")[2]
    if data is None:
        return "an image link, not fetched or sent (return the image's bytes instead)"
    raw = _decoded(data, MAX_IMAGE_BYTES, "an image")
    if isinstance(raw, str):
        return raw
    kind = image_type(raw)
    if kind is None:
        return "data that is not a PNG, JPEG, GIF or WebP image, not sent"
    return ContentImage(data=base64.b64encode(raw).decode("ascii"), media_type=kind)


def checked_audio(clip: ContentAudio) -> ContentAudio | str:
    """The sound as it may be sent (WAV or MP3, by its bytes), or the note the model
    reads instead."""
    raw = _decoded(clip.data, MAX_AUDIO_BYTES, "a sound")
    if isinstance(raw, str):
        return raw
    kind = audio_type(raw)
    if kind is None:
        return "audio that is not WAV or MP3, not sent"
    return ContentAudio(data=base64.b64encode(raw).decode("ascii"), media_type=kind)


def _decoded(data: str, limit: int, what: str) -> bytes | str:
    """The bytes of base64 ``data`` of at most ``limit``, or the note why not (the size is
    judged from the text's length first: an oversized blob is never decoded)."""
    size = decoded_size(data)
    if size > limit:
        return f"{what} of {size:,} bytes, over the {limit:,}-byte limit, not sent"
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"{what} whose data is not base64, not sent"


def _is_content(value: Any) -> bool:
    return isinstance(
        value, ContentText | ContentImage | ContentAudio | ContentToolResult | ContentThinking
    )


def tool_content(value: Any) -> ToolContent:
    """A tool's return value as :class:`ToolContent`; never raises.

    Examples:
        >>> from deputy_shiny.messages import ContentText
        >>> tool_content(ContentText(text="hi")).output
        'hi'
        >>> tool_content({"a": 1}).output
        '{"a":1}'
    """
    if isinstance(value, ContentToolResult):
        inner = tool_content([ContentText(text=value.output), *value.images, *value.audio])
        return ToolContent(inner.output, inner.images, value.is_error, inner.audio)
    items: Sequence[Any]
    if _is_content(value):
        items = [value]
    elif isinstance(value, list | tuple) and value and any(_is_content(v) for v in value):
        items = value
    else:
        return ToolContent(format_tool_output(value))
    texts: list[str] = []
    images: list[ContentImage] = []
    audio: list[ContentAudio] = []
    for item in items:
        if isinstance(item, ContentImage):
            texts.append(_kept(checked_image(item), images, MAX_TOOL_IMAGES, "image"))
        elif isinstance(item, ContentAudio):
            texts.append(_kept(checked_audio(item), audio, MAX_TOOL_AUDIO, "audio"))
        elif isinstance(item, ContentText):
            texts.append(item.text)
        elif isinstance(item, ContentThinking):
            texts.append(item.thinking)
        elif isinstance(item, ContentToolResult):
            texts.append(tool_content(item).output)
        else:
            texts.append(format_tool_output(item))
    return ToolContent("\n\n".join(t for t in texts if t), tuple(images), None, tuple(audio))


def _kept(checked: Any, kept: list[Any], most: int, kind: str) -> str:
    """Keep a checked image or sound (up to ``most`` a call); the line the output gets."""
    if isinstance(checked, str):
        return f"[{checked}]"
    if len(kept) >= most:
        plural = "images" if kind == "image" else "sounds"
        return f"[{kind} not sent: at most {most} {plural} a call]"
    kept.append(checked)
    return f"[{kind} {len(kept)}: {checked.media_type}, {decoded_size(checked.data):,} bytes]"
