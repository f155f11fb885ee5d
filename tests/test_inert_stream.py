"""Model text from ``Agent.stream_async`` in a plain shinychat ``Chat`` renders inert.

Handed to shinychat as it is, each chunk is rendered alone (:func:`inert_fragment`): it
must stay inert however the stream was cut. Through :func:`inert_stream`, the stream is
guarded as the kit guards it: code byte-exact at every cut, a card starts a new
document. What the browser makes of the chunks is emulated by ``tests/_shinychat_stream``
(see ``tests/test_image_guard_splits.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest
from shinychat import message_content, message_content_chunk

from deputy_shiny import Agent
from deputy_shiny.messages import ContentText, ContentToolRequest, ContentToolResult
from deputy_shiny.shiny import inert_stream
from deputy_shiny.shiny._inert_stream import inert_fragment
from deputy_shiny.testing import ScriptedModel, ScriptedReply
from tests._shinychat_stream import CARD
from tests.test_image_guard_splits import EXACT, HOSTILE, IMG, PAYLOADS, _render, _shown, _splits

# Cut where a naive per-chunk filter would miss what the next chunk completes.
SEAMS = [
    "see !",  # "!" then "[x](http://...)"
    "a \\",  # an odd backslash, then an escaped "!["
    "a <",  # "<" then "img ...>"
    "```\n",  # a fence opened in one chunk, closed in the next
]


async def _each(items: Sequence[object]) -> AsyncIterator[object]:
    for item in items:
        yield item


def _through_inert_stream(chunks: Sequence[object]) -> list[object]:
    """``chunks`` through :func:`inert_stream`, its cards as :data:`CARD`."""

    async def collect() -> list[object]:
        return [c async for c in inert_stream(_each(chunks))]  # type: ignore[arg-type]

    return [c if isinstance(c, str) else CARD for c in asyncio.run(collect())]


@pytest.mark.parametrize("text", HOSTILE + PAYLOADS)
def test_each_chunk_alone_is_inert_wherever_the_stream_is_cut(text: str) -> None:
    for parts in _splits(text):
        formed, _ = _shown([inert_fragment(part) for part in parts])
        assert formed == [], parts


@pytest.mark.parametrize("seam", SEAMS)
def test_a_chunk_cannot_complete_markup_the_one_before_began(seam: str) -> None:
    rest = f"[x](http://127.0.0.1:9/x.png) ![y](http://127.0.0.1:9/y.png)\n```\n{IMG}"
    assert _shown([seam, rest])[0], "unguarded, the two chunks form an element"
    assert _shown([inert_fragment(seam), inert_fragment(rest)])[0] == []


def test_the_checks_can_fail() -> None:
    # Unguarded, each payload forms elements, whole or cut somewhere.
    for text in PAYLOADS:
        assert _shown([text])[0] or any(_shown(parts)[0] for parts in _splits(text)), text


@pytest.mark.parametrize("text", EXACT)
def test_code_through_inert_stream_is_byte_exact_at_every_cut(text: str) -> None:
    raw_code = _render((("content", text),))[1]
    for parts in _splits(text):
        formed, code = _shown(_through_inert_stream(parts))
        assert (formed, code) == ([], raw_code), parts


# (HOSTILE through the same guard: tests/test_image_guard_splits.py)
@pytest.mark.parametrize("text", PAYLOADS)
def test_inert_stream_forms_nothing_at_any_cut(text: str) -> None:
    for parts in _splits(text):
        assert _shown(_through_inert_stream(parts))[0] == [], parts


def test_a_card_in_a_content_stream_starts_a_new_markdown_document() -> None:
    chunks = [
        ContentText(text="Here:\n```\ncode"),
        ContentToolRequest(id="c1", name="f", arguments={}),
        ContentToolResult(call_id="c1", name="f", output="<b>"),
        ContentText(text=f"{IMG} and `a<b`"),
    ]
    shown = _through_inert_stream(chunks)
    assert shown.count(CARD) == 2
    formed, code = _shown(shown)
    assert formed == []
    assert code[0].startswith("code") and code[1:] == ("a<b",)


async def test_text_chunks_handed_to_shinychat_unwrapped_render_inert() -> None:
    text = f"![x](http://127.0.0.1:9/q?k=secret) and {IMG}"
    agent = Agent(ScriptedModel([ScriptedReply(text, chunk_size=3)] * 2))
    chunks = [message_content_chunk(c).content async for c in agent.stream_async("go")]
    assert _shown([str(c) for c in chunks])[0] == []
    contents = agent.stream_async("go", stream="content")
    chunks = [message_content_chunk(c).content async for c in contents]
    assert _shown([str(c) for c in chunks])[0] == []


def test_a_whole_content_text_is_guarded_as_one_message() -> None:
    shown = message_content(ContentText(text=f"```\nif a<b:\n```\n{IMG}")).content
    assert _shown([str(shown)]) == ([], ("if a<b:\n",))


async def test_closing_an_inert_stream_ends_the_run() -> None:
    agent = Agent(ScriptedModel([ScriptedReply("word " * 50, chunk_size=4), "after"]))
    stream = inert_stream(agent.stream_async("go"))
    assert await anext(stream)
    await stream.aclose()
    assert not agent.running
    assert [c async for c in inert_stream(agent.stream_async("again"))] == ["after"]


async def test_a_failed_stream_shows_the_text_so_far_then_raises() -> None:
    async def failing() -> AsyncIterator[str]:
        yield "So far ![x"
        raise RuntimeError("the provider fell over")

    stream = inert_stream(failing())
    shown = [await anext(stream), await anext(stream)]
    with pytest.raises(RuntimeError, match="fell over"):
        await anext(stream)
    # What was held back (an image's start) is released before the error, escaped.
    assert "".join(map(str, shown)) == "So far \\![x"
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


async def test_anything_but_stream_chunks_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not int"):
        _ = [c async for c in inert_stream(_each([1]))]  # type: ignore[arg-type]
