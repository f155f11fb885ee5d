"""MCP tools as deputy_shiny tools, and MCP results as the text a model reads.

A server's tool becomes a :class:`~deputy_shiny.tools.Tool` whose annotations are
exactly the server's (a missing hint stays missing; the permission engine then assumes
the worst) and whose source records the server, the remote name and the connection.
The source never carries a built-in ``kind``: a server tool called ``read_file`` is
judged by its annotations, with no file authority. A tool whose name or input schema
is malformed is rejected (:class:`RejectedTool`), never made an unannotated executable.

A result's image and audio blocks (mcp-repl's plots among them) become
:class:`~deputy_shiny.messages.ContentImage` / :class:`~deputy_shiny.messages.ContentAudio`
beside its text, so they take the path a local tool's returned images take (checked by
their bytes, sent to a model that takes them, shown in the chat's tool card); a block
whose declared MIME type is not what its bytes are is refused with a note, as is
anything that is not a PNG, JPEG, GIF or WebP image or WAV or MP3 sound.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .._util.media import audio_type, image_type
from ..errors import InvalidToolError, ToolInvocationError
from ..messages import ContentAudio, ContentImage, ContentText
from ..tools import Tool, ToolAnnotations, ToolSource
from ..tools._tool import TOOL_NAME_PATTERN

__all__ = [
    "RejectedTool",
    "ToolBinding",
    "content_text",
    "convert_tool",
    "result_content",
    "result_text",
]

ResultContent = str | list[ContentText | ContentImage | ContentAudio]
"""What an MCP tool gives the engine: its text, or its text, images and sound in order."""

# Spellings of the media types the bytes can prove, as servers write them.
_MEDIA_ALIASES = {
    "image/jpg": "image/jpeg",
    "audio/x-wav": "audio/wav",
    "audio/wave": "audio/wav",
    "audio/vnd.wave": "audio/wav",
    "audio/mp3": "audio/mpeg",
}

CallRemote = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""Calls a tool on the server by its remote name; returns the SDK's CallToolResult."""


@dataclass(frozen=True)
class ToolBinding:
    """Where converted tools call through: the server, the connection and its owner."""

    server: str
    call: CallRemote
    connection_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None


@dataclass(frozen=True)
class RejectedTool:
    """A server tool that was not converted, and why."""

    server: str
    name: str
    reason: str

    def __str__(self) -> str:
        return f"MCP server {self.server!r}: tool {self.name!r} rejected: {self.reason}"


def convert_tool(remote: Any, binding: ToolBinding) -> Tool | RejectedTool:
    """Turn one ``mcp_types.Tool`` into a Tool calling through ``binding`` (or a rejection)."""
    name = getattr(remote, "name", None)
    label = name if isinstance(name, str) else repr(name)
    if not isinstance(name, str) or not TOOL_NAME_PATTERN.match(name):
        return RejectedTool(
            binding.server,
            label,
            "the name must be 1-64 letters, digits, '_' or '-', starting with a letter or '_'",
        )
    problem = schema_problem(getattr(remote, "input_schema", None))
    if problem is not None:
        return RejectedTool(binding.server, name, problem)
    try:
        return Tool(
            _caller(binding.call, name),
            name=name,
            description=_description(remote, binding.server),
            arguments=remote.input_schema,
            annotations=_annotations(getattr(remote, "annotations", None)),
            source=ToolSource(
                type="mcp",
                server=binding.server,
                remote_name=name,
                connection_id=binding.connection_id,
                agent_id=binding.agent_id,
                session_id=binding.session_id,
            ),
        )
    except InvalidToolError as exc:
        return RejectedTool(binding.server, name, str(exc))
    except ValidationError as exc:
        return RejectedTool(binding.server, name, f"malformed annotations ({exc.error_count()})")


def schema_problem(schema: Any) -> str | None:
    """What is wrong with a server's input schema for an argument object (None: nothing).

    Examples:
        >>> schema_problem({"type": "object", "properties": {"x": {"type": "string"}}})
        >>> schema_problem({"type": "string"})
        "the input schema must have type 'object', not 'string'"
    """
    if not isinstance(schema, Mapping):
        return f"the input schema must be a JSON object, not {type(schema).__name__}"
    if schema.get("type") != "object":
        return f"the input schema must have type 'object', not {schema.get('type')!r}"
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        return "the input schema's 'properties' must be an object"
    for key, value in properties.items():
        if not isinstance(value, Mapping | bool):
            return f"the input schema's property {key!r} must be a schema object"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return "the input schema's 'required' must be a list of property names"
    return None


