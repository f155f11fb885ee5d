"""Attachments in Chromium: each kind reaches the model or the workspace; hostile
uploads are refused with a note and nothing is sent (#34).

Files go through shinychat's own attach button (Playwright's ``set_input_files``), as a
user picks them; what that button cannot send (a DOCX, a name with a path, a type it
refuses) is sent as a hostile page would, by setting the chat's input over the
websocket with ``Shiny.setInputValue``: the server checks what arrives, not what the
button allowed. One server serves the module (``tests/e2e/apps/attachments.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from deputy_shiny.shiny.playwright import AgentChat
from tests import _upload_samples as samples
from tests.e2e.conftest import AppServer, open_chats

E2E_APPS = ("attachments.py",)


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("attachments.py")


def attach(page: Page, chat: AgentChat, *files: tuple[str, str, bytes]) -> None:
    """Pick ``(name, mime, bytes)`` files with the chat's attach button; wait until staged."""
    payloads = [{"name": n, "mimeType": m, "buffer": b} for n, m, b in files]
    chat.loc.locator("input[type=file]").set_input_files(payloads)  # type: ignore[arg-type]
    expect(chat.loc.locator(".shiny-chat-input-attachments > *")).to_have_count(len(files))


def forge(page: Page, chat: AgentChat, text: str, *files: tuple[str, str, bytes]) -> None:
    """Send the chat's input as a hostile page script would: any name, any type."""
    attachments = [samples.attachment_value(name, data, mime) for name, mime, data in files]
    page.evaluate(
        """([id, value]) => Shiny.setInputValue(id + ":shinychat.userInput", value,
                                                {priority: "event"})""",
        [f"{chat.id}-chat_user_input", {"text": text, "attachments": attachments}],
    )


def received(app: AppServer) -> list[dict[str, Any]]:
    """What the model was sent, one entry per request."""
    return [json.loads(e.split(" ", 1)[1]) for e in app.events() if e.startswith("received ")]


def saved(app: AppServer, name: str) -> list[Path]:
    """Every session's uploads of that name (each session has its own workspace)."""
    return sorted(app.workspace_root.glob(f"*/uploads/{name}"))


def expect_note(chat: AgentChat, *parts: str) -> None:
    expect(chat.loc_latest_reply).to_contain_text("Not sent.")
    for part in parts:
        expect(chat.loc_latest_reply).to_contain_text(part)
    expect(chat.loc_latest_reply).to_contain_text("Your message is back in the input box.")


def test_each_kind_reaches_the_model_or_the_workspace(page: Page, app: AppServer) -> None:
    [chat, _] = open_chats(page, app, "agent", "novision")
    image = samples.png(3, 3)
    attach(
        page,
        chat,
        ("kinds-photo.png", "image/png", image),
        ("kinds-report.pdf", "application/pdf", samples.PDF),
        ("kinds-cities.csv", "text/csv", samples.CSV),
        ("kinds-notes.md", "text/markdown", samples.MARKDOWN),
        ("kinds-log.txt", "text/plain", b"line one\n"),
    )
    chat.send("What are these?")
    chat.expect_latest_reply("Received 1 image(s).")
    [request] = [r for r in received(app) if r["text"].startswith("What are these?")]
    assert request["images"] == ["data:image/png;base64,iVBORw0K"]
    for line in (
        "- uploads/kinds-photo.png (image, ",
        f"- uploads/kinds-report.pdf (PDF, {len(samples.PDF)} B)",
        f"- uploads/kinds-cities.csv (CSV, {len(samples.CSV)} B)",
        f"- uploads/kinds-notes.md (Markdown, {len(samples.MARKDOWN)} B)",
        "- uploads/kinds-log.txt (text, 9 B)",
    ):
        assert line in request["text"]
    [pdf] = saved(app, "kinds-report.pdf")
    assert pdf.read_bytes() == samples.PDF
    assert saved(app, "kinds-cities.csv")[0].read_bytes() == samples.CSV
    # A DOCX and an XLSX (shinychat's button offers neither) arrive as any sender's would.
    letter = samples.docx()
    forge(
        page,
        chat,
        "And these",
        ("kinds-letter.docx", "text/plain", letter),
        ("kinds-budget.xlsx", "text/plain", samples.xlsx()),
    )
    chat.expect_latest_reply("Received 0 image(s).")
    [request] = [r for r in received(app) if r["text"].startswith("And these")]
    assert "uploads/kinds-letter.docx (Word document, " in request["text"]
    assert "uploads/kinds-budget.xlsx (Excel workbook, " in request["text"]
    assert saved(app, "kinds-letter.docx")[0].read_bytes() == letter


def test_hostile_uploads_are_refused_with_a_note(page: Page, app: AppServer) -> None:
    [chat, novision] = open_chats(page, app, "agent", "novision")
    before = len(received(app))

    # A fake extension: an SVG with script, named as a PNG.
    attach(page, chat, ("hostile-chart.png", "image/png", samples.SVG))
    chat.send("Look at the chart")
    expect_note(chat, "hostile-chart.png is an HTML, SVG or XML document")
    expect(chat.chat.loc_input).to_have_text("Look at the chart")  # nothing lost
    # The same SVG under its own name, past the button (which refuses the type).
    forge(page, chat, "svg", ("hostile-chart.svg", "text/plain", samples.SVG))
    expect_note(chat, "hostile-chart.svg is an HTML, SVG or XML document")
    expect(page.locator("svg[onload]")).to_have_count(0)

    # Oversized: over the kit's cap for one file (the button's cap is the message's).
    big = b"a,b\n" + b"1,2\n" * 50_000
    attach(page, chat, ("hostile-big.csv", "text/csv", big))
    chat.chat.set_user_input("big")
    chat.chat.send_user_input()
    expect_note(chat, "hostile-big.csv is 200.0 KB (at most 150.0 KB a file)")

    # A zip bomb: a DOCX unpacking to 20 MB, named as a CSV, then as itself.
    bomb = samples.docx(size=20_000_000)
    attach(page, chat, ("hostile-bomb.csv", "text/csv", bomb))
    chat.chat.set_user_input("bomb")
    chat.chat.send_user_input()
    expect_note(chat, "hostile-bomb.csv would unpack to 20.0 MB", "decompression bomb")
    forge(page, chat, "bomb", ("hostile-bomb.docx", "text/plain", bomb))
    expect_note(chat, "hostile-bomb.docx would unpack to 20.0 MB")

    # An image for a model that does not take images.
    attach(page, novision, ("hostile-photo.png", "image/png", samples.png()))
    novision.send("Describe it")
    expect_note(novision, "This model does not take images (hostile-photo.png).")

    assert len(received(app)) == before  # the model was sent nothing
    assert list(app.workspace_root.glob("*/uploads/hostile-*")) == []


def test_a_path_in_the_name_is_saved_under_its_base_name(page: Page, app: AppServer) -> None:
    [chat, _] = open_chats(page, app, "agent", "novision")
    escape = "../../../path-escape/notes.md"
    forge(page, chat, "paths", (escape, "text/markdown", samples.MARKDOWN))
    chat.expect_latest_reply("Received 0 image(s).")
    [request] = [r for r in received(app) if r["text"].startswith("paths")]
    assert "- uploads/notes.md (Markdown, " in request["text"]
    [path] = saved(app, "notes.md")
    assert path.read_bytes() == samples.MARKDOWN
    assert not (app.workspace_root.parent / "path-escape").exists()
    assert not list(app.workspace_root.glob("**/path-escape"))
