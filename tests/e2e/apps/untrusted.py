"""Untrusted output: model text and tool output full of active HTML and remote images.

``xss text <port> <other port>`` -> the model's reply is :func:`payload`;
``xss tool <port> <other port>`` -> the model calls ``echo_untrusted`` whose output is
the payload, then says ``Tool done. END-TOOL``; ``xss resources <port> <other port>``
-> the reply is :func:`resource_payload` (remote loads that are not ``<img>``).
``code`` -> :data:`CODE_REPLY`, a fenced code block holding ``<`` in three ways, inline
code holding ``<`` (:data:`INLINE`) and inline tricks that must form no element.
``fence tool`` -> :data:`FENCE_BEFORE_CARD` (a code fence left open) and a call of
``echo_untrusted``; after its card, :data:`AFTER_CARD` (an ``<img onerror>``, then the
:data:`INLINE` spans after a link, the last closing with the message).
``xss hostile <port>`` -> :func:`~tests.e2e.apps._payloads.hostile_text` (the payloads
every shinychat path is checked with) in 5-character chunks.
``allowed_image_origins`` comes from ``DEPUTY_E2E_IMAGE_ORIGINS`` (comma-separated;
empty by default).
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, tool, tool_annotations, warm_up
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui
from deputy_shiny.testing import FunctionModel, Reply, ScriptedReply, ScriptedToolCall
from tests.e2e.apps._payloads import CODE, hostile_text
from tests.e2e.apps._shared import last_tool_text, last_user_text, workspace_root

threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()

ALLOWED = tuple(o for o in os.environ.get("DEPUTY_E2E_IMAGE_ORIGINS", "").split(",") if o)
# A fenced code block that must stay byte-exact (``code`` sends it in 3-character chunks),
# then markup outside the block and fence tricks that must not form elements.
# Inline code that must stay byte-exact, then inline tricks: in each, something before
# the span makes the browser pair backticks otherwise than the code-span rule alone.
INLINE = ["a<b", "<div>", "x<y"]
INLINE_TRICKS = [
    "[a](/u`)<div id=formed-i1>x</div>` end",  # a link destination takes a backtick
    "[a][b`]<img src=http://127.0.0.1:9/i2.png>` end\n\n[b`]: /u",  # a reference label
    "[^a`]<div id=formed-i3>x</div>` end",  # a footnote label
    "www.a.example/`<div id=formed-i4>x</div>` end",  # a GFM autolink's path
    "http://a.example/`<iframe srcdoc=x></iframe>` end",
    "<1`x@y.example>`a`<div id=formed-i6>x</div>` end",  # an email autolink
    "| `x | <div id=formed-i7>x</div>` |\n|---|---|",  # a table splits the span
    "| `a | b` `<style>p{color:red}</style>` end |\n|---|---|",  # and shifts the pairing
    "\\`<div id=formed-i9>x</div>` end",  # an escaped backtick
    "`a\n`<script>window.__pwned='i10'</script>` end",  # a span over two lines
    "a `\n`<div id=formed-i11>x</div>` end",
    "``<div id=formed-i12>x</div>` end",  # runs of different lengths
]
CODE_REPLY = (
    f"Code START\n```python\n{CODE}\n```\n<div id=formed-after>x</div>\n\n"
    f"Inline `{INLINE[0]}`, `{INLINE[1]}` and ``{INLINE[2]}`` here.\n\n"
    + "\n\n".join(INLINE_TRICKS)
    # An indented closing fence: markdown closes there, shinychat's stream splitter does
    # not, so it would close at the next fence and take "<thinking>" in it for a tag.
    + "\n\n~~~\ny\n  ~~~\n~~~\n<thinking>\n<div id=formed-thinking>x</div>\n</thinking>\n~~~"
    + "\n\n- item\n  ```\n<div id=formed-list>x</div>\n```\n<div id=formed-end>x</div> END-CODE"
)
# The browser renders the text after a tool card as a new markdown document: a fence left
# open before the card must not make the guard trust what follows as code.
FENCE_BEFORE_CARD = "Before the card:\n\n```python\nopen = 1"
AFTER_CARD = (
    "<img src=x onerror=\"window.__pwned = 'after-card'\">\n\n"
    f"After the card END-FENCE [x](u) and `{INLINE[0]}`, `{INLINE[1]}` and ``{INLINE[2]}``"
)
XSS = re.compile(r"^xss (text|tool|resources) (\d+) (\d+)$")
HOSTILE = re.compile(r"^xss hostile (\d+)$")


def payload(port: str, other_port: str) -> str:
    """Markdown and HTML that must render inert, with images on two local origins."""
    allowed, other = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{other_port}"
    return "\n\n".join(
        [
            "Untrusted START",
            '<script>window.__pwned = "script"</script>',
            '<img src="x" onerror="window.__pwned = \'img-onerror\'">',
            "[click me](javascript:window.__pwned='md-link')",
            "<a href=\"javascript:window.__pwned='html-link'\">html link</a>",
            "<svg onload=\"window.__pwned = 'svg'\"></svg>",
            "<iframe srcdoc=\"<script>parent.__pwned = 'iframe'</script>\"></iframe>",
            f"![md image]({allowed}/md.png)",
            f'<img src="{allowed}/html.png">',
            f"![other image]({other}/other-md.png)",
            f'<img src="{other}/other-html.png">',
            "END-OF-PAYLOAD",
        ]
    )


def resource_payload(port: str) -> str:
    """HTML that would make the browser fetch from ``port`` without an ``<img>`` tag."""
    origin = f"http://127.0.0.1:{port}"
    return "\n\n".join(
        [
            "Resources START",
            f'<div style="background-image: url({origin}/style-attr.png)">styled</div>',
            f"<style>p {{ background: url({origin}/style-tag.png) }}</style>",
            f'<link rel="stylesheet" href="{origin}/link.css">',
            f'<iframe src="{origin}/iframe.html"></iframe>',
            f'<object data="{origin}/object.png"></object>',
            f'<embed src="{origin}/embed.png">',
            f'<video poster="{origin}/poster.png"></video>',
            f'<audio src="{origin}/audio.mp3"></audio>',
            f'<input type="image" src="{origin}/input.png">',
            f'<svg><image href="{origin}/svg-image.png"></image></svg>',
            f'<img srcset="{origin}/srcset.png 1x">',
            "END-OF-PAYLOAD",
        ]
    )


def echo_untrusted(text: str) -> str:
    """Return the text unchanged (stands in for a web page or a file's content).

    Args:
        text: The text to return.
    """
    return text


LOCAL = tool_annotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=False, idempotent_hint=True
)


def asked(messages: list[dict[str, Any]]) -> str:
    """What the user asked last (the tool results that follow it aside)."""
    users = [m for m in messages if m.get("role") == "user"]
    return last_user_text(users[-1:]) or ""


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    if last_tool_text(messages) is not None:
        if asked(messages) == "fence tool":
            return ScriptedReply(AFTER_CARD, chunk_size=3)
        return "Tool done. END-TOOL"
    text = last_user_text(messages) or ""
    if text == "code":
        return ScriptedReply(CODE_REPLY, chunk_size=3)
    if text == "fence tool":
        call = ScriptedToolCall("echo_untrusted", {"text": "card"})
        return ScriptedReply(FENCE_BEFORE_CARD, tool_calls=[call], chunk_size=3)
    hostile = HOSTILE.match(text)
    if hostile:
        return ScriptedReply(hostile_text(f"http://127.0.0.1:{hostile[1]}"), chunk_size=5)
    match = XSS.match(text)
    if not match:
        return f"You said: {text}"
    if match[1] == "resources":
        return ScriptedReply(resource_payload(match[2]), chunk_size=64)
    body = payload(match[2], match[3])
    if match[1] == "text":
        return ScriptedReply(body, chunk_size=64)
    return ScriptedReply(tool_calls=[ScriptedToolCall("echo_untrusted", {"text": body})])


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(
        FunctionModel(reply),
        tools=[tool(echo_untrusted, annotations=LOCAL)],
        working_dir=ctx.working_dir,
        approval_handler=ctx.approval_handler,
    )


app_ui = ui.page_fillable(agent_chat_ui("agent"), title="untrusted output")


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server(
        "agent", make_agent, workspace_root=workspace_root(), allowed_image_origins=ALLOWED
    )


app = App(app_ui, server)