def _caller(call: CallRemote, remote_name: str) -> Callable[..., Awaitable[ResultContent]]:
    async def call_mcp_tool(**arguments: Any) -> ResultContent:
        return result_content(await call(remote_name, arguments))

    return call_mcp_tool


def _description(remote: Any, server: str) -> str:
    for text in (getattr(remote, "description", None), getattr(remote, "title", None)):
        if isinstance(text, str) and text.strip():
            return text
    return f"The {remote.name} tool of MCP server {server!r} (the server gives no description)."


def _annotations(remote: Any) -> ToolAnnotations:
    if remote is None:
        return ToolAnnotations()
    return ToolAnnotations(
        read_only_hint=remote.read_only_hint,
        destructive_hint=remote.destructive_hint,
        open_world_hint=remote.open_world_hint,
        idempotent_hint=remote.idempotent_hint,
        title=remote.title,
    )


def result_text(result: Any) -> str:
    """The text of a CallToolResult; an ``isError`` result raises ToolInvocationError."""
    parts = [content_text(part) for part in result.content or []]
    text = "\n".join(p for p in parts if p)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
    if result.is_error:
        raise ToolInvocationError(text or "The MCP tool reported an error without a message.")
    return text


def result_content(result: Any) -> ResultContent:
    """A CallToolResult as the engine takes it: its text (:func:`result_text`) when it
    holds no image or audio, else its blocks in order as content objects, each image
    and sound checked against its declared type (a mismatch becomes a note).
    An ``isError`` result raises ToolInvocationError with its text.

    Examples:
        >>> import mcp_types as types
        >>> svg = "PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+"  # <svg onload=alert(1)>
        >>> (note,) = result_content(types.CallToolResult(content=[
        ...     types.ImageContent(type="image", data=svg, mime_type="image/png")]))
        >>> note.text
        '[image refused: declared image/png, but the data is not a PNG, JPEG, GIF or WebP image]'
    """
    parts = list(result.content or [])
    if result.is_error or not any(getattr(p, "type", None) in ("image", "audio") for p in parts):
        return result_text(result)
    items: list[ContentText | ContentImage | ContentAudio] = []
    for part in parts:
        if part.type in ("image", "audio"):
            items.append(_media(part))
        elif text := content_text(part):
            items.append(ContentText(text=text))
    return items


def _media(part: Any) -> ContentText | ContentImage | ContentAudio:
    """An image or audio block as content, or the note why it is refused."""
    declared = str(part.mime_type or "").split(";", 1)[0].strip().lower()
    declared = _MEDIA_ALIASES.get(declared, declared)
    data = str(part.data or "")
    try:  # 12 bytes hold every signature checked (WebP's and WAV's end at byte 12)
        head = base64.b64decode(data[:16], validate=True)
    except (binascii.Error, ValueError):
        head = b""
    if part.type == "image":
        actual, what = image_type(head), "a PNG, JPEG, GIF or WebP image"
    else:
        actual, what = audio_type(head), "WAV or MP3 audio"
    if actual != declared:
        shown = declared or "no type"
        found = actual or f"not {what}"
        return ContentText(text=f"[{part.type} refused: declared {shown}, but the data is {found}]")
    if part.type == "image":
        return ContentImage(data=data, media_type=actual)
    return ContentAudio(data=data, media_type=actual)


def content_text(part: Any) -> str:
    """One content block as text: text as is, binary data as a short placeholder."""
    kind = getattr(part, "type", None)
    if kind == "text":
        return str(part.text)
    if kind in ("image", "audio"):
        return f"[{kind}: {part.mime_type}, {_decoded_size(part.data)} bytes, not shown]"
    if kind == "resource_link":
        return f"[resource: {part.uri}]"
    if kind == "resource":
        return resource_text(part.resource)
    return f"[{kind or type(part).__name__} content, not shown]"


def resource_text(contents: Any) -> str:
    """Resource contents as text: text resources in full, blobs as a placeholder."""
    text = getattr(contents, "text", None)
    if isinstance(text, str):
        return text
    mime = getattr(contents, "mime_type", None) or "binary"
    size = _decoded_size(getattr(contents, "blob", ""))
    return f"[resource {contents.uri}: {mime}, {size} bytes, not shown]"


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)
