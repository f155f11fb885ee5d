"""ImageGuard and code: code the browser shows as code passes byte-exact, nothing else forms.

Fenced code at the left margin and inline code spans the browser provably reads as code
keep every byte (so copied code runs); every other ``<`` that could open a tag still gets
the zero-width space. A second CommonMark parser (markdown-it, with raw HTML on) renders
the guard's output to check that no element forms; the browser test in
``tests/e2e/test_untrusted_output.py`` checks shinychat's own markdown.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from deputy_shiny.shiny import ImageGuard

FORMED = "<div id=formed>x</div>"

# Code that must come out byte for byte, however it is split.
EXACT = [
    "Filter with `df[df.sales<limit]`.",
    "`a<b`, `<div>` and ``x<y`` here.",
    "Inline `` a ` <b> ` `` holds a backtick.",
    "- item `<li>`\n- two `a<b`\n",
    "> quote `<q>`\n",
    "| a | b |\n|---|---|\n| `<td>` | `x<y` |\n",
    "`a` then `<b>`.\n\nA new paragraph `<p>`.\n",
    "Code `[x](javascript:alert(1))` and `![i](http://127.0.0.1:9/a.png)` stays text.",
    "An escaped backslash \\\\`<b>` then code.",
    "```python\nif a<b:\n    print('<div>')\n```\nthen `<i>` after the fence.\n",
    "`` `<s>` `` and `<!-- c -->`, `</code><img src=x>`.",
    "Windows lines `<a>`\r\nand `<b>`\r\n",
    "- a `x\n\n  b` <b> ` ends code: a blank line starts afresh\n",
    "A stray ` before a fence\n```\n<b>\n```\nthen `<i>` after it: a fresh paragraph.\n",
    "A paragraph whose span `x<y",  # a span still open at the end: the stream flushes it
]
EXACT_CLOSED = EXACT[:-1]

# Each would form ``<div id=formed>`` if the guard paired backticks as the code-span rule
# alone says; the browser pairs them otherwise (something earlier took a backtick).
ADVERSARIAL = [
    f"\\`{FORMED}` end",  # an escaped backtick opens nothing
    f"``{FORMED}` end",  # runs of different lengths do not pair
    f"`{FORMED} end",  # never closed
    f"`a\n{FORMED}` end",  # closed on the next line: a multi-line span, not trusted
    f"`a\n`{FORMED}` end",  # the first run pairs across the line
    f"a `\n`{FORMED}` end",  # so does a run that ends its line
    f"`a\r\n`{FORMED}` end",  # the same with CRLF (split chunks must not see a blank line)
    f"[a](/u`){FORMED}` end",  # a link destination takes the backtick
    f"[a][b`]{FORMED}` end\n\n[b`]: /u",  # so does a reference label
    f"[^a`]{FORMED}` end",  # and a footnote label
    f"www.a.example/`{FORMED}` end",  # and a GFM autolink's path
    f"http://a.example/`{FORMED}` end",
    f"<1`x@y.example>`a`{FORMED}` end",  # and an email autolink
    f"<`x@y.example>`a`{FORMED}` end",
    f"![a`]{FORMED}` end",  # an image the guard rewrites
    f"| `x | {FORMED}` |\n|---|---|",  # a table splits the span at its "|"
    f"| `a | b` `{FORMED}` end |\n|---|---|",  # and shifts the pairing after it
]


def guarded(text: str, size: int | None = None) -> str:
    """``text`` through one guard, in chunks of ``size`` characters (or whole)."""
    guard = ImageGuard()
    step = size or max(len(text), 1)
    return "".join(guard.feed(text[i : i + step]) for i in range(0, len(text), step)) + (
        guard.flush()
    )


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def elements(markdown: str) -> list[str]:
    """The elements CommonMark (tables and strikethrough on, raw HTML allowed) makes."""
    html = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    parser = _Tags()
    parser.feed(html.render(markdown))
    return parser.tags


@pytest.mark.parametrize("text", EXACT_CLOSED)
def test_code_the_browser_shows_as_code_stays_byte_exact_in_any_chunks(text: str) -> None:
    for size in range(1, 101):
        assert guarded(text, size) == text, size
    assert not {"div", "img", "iframe", "script", "style", "q"} & set(elements(text))


def test_a_span_still_open_when_the_stream_flushes_is_not_trusted() -> None:
    assert guarded(EXACT[-1]) == "A paragraph whose span `x<\u200by"
    # One whose closing run came last is closed: a line break after it keeps a backtick
    # that may follow in the same markdown (after an event that shows nothing) apart.
    assert guarded("`<b>`") == "`<b>`\n"
    assert guarded("`<b>``") == "`<\u200bb>``"  # a run of another length closes nothing


@pytest.mark.parametrize("text", ADVERSARIAL)
def test_backticks_the_browser_pairs_otherwise_form_no_element(text: str) -> None:
    whole = guarded(text)
    for size in range(1, 101):
        assert guarded(text, size) == whole, size
    assert FORMED not in whole  # its "<" got the zero-width space
    assert "div" not in elements(whole)


def test_an_image_left_open_does_not_reach_across_a_blank_line() -> None:
    # Completed across it, the image's rewrite would remove the blank line and join the
    # paragraphs, so the second paragraph's backticks would pair with the first's.
    text = f"` ![x](\n\nu) `{FORMED}` end"
    whole = guarded(text)
    assert all(guarded(text, size) == whole for size in range(1, 101))
    assert whole.startswith("` \\![x](\n\nu) `")  # the "!" escaped, the paragraphs apart
    assert "div" not in elements(whole)


# Fences markdown and shinychat's stream splitter (which starts a "<thinking>" block at a
# line start outside what it takes for fences) would read differently from here on.
DESYNC = [
    "x\n```a`b\n```\n<thinking>\n<b>\n```\n",  # a backtick in the info string
    "x\n~~~\ny\n  ~~~\n~~~\n<thinking>\n<b>\n~~~\n",  # an indented closing fence
    "```\n<a>\r\n```\r\n```\n<thinking>\n<b>\n```\n",  # a closing fence ending in CRLF
    "```\na\u2028```\n<thinking>\n<b>\n```\n",  # a U+2028 "line break"
]


@pytest.mark.parametrize("text", DESYNC)
def test_fences_shinychat_may_read_otherwise_stop_trusting_code(text: str) -> None:
    whole = guarded(text)
    assert all(guarded(text, size) == whole for size in range(1, 101))
    assert "<thinking>" not in whole and "<b>" not in whole
    assert whole.replace("\u200b", "") == text  # only zero-width spaces were added


def test_a_span_is_held_back_only_from_its_first_tag_character_to_its_end() -> None:
    guard = ImageGuard()
    assert guard.feed("Use `a") == "Use `a"  # inert text streams on
    assert guard.feed("<b") == ""  # a "<" inside waits for the span's end
    assert guard.feed("`") == ""  # the closing run may still grow
    assert guard.feed(" now") == "<b` now"
    assert guard.feed(" `c") == " `c"
    assert guard.feed("<d\n") == "<\u200bd\n"  # the line ended: not code, the tag broken
    assert guard.flush() == ""
