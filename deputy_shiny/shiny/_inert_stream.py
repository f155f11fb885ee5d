"""``Agent.stream_async`` into a plain shinychat ``Chat``: model text made inert there too.

The kit guards model text in :func:`~deputy_shiny.shiny.render_events`. An app that
feeds its own ``Chat`` from ``agent.stream_async`` gets the same guard two ways:

* :func:`inert_stream` wraps either stream (``stream="text"`` or ``"content"``) and
  runs one :class:`~deputy_shiny.shiny.ImageGuard` across its chunks, as the kit does:
  no raw HTML forms, images load only from ``allowed_image_origins``, code stays
  byte-exact, and a tool card starts a new markdown document (the guard ends there, as
  the browser does). This is the path to use;
* a stream handed to shinychat as it is still renders inert: importing
  ``deputy_shiny.shiny`` registers renderers with shinychat for the chunks the runtime
  yields (:class:`~deputy_shiny.agent._streams.TextChunk`, ``ContentText``, tool
  requests and results). shinychat renders one chunk at a time and the renderer cannot
  see the chunks around it, while what a chunk means depends on them (a fence opened
  earlier, an ``![`` split from its ``(url)``). So each chunk is made inert whatever
  comes before or after it (:func:`inert_fragment`): safe, but code shows a zero-width
  space after each ``<``, and no image loads. A whole ``ContentText`` given to
  ``chat.append_message`` is guarded as one message, code byte-exact.

Tool requests and results become the kit's cards (:mod:`._render`): the title is escaped
and the output is code.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Iterable

from shinychat import message_content, message_content_chunk
from shinychat.types import ChatMessage

from ..agent._streams import TextChunk
from ..messages import ContentText, ContentThinking, ContentToolRequest, ContentToolResult
from ._image_guard import ImageGuard, rewrite_images
from ._render import tool_request_block, tool_result_block

__all__ = ["InertStream", "content_message", "inert_fragment", "inert_stream"]

# An "!" that an image could start from (before "[" here, or before the next chunk's
# "["), with the backslashes before it: an odd count escapes it already.
_BANG = re.compile(r"(\\*)!(?=\[|\Z)")
_TRAILING_BACKSLASHES = re.compile(r"\\+\Z")


def inert_fragment(text: str) -> str:
    """One chunk of model text made inert whatever the chunks before and after it hold.

    Every ``<`` gets a zero-width space after it (even a last one: the next chunk's
    letters cannot make it a tag), markdown images are blocked (a remote one shows as
    ``[image blocked: ...]``), an ``!`` that could start an image is escaped (the next
    chunk may bring its ``[``), and an odd run of backslashes at the end is made even
    (it would escape the next chunk's escape).

    Examples:
        >>> inert_fragment("<b>hi</b> ![x](https://evil.example/?q=1) and !")
        '<\\u200bb>hi<\\u200b/b> *[image blocked: x (`https://evil.example`)]* and \\\\!'
        >>> inert_fragment("a <") + inert_fragment("img src=x>")
        'a <\\u200bimg src=x>'
    """
    text = rewrite_images(text).replace("<", "<\u200b")
    text = _BANG.sub(lambda m: m[0] if len(m[1]) % 2 else m[1] + "\\!", text)
    trailing = _TRAILING_BACKSLASHES.search(text)
    return text + "\\" if trailing is not None and len(trailing[0]) % 2 else text


def _whole_text(text: str) -> str:
    guard = ImageGuard()
    return guard.feed(text) + guard.end()


def content_message(content: ContentText | ContentToolRequest | ContentToolResult) -> ChatMessage:
    """What a shinychat ``Chat`` shows for a whole content object (``append_message``):
    text guarded as one message, tool requests and results as the kit's cards.

    Examples:
        >>> content_message(ContentText(text="Hi <b>")).content
        'Hi <\\u200bb>'
        >>> result = ContentToolResult(call_id="c1", name="f", output="<b>")
        >>> content_message(result).blocks[0]["value"]
        '<b>'
    """
    if isinstance(content, ContentText):
        return ChatMessage(content=_whole_text(content.text))
    return _card(content)


def _content_chunk(content: ContentText | ContentToolRequest | ContentToolResult) -> ChatMessage:
    """A ``stream="content"`` chunk handed to shinychat unwrapped (see the module)."""
    if isinstance(content, ContentText):
        return ChatMessage(content=inert_fragment(content.text))
    return _card(content)


def _card(content: ContentToolRequest | ContentToolResult) -> ChatMessage:
    if isinstance(content, ContentToolRequest):
        return tool_request_block(content.id, content.name, content.arguments)
    return tool_result_block(
        content.call_id,
        content.name,
        content.output,
        is_error=content.is_error,
        images=content.images,
    )


StreamChunk = str | ContentText | ContentThinking | ContentToolRequest | ContentToolResult
"""What :func:`inert_stream` takes: the chunks of either ``stream_async`` mode (thinking
is not shown, as in the kit's chat)."""


class InertStream:
    """An ``Agent.stream_async`` stream as inert shinychat chunks (see :func:`inert_stream`).

    Closing it (``aclose()``) closes the stream it wraps, which ends the run; dropped, it
    drops that stream, which ends the run too.
    """

    __slots__ = ("_chunks", "_done", "_error", "_guard", "_ready")

    def __init__(
        self, chunks: AsyncIterable[StreamChunk], allowed_image_origins: Iterable[str] = ()
    ) -> None:
        self._chunks: AsyncIterator[StreamChunk] = aiter(chunks)
        self._guard = ImageGuard(allowed_image_origins)
        self._ready: deque[str | ChatMessage] = deque()
        self._error: Exception | None = None
        self._done = False

    def __aiter__(self) -> InertStream:
        return self

    async def __anext__(self) -> str | ChatMessage:
        while not self._ready:
            if self._done:
                error, self._error = self._error, None
                if error is not None:
                    raise error
                raise StopAsyncIteration
            try:
                chunk = await anext(self._chunks)
            except StopAsyncIteration:
                self._end()
            except Exception as exc:  # the text so far still shows, then the error
                self._end()
                self._error = exc
            else:
                self._take(chunk)
        return self._ready.popleft()

    def _take(self, chunk: StreamChunk) -> None:
        if isinstance(chunk, ContentToolRequest | ContentToolResult):
            # A card: the browser renders the text after it as a new markdown document.
            self._release(self._guard.end())
            self._ready.append(_card(chunk))
            return
        if isinstance(chunk, ContentThinking):
            return  # the model's reasoning: the chat does not show it (as the kit's)
        if isinstance(chunk, ContentText):
            chunk = chunk.text
        if not isinstance(chunk, str):
            raise TypeError(
                "inert_stream takes the chunks of Agent.stream_async (str or content "
                f"objects), not {type(chunk).__name__}"
            )
        self._release(self._guard.feed(chunk))

    def _release(self, text: str) -> None:
        if text:
            self._ready.append(text)

    def _end(self) -> None:
        self._done = True
        self._release(self._guard.end())

    async def aclose(self) -> None:
        """End the stream now: the run it wraps ends (the agent is free on return)."""
        self._done = True
        self._ready.clear()
        close = getattr(self._chunks, "aclose", None)
        if close is not None:
            await close()


def inert_stream(
    chunks: AsyncIterable[StreamChunk], *, allowed_image_origins: Iterable[str] = ()
) -> InertStream:
    """Make a ``stream_async`` stream inert for a shinychat ``Chat``, as the kit does.

    Takes either mode's chunks (``stream="text"`` or ``"content"``) and yields ``str``
    markdown and tool cards (shinychat ``ChatMessage``): no raw HTML forms, markdown
    images load only from ``allowed_image_origins`` (``"https://host[:port]"``; ``data:``
    images always), fenced and inline code pass byte-exact. Text is held back while a
    construct is still open (an image's URL, a ``<``), so what goes out never ends
    half-way into one. Use it in a Shiny app as
    ``await chat.append_message_stream(inert_stream(agent.stream_async(text)))``.

    Examples:
        >>> import asyncio
        >>> from deputy_shiny import Agent
        >>> from deputy_shiny.testing import ScriptedReply, ScriptedModel
        >>> text = "<script>x()</script> ![a](https://evil.example/?q=key)\\n\\n`a<b` ok"
        >>> agent = Agent(ScriptedModel([ScriptedReply(text, chunk_size=4)]))
        >>> async def main():
        ...     return "".join([c async for c in inert_stream(agent.stream_async("Hi"))])
        >>> print(asyncio.run(main()).replace("\\u200b", "(zwsp)"))
        <(zwsp)script>x()<(zwsp)/script> *[image blocked: a (`https://evil.example`)]*
        <BLANKLINE>
        `a<b` ok
    """
    return InertStream(chunks, allowed_image_origins)


for _type in (ContentText, ContentToolRequest, ContentToolResult):
    message_content.register(_type, content_message)
    message_content_chunk.register(_type, _content_chunk)
# Thinking given to shinychat as it is: not shown, as in the kit's chat.
message_content.register(ContentThinking, lambda content: ChatMessage(content=""))
message_content_chunk.register(ContentThinking, lambda content: ChatMessage(content=""))
message_content.register(TextChunk, lambda chunk: ChatMessage(content=_whole_text(chunk)))
message_content_chunk.register(TextChunk, lambda chunk: ChatMessage(content=inert_fragment(chunk)))
