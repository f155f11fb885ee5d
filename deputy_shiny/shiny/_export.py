"""The conversation as a file to download: Markdown to read, JSON to process.

Both are built from the agent's turns (the one record of the conversation), not from the
page: the user's messages, the assistant's text, and each tool call with its result,
as text. The system prompt is the app's, not the user's, and is left out.

Nothing in either file is markup from the model. The Markdown goes through the chat's
own inert rendering (:class:`~deputy_shiny.shiny._image_guard.ImageGuard`: raw HTML
never forms an element, images load only from the allowed origins, code stays
byte-exact), tool names are escaped, and tool arguments and output sit in code fences
longer than any backtick run inside them, so they cannot close their fence. The JSON is
the turns as ``Turn.model_dump`` writes them (``Turn.model_validate`` reads them back),
with ``<``, ``>`` and ``&`` written as ``\\u003c``, ``\\u003e`` and ``\\u0026``: the file
holds no HTML even to a viewer that sniffs it, and decodes to exactly the same text.

Examples:
    >>> from deputy_shiny.messages import ContentText, Turn
    >>> turns = [Turn(role="user", contents=[ContentText(text="Hi <b>there</b>")])]
    >>> "<b>" in conversation_markdown(turns), "<b>" in conversation_json(turns)
    (False, False)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from ..messages import (
    Content,
    ContentImage,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    Turn,
)
from ._escape import markdown_text
from ._image_guard import ImageGuard

__all__ = ["JSON_FORMAT", "conversation_json", "conversation_markdown"]

JSON_FORMAT = "deputy_shiny.conversation/1"
"""The ``format`` field of the JSON download."""

_BACKTICKS = re.compile(r"`+")
_SENTINEL = "deputy-shiny-end-of-part"
_HEADINGS = {"user": "## User", "assistant": "## Assistant"}


def conversation_markdown(
    turns: Sequence[Turn],
    *,
    allowed_image_origins: Iterable[str] = (),
    title: str = "Conversation",
) -> str:
    """``turns`` as a Markdown document: a heading per message, tool calls as code.

    Examples:
        >>> from deputy_shiny.messages import ContentText, ContentToolRequest, Turn
        >>> turns = [Turn(role="user", contents=[ContentText(text="list files")]),
        ...          Turn(role="assistant", contents=[
        ...              ContentToolRequest(id="c1", name="list_files", arguments={})])]
        >>> print(conversation_markdown(turns))  # doctest: +NORMALIZE_WHITESPACE
        # Conversation
        <BLANKLINE>
        ## User
        <BLANKLINE>
        list files
        <BLANKLINE>
        ## Assistant
        <BLANKLINE>
        **Tool call** list\\_files
        <BLANKLINE>
        ```json
        {}
        ```
        <BLANKLINE>
    """
    origins = tuple(allowed_image_origins)
    parts = [f"# {markdown_text(title)}"]
    previous: str | None = None
    for turn in turns:
        if turn.role == "system":
            continue
        for content in turn.contents:
            # Tool results come back in a user turn, but they continue the assistant's
            # message (as in the chat).
            role = "assistant" if isinstance(content, ContentToolResult) else turn.role
            shown = _content_markdown(content, origins)
            if not shown:
                continue
            if role != previous:
                parts.append(_HEADINGS[role])
                previous = role
            parts.extend(shown)
    return "\n\n".join(parts) + "\n"


def _content_markdown(content: Content, origins: tuple[str, ...]) -> list[str]:
    if isinstance(content, ContentText):
        if not content.text.strip():
            return []
        guard = ImageGuard(origins)  # the chat's own rendering of model text
        return [_closed(guard.feed(content.text) + guard.flush())]
    if isinstance(content, ContentToolRequest):
        call = f"**Tool call** {markdown_text(content.name)}"
        return [call, _fenced(_arguments(content), "json")]
    if isinstance(content, ContentToolResult):
        label = "**Tool error**" if content.is_error else "**Tool result**"
        shown = [f"{label} {markdown_text(content.name)}", _fenced(content.output, "text")]
        if content.approved_arguments is not None:
            # The call above shows the model's arguments; a person changed them.
            edited = json.dumps(content.approved_arguments, indent=2, ensure_ascii=False)
            note = "**Edited by a person before approval**; the tool ran with:"
            return [note, _fenced(edited, "json"), *shown]
        return shown
    if isinstance(content, ContentImage):
        # Never an image to load: a downloaded file must not fetch anything.
        where = "inline data" if content.url is None else content.url
        return [markdown_text(f"[image: {content.media_type}, {where}]")]
    return []  # thinking: the chat does not show it either (the JSON keeps it)


def _closed(markdown: str) -> str:
    """``markdown``, ended so that what follows it in the document is read on its own.

    Model text may leave a code fence open: in a chat message it ends with the message,
    but here it would run on into the next part, and a later line of backticks (in a
    tool's output) would close it there and leave the rest of that output to be read as
    markdown. So each message's text is closed: a CommonMark parser checks that a line
    after it starts a paragraph of its own; if not, the open fence gets its closing
    line; text that still runs on is shown whole as code.
    """
    from markdown_it import MarkdownIt  # imported on the first download only

    parser = MarkdownIt("commonmark")  # raw HTML on, as in most viewers
    for _ in range(3):
        tokens = parser.parse(f"{markdown}\n\n{_SENTINEL}")
        last = tokens[-2] if len(tokens) >= 3 else None
        if last is not None and last.content == _SENTINEL and tokens[-3].level == 0:
            return markdown
        fences = [t for t in parser.parse(markdown) if t.type == "fence"]
        if not fences:
            break
        markdown = f"{markdown}\n{fences[-1].markup}"
    return _fenced(markdown, "text")


def _arguments(request: ContentToolRequest) -> str:
    if request.raw_arguments is not None:
        return request.raw_arguments
    return json.dumps(request.arguments, indent=2, ensure_ascii=False)


def _fenced(text: str, info: str) -> str:
    """``text`` in a code fence it cannot close: longer than any backtick run in it."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def conversation_json(turns: Sequence[Turn], *, exported_at: datetime | None = None) -> str:
    """``turns`` (less the system prompt) as a JSON document, ``format`` :data:`JSON_FORMAT`.

    Examples:
        >>> from deputy_shiny.messages import ContentText, Turn
        >>> text = conversation_json([Turn(role="user", contents=[ContentText(text="a<b")])])
        >>> document = json.loads(text)
        >>> document["format"], document["turns"][0]["contents"][0]["text"]
        ('deputy_shiny.conversation/1', 'a<b')
    """
    when = exported_at or datetime.now(UTC)
    document = {
        "format": JSON_FORMAT,
        "exported_at": when.isoformat(timespec="seconds"),
        "turns": [turn.model_dump(mode="json") for turn in turns if turn.role != "system"],
    }
    text = json.dumps(document, indent=2, ensure_ascii=False)
    # JSON allows these escapes anywhere in a string; outside strings they never occur.
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
