"""The conversation: turns of typed content, and their one conversion to OpenAI format.

Turns are frozen pydantic models, so a conversation round-trips through JSON
(``Turn.model_validate_json(turn.model_dump_json())``) for saved sessions. litellm
speaks OpenAI-format chat messages; :func:`to_openai_messages` and
:func:`from_openai_messages` are the only places that know that format.

Tool results belong to a *user* turn (the turn that answers the assistant's tool
requests), as in ellmer; they become ``role="tool"`` messages on the wire.

Examples:
    >>> from deputy_shiny.messages import Turn, ContentText, to_openai_messages
    >>> turns = [Turn(role="user", contents=[ContentText(text="Hi")])]
    >>> to_openai_messages("Be brief.", turns)
    [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'Hi'}]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ._util.json import loads_bounded
from ._util.media import AUDIO_FORMATS
from .errors import ConfigurationError
from .usage import TurnUsage


class _Content(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ContentText(_Content):
    """Plain text (markdown) from the user or the model.

    Examples:
        >>> ContentText(text="hello").text
        'hello'
    """

    type: Literal["text"] = "text"
    text: str


class ContentThinking(_Content):
    """Reasoning the model shared; provider-specific, dropped when switching provider.

    Examples:
        >>> ContentThinking(thinking="Let me check the file first.").type
        'thinking'
    """

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class ContentToolRequest(_Content):
    """The model asks to call a tool.

    Attributes:
        id: The provider's call id (pairs the request with its result).
        name: The tool name as the model wrote it.
        arguments: Parsed arguments; ``{}`` when they were not valid JSON.
        raw_arguments: The argument text exactly as the model sent it, kept when it
            was not a JSON object so the conversation replays faithfully.

    Examples:
        >>> ContentToolRequest(id="call_1", name="read_file", arguments={"path": "a.txt"}).name
        'read_file'
    """

    type: Literal["tool_request"] = "tool_request"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None

    def arguments_json(self) -> str:
        """The arguments as the JSON text to send back to the provider."""
        if self.raw_arguments is not None:
            return self.raw_arguments
        return json.dumps(self.arguments, ensure_ascii=False)


class ContentToolResult(_Content):
    """The result of one tool call, as the model sees it.

    ``images`` are the inline images the tool returned (checked: PNG, JPEG, GIF or
    WebP data, never a link); they reach a model that takes images with the result, and
    ``output`` names each one for a model that does not. ``audio`` is the same for the
    sound a tool returned (checked: WAV or MP3 data), for models that take audio input.

    Examples:
        >>> ContentToolResult(call_id="call_1", name="read_file", output="hi").is_error
        False
    """

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    output: str
    is_error: bool = False
    images: list[ContentImage] = Field(default_factory=list)
    audio: list[ContentAudio] = Field(default_factory=list)
    approved_arguments: dict[str, Any] | None = None
    """The arguments the tool ran with when a person edited the model's before
    approving (the model's own stay in the matching request); None when it ran with the
    model's. An audit trail: a transcript shows both."""


class ContentImage(_Content):
    """An image, by URL or inline base64 data.

    Examples:
        >>> ContentImage(url="https://example.com/a.png").to_url()
        'https://example.com/a.png'
    """

    type: Literal["image"] = "image"
    url: str | None = None
    data: str | None = None
    media_type: str = "image/png"

    def to_url(self) -> str:
        """A URL for the image: the given one, or a ``data:`` URL of the inline bytes."""
        if self.url is not None:
            return self.url
        if self.data is None:
            raise ConfigurationError("ContentImage needs url or data")
        return f"data:{self.media_type};base64,{self.data}"


class ContentAudio(_Content):
    """A sound as inline base64 data (WAV or MP3), as a tool or an MCP server returned it.

    It reaches a model that takes audio input with the tool's result; never a link.

    Examples:
        >>> ContentAudio(data="UklGRg==", media_type="audio/wav").type
        'audio'
    """

    type: Literal["audio"] = "audio"
    data: str
    media_type: str = "audio/wav"


Content = Annotated[
    ContentText | ContentThinking | ContentToolRequest | ContentToolResult | ContentImage,
    Field(discriminator="type"),
]
# Built on its first use, not at import (as every model here: defer_build).
_content_adapter: TypeAdapter[Content] = TypeAdapter(Content, config=ConfigDict(defer_build=True))


class Turn(BaseModel):
    """One message of the conversation: a role and its contents.

    Examples:
        >>> turn = Turn(role="assistant", contents=[ContentText(text="Done.")])
        >>> turn.text
        'Done.'
        >>> Turn.model_validate_json(turn.model_dump_json()) == turn
        True
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    role: Literal["user", "assistant", "system"]
    contents: list[Content] = Field(default_factory=list)
    usage: TurnUsage | None = None

    @property
    def text(self) -> str:
        """All text contents joined (tool requests, results and thinking left out)."""
        return "".join(c.text for c in self.contents if isinstance(c, ContentText))

    @property
    def tool_requests(self) -> list[ContentToolRequest]:
        """The tool requests in this turn, in order."""
        return [c for c in self.contents if isinstance(c, ContentToolRequest)]

    @property
    def tool_results(self) -> list[ContentToolResult]:
        """The tool results in this turn, in order."""
        return [c for c in self.contents if isinstance(c, ContentToolResult)]


UserContent = str | ContentText | ContentImage


def user_turn(*contents: UserContent) -> Turn:
    """Build a user turn from strings and content objects.

    Examples:
        >>> user_turn("Describe this", ContentImage(url="https://x/y.png")).role
        'user'
    """
    if not contents:
        raise ConfigurationError("A message needs at least one piece of content")
    parts: list[Content] = []
    for item in contents:
        if isinstance(item, str):
            parts.append(ContentText(text=item))
        elif isinstance(item, ContentText | ContentImage):
            parts.append(item)
        else:
            raise ConfigurationError(
                f"Cannot send a {type(item).__name__} as a message; use str, ContentText "
                "or ContentImage"
            )
    return Turn(role="user", contents=parts)


def to_openai_messages(
    system_prompt: str | None, turns: Iterable[Turn], *, images: bool = True, audio: bool = True
) -> list[dict[str, Any]]:
    """Convert a system prompt and turns to OpenAI-format chat messages for litellm.

    Thinking content is sent only where it carries a provider signature (Anthropic's
    extended thinking needs it back with tool use); otherwise it is not replayed. The
    images and sound tool calls returned follow their results in a user message (a tool
    message holds text only with most providers); with ``images=False`` (a model that
    takes no images) or ``audio=False`` (no audio input) that message says what was
    left out instead.
    """
    messages: list[dict[str, Any]] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    for turn in turns:
        if turn.role == "system":
            messages.append({"role": "system", "content": turn.text})
        elif turn.role == "user":
            messages.extend(_user_messages(turn, images, audio))
        else:
            messages.append(_assistant_message(turn))
    return messages


def _user_messages(turn: Turn, images: bool = True, audio: bool = True) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": r.call_id, "content": r.output} for r in turn.tool_results
    ]
    others = [c for c in turn.contents if isinstance(c, ContentText | ContentImage)]
    returned = [r for r in turn.tool_results if r.images or r.audio]
    if returned:
        out.append({"role": "user", "content": _returned_media(returned, images, audio)})
    if not others:
        return out
    if all(isinstance(c, ContentText) for c in others):
        out.append({"role": "user", "content": "".join(c.text for c in others)})  # type: ignore[union-attr]
    else:
        parts: list[dict[str, Any]] = []
        for c in others:
            if isinstance(c, ContentText):
                parts.append({"type": "text", "text": c.text})
            else:
                parts.append({"type": "image_url", "image_url": {"url": c.to_url()}})
        out.append({"role": "user", "content": parts})
    return out


def _returned_media(
    results: list[ContentToolResult], images: bool, audio: bool
) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for result in results:
        call = f"the {result.name} call ({result.call_id})"
        kinds: list[str] = []
        sent: list[dict[str, Any]] = []
        if result.images and images:
            kinds.append("image(s)")
            sent.extend(
                {"type": "image_url", "image_url": {"url": i.to_url()}} for i in result.images
            )
        elif result.images:
            parts.append(_left_out(result, f"{len(result.images)} image(s)", "images"))
        if result.audio and audio:
            kinds.append("audio")
            sent.extend(_input_audio(a) for a in result.audio)
        elif result.audio:
            parts.append(_left_out(result, f"{len(result.audio)} audio clip(s)", "audio"))
        if sent:
            parts.append({"type": "text", "text": f"The {' and '.join(kinds)} {call} returned:"})
            parts.extend(sent)
    return parts


def _left_out(result: ContentToolResult, what: str, kind: str) -> dict[str, Any]:
    text = (
        f"[The {result.name} call ({result.call_id}) returned {what}; this model takes no "
        f"{kind}, so they were not sent.]"
    )
    return {"type": "text", "text": text}


def _input_audio(clip: ContentAudio) -> dict[str, Any]:
    # OpenAI's input_audio part (litellm maps it for other providers) names a format.
    audio_format = AUDIO_FORMATS.get(clip.media_type, "wav")
    return {"type": "input_audio", "input_audio": {"data": clip.data, "format": audio_format}}


def _assistant_message(turn: Turn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    requests = turn.tool_requests
    if requests:
        message["tool_calls"] = [
            {
                "id": r.id,
                "type": "function",
                "function": {"name": r.name, "arguments": r.arguments_json()},
            }
            for r in requests
        ]
    signed = [c for c in turn.contents if isinstance(c, ContentThinking) and c.signature]
    if signed:
        message["thinking_blocks"] = [
            {"type": "thinking", "thinking": c.thinking, "signature": c.signature} for c in signed
        ]
    return message


def from_openai_messages(messages: Sequence[dict[str, Any]]) -> tuple[str | None, list[Turn]]:
    """Convert OpenAI-format messages back to a system prompt and turns.

    Consecutive ``tool`` messages (and a user message right after them) form one user
    turn, the inverse of :func:`to_openai_messages`.
    """
    system_prompt: str | None = None
    turns: list[Turn] = []
    names: dict[str, str] = {}
    pending_user: list[Content] = []

    def flush() -> None:
        if pending_user:
            turns.append(Turn(role="user", contents=list(pending_user)))
            pending_user.clear()

    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "system":
            if index == 0 and system_prompt is None:
                system_prompt = _text_of(message.get("content"))
            else:
                flush()
                turns.append(
                    Turn(role="system", contents=[ContentText(text=_text_of(message["content"]))])
                )
        elif role == "tool":
            call_id = str(message.get("tool_call_id", ""))
            pending_user.append(
                ContentToolResult(
                    call_id=call_id,
                    name=names.get(call_id, str(message.get("name", ""))),
                    output=_text_of(message.get("content")),
                )
            )
        elif role == "user":
            pending_user.extend(_user_contents(message.get("content")))
            flush()
        elif role == "assistant":
            flush()
            turn = _assistant_turn(message)
            names.update({r.id: r.name for r in turn.tool_requests})
            turns.append(turn)
        else:
            raise ConfigurationError(f"Unknown message role {role!r} at index {index}")
    flush()
    return system_prompt, turns


def _assistant_turn(message: dict[str, Any]) -> Turn:
    contents: list[Content] = []
    for block in message.get("thinking_blocks") or []:
        contents.append(
            ContentThinking(thinking=block.get("thinking", ""), signature=block.get("signature"))
        )
    if message.get("reasoning_content") and not contents:
        contents.append(ContentThinking(thinking=message["reasoning_content"]))
    text = _text_of(message.get("content"))
    if text:
        contents.append(ContentText(text=text))
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        contents.append(tool_request_from_json(call["id"], function["name"], function["arguments"]))
    return Turn(role="assistant", contents=contents)


def tool_request_from_json(call_id: str, name: str, arguments: str | None) -> ContentToolRequest:
    """Build a tool request from the model's argument text, keeping malformed text verbatim."""
    raw = arguments or ""
    try:
        parsed = loads_bounded(raw) if raw.strip() else {}
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return ContentToolRequest(id=call_id, name=name, arguments=parsed)
    return ContentToolRequest(id=call_id, name=name, arguments={}, raw_arguments=raw)


def _user_contents(content: Any) -> list[Content]:
    if isinstance(content, str):
        return [ContentText(text=content)]
    out: list[Content] = []
    for part in content or []:
        if part.get("type") == "text":
            out.append(ContentText(text=part["text"]))
        elif part.get("type") == "image_url":
            url = (
                part["image_url"]["url"]
                if isinstance(part["image_url"], dict)
                else part["image_url"]
            )
            out.append(_image_from_url(url))
    return out


def _image_from_url(url: str) -> ContentImage:
    if url.startswith("data:") and ";base64," in url:
        header, data = url.split(",", 1)
        return ContentImage(data=data, media_type=header[5:].split(";", 1)[0])
    return ContentImage(url=url)


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def content_from_dict(data: dict[str, Any]) -> Content:
    """Validate one content object from its JSON dict (dispatching on ``type``)."""
    return _content_adapter.validate_python(data)


def drop_thinking(turns: Iterable[Turn]) -> list[Turn]:
    """The turns without thinking content (each provider accepts only its own)."""
    out = []
    for turn in turns:
        kept = [c for c in turn.contents if not isinstance(c, ContentThinking)]
        out.append(
            turn if len(kept) == len(turn.contents) else turn.model_copy(update={"contents": kept})
        )
    return out
