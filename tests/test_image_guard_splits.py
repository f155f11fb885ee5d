"""ImageGuard at flush boundaries: every split of hostile text into 2 or 3 flushes.

The kit sends model text one coalesced flush at a time, each through the same
:class:`~deputy_shiny.shiny.ImageGuard`, and ends it (``end``) before a tool card or at
the message's end. Here each hostile string is cut at every point into two flushes, and
at every pair of points into three, and what the browser ends up with is compared with
the unsplit text: shinychat's stream splitter and its blocks (``tests/_shinychat_stream``,
a port of its browser code), then markdown with raw HTML allowed, in every state the
message passes through while streaming. Code must keep every byte (as the raw text
renders it, where the browser reads it as code) and no element or attribute the model
wrote may form.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Sequence

import pytest

from deputy_shiny.shiny import ImageGuard
from tests._shinychat_stream import CARD, render, stream_blocks
from tests.e2e.apps._payloads import hostile_payloads

IMG = "<img src=http://127.0.0.1:9/x.png>"
PAYLOADS = hostile_payloads("http://127.0.0.1:9")  # every shinychat path's payloads

# Code that renders byte-exact from the raw text, however the text is split.
EXACT = [
    "Use `a<b`",  # a span that closes with the message
    "Use ``a<b``",
    "`a<b` and `<div>`",
    "```\nif a<b:\n```",  # a fence that closes with the message
    "~~~\nx<y\n~~~\n`a<b`",
    "See [x](https://u.example/p) and `a<b` then `<div>`.",  # spans after links
    "See [x][r] and `a<b`.\n\n[r]: /u",  # after a reference link
    "See [x][] and [y] and `<i>`",
    "[x](u)<b>hi</b> and `<i>`",  # HTML-looking text right after a link
    "Go to https://a.example/x and `a<b`",  # an autolink literal, then code
    "Visit www.a.example then `<p>`",
]
# Each would form an element if the guard trusted its backticks (or fences) otherwise
# than markdown or shinychat's splitter reads them at that flush boundary.
HOSTILE = [
    f"```\nco```\n<thinking>\n{IMG}\n```\n",  # a closing fence at a chunk's start
    f"```\nco\n```\n<thinking>\n{IMG}\n</thinking>\n",
    f"```\n<thinking>\n{IMG}\n</thinking>\n",  # a fence never closed
    f"\\` `<thinking>{IMG}</thinking>` `c`",  # shinychat's final pass pairs the escape
    f"x](http://a.example/)`{IMG}` end",  # not a link: an autolink takes the backtick
    f"[a](/u`){IMG}` end",  # a destination takes the backtick
    f"[a](u 'x`'){IMG}` end",  # a title does
    f"[a](u\n'x`'){IMG}` end",  # a title on the next line
    f"[a][b`]{IMG}` end\n\n[b`]: /u",  # a reference label does
    f"http://a.example/`{IMG}` end",
    f"www.a.example/`{IMG}` end",
    f"`a<b``{IMG}` end",  # a closing run that grows is no closer
]


# Where a third flush is worth a cut: next to a character some construct turns on.
_TURNS = set("`~[]()<>\\\n:/.'\"!|")


def _splits(text: str) -> Iterator[list[str]]:
    """Every cut into two flushes; into three, every pair of cuts next to a turn."""
    n = len(text)
    near = [i for i in range(1, n) if {text[i - 1], text[i]} & _TURNS]
    for cuts in itertools.chain(((i,) for i in range(1, n)), itertools.combinations(near, 2)):
        bounds = (0, *cuts, n)
        yield [text[bounds[k] : bounds[k + 1]] for k in range(len(bounds) - 1)]


def _chunks(parts: list[str]) -> list[str]:
    guard = ImageGuard()
    return [guard.feed(part) for part in parts] + [guard.end()]


@functools.cache
def _render(blocks: tuple[tuple[str, str], ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    formed, code = render(list(blocks))
    return tuple(formed), tuple(code)


def _shown(chunks: Sequence[object]) -> tuple[list[str], tuple[str, ...]]:
    """What formed in any state while streaming, and the code the final blocks show."""
    states, final = stream_blocks(chunks)
    formed: list[str] = []
    for state in states:
        formed += _render(tuple(state))[0]
    final_formed, code = _render(tuple(final))
    return formed + list(final_formed), code


@pytest.mark.parametrize("text", EXACT)
def test_code_stays_byte_exact_at_every_flush_boundary(text: str) -> None:
    raw_code = _render((("content", text),))[1]
    assert raw_code, "the example holds code"
    for parts in _splits(text):
        formed, code = _shown(_chunks(parts))
        assert code == raw_code, parts
        assert formed == [], parts


@pytest.mark.parametrize("text", HOSTILE)
def test_no_element_forms_at_any_flush_boundary(text: str) -> None:
    whole = _shown(_chunks([text]))
    assert whole[0] == []
    for parts in _splits(text):
        formed, code = _shown(_chunks(parts))
        assert formed == [], parts
        assert code == whole[1], parts  # the same code as the unsplit text


def test_the_emulated_browser_forms_what_raw_text_would() -> None:
    # The checks can fail: unguarded, the same strings form elements.
    for text in HOSTILE[:5]:
        assert _shown([text])[0] or any(_shown(parts)[0] for parts in _splits(text)), text


def test_a_tool_card_starts_a_new_markdown_document() -> None:
    # A fence left open before a card: after it the browser reads text, not code.
    guard = ImageGuard()
    chunks: list[object] = [guard.feed("Here:\n```\ncode"), guard.end(), CARD]
    chunks += [guard.feed(f"{IMG} and `a<b`"), guard.end()]
    formed, code = _shown(chunks)
    assert formed == []
    assert code[0].startswith("code") and code[1:] == ("a<b",)
    # What the guard did before: code passed on after the card, and an image formed.
    assert "img" in _shown(["Here:\n```\ncode", CARD, f"{IMG} and `a<b`"])[0]


def _flushed(parts: list[str]) -> list[str]:
    """Each part as a text part of its own (``flush`` after it, as the kit does at an
    event that shows nothing), the markdown ending after the last."""
    guard = ImageGuard()
    return [guard.feed(part) + guard.flush() for part in parts] + [guard.end()]


@pytest.mark.parametrize("text", HOSTILE + PAYLOADS)
def test_no_element_forms_when_a_text_part_ends_at_any_cut(text: str) -> None:
    # flush() releases what it held: a last "<", "!" or backslash, or a line start that
    # may still become a fence, must not let the next part complete markup. (The kit
    # flushes at an event that shows nothing, e.g. a tool call waiting for approval.)
    for parts in _splits(text):
        assert _shown(_flushed(parts))[0] == [], parts


def test_what_flush_releases_cannot_be_completed_by_the_next_part() -> None:
    for head, tail in [("see !", "[x](http://127.0.0.1:9/x.png)"), ("a <", IMG[1:])]:
        assert _shown([head, tail])[0], "the checks can fail"
        assert _shown(_flushed([head, tail]))[0] == []
