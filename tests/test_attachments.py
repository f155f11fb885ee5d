"""Attachments: kinds decided by content, safe names, caps, and what the model gets.

The session tests drive the kit's ``_ChatSession`` as ``test_chat_session`` does (a
real Agent on a ``FunctionModel`` through litellm, fakes only where Shiny would be) and
hand it what shinychat's input gives the server: a name and a base64 data URL.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent
from deputy_shiny.errors import ConfigurationError, PathDenied
from deputy_shiny.shiny import AttachmentPolicy, KitPersistence, agent_chat_ui
from deputy_shiny.shiny._attachments import (
    SessionUploads,
    register_policy,
    resolve_attachments,
    save_upload,
    uploads_size,
)
from deputy_shiny.shiny._chat_start import AgentChatContext
from deputy_shiny.shiny._export import conversation_markdown
from deputy_shiny.shiny._upload_checks import AttachmentRefused, safe_name, sniff
from deputy_shiny.testing import FunctionModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_read_file
from tests import _upload_samples as samples
from tests.test_chat_session import Kit, persistent_agent, restored, start

# --------------------------------------------------------------------------- kinds


@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        ("photo.png", samples.png(), "image"),
        ("photo.jpg", b"\xff\xd8\xff\xe0" + b"\x00" * 20, "image"),
        ("anim.gif", b"GIF89a" + b"\x00" * 20, "image"),
        ("pic.webp", b"RIFF\x10\x00\x00\x00WEBPVP8 ", "image"),
        ("report.pdf", samples.PDF, "pdf"),
        ("letter.docx", samples.docx(), "docx"),
        ("budget.xlsx", samples.xlsx(), "xlsx"),
        ("cities.csv", samples.CSV, "csv"),
        ("notes.md", samples.MARKDOWN, "markdown"),
        ("notes.txt", "Zoë's plan".encode(), "text"),
        ("README", b"plain words", "text"),
    ],
)
def test_each_kind_is_known_by_its_content(name: str, data: bytes, kind: str) -> None:
    assert sniff(data, name) == kind


@pytest.mark.parametrize(
    ("name", "data", "rule"),
    [
        ("chart.png", samples.SVG, "markup"),  # SVG with script, a fake extension
        ("chart.svg", samples.SVG, "markup"),
        ("page.md", b"<!DOCTYPE html><html><script>x()</script></html>", "markup"),
        ("notes.txt", b"\xef\xbb\xbf  <html><body>hi</body></html>", "markup"),
        ("photo.png", samples.PDF, "mismatch"),  # a PDF under an image's name
        ("report.pdf", samples.png(), "mismatch"),
        ("letter.txt", samples.docx(), "mismatch"),
        ("tool.exe", b"MZ\x90\x00\x03\x00\x00\x00", "type"),
        ("data.csv", b"\xff\xfe\x00a\x00b", "type"),
        ("archive.docx", samples.office("other/file.xml"), "type"),
        ("broken.docx", b"PK\x03\x04 not really a zip", "invalid"),
        ("bomb.docx", samples.docx(size=20_000_000), "bomb"),
    ],
)
def test_hostile_content_is_refused_by_rule(name: str, data: bytes, rule: str) -> None:
    with pytest.raises(AttachmentRefused) as caught:
        sniff(data, name, max_unpacked=5_000_000)
    assert caught.value.rule == rule
    assert name in str(caught.value)


def test_a_bomb_is_refused_from_its_directory_without_inflating() -> None:
    bomb = samples.docx(size=200_000_000)  # 200 MB of "a": about 200 KB compressed
    assert len(bomb) < 1_000_000
    with pytest.raises(AttachmentRefused, match=r"would unpack to 200\.0 MB") as caught:
        sniff(bomb, "bomb.docx")
    assert caught.value.rule == "bomb"


@pytest.mark.parametrize(
    ("given", "saved"),
    [
        ("../../other-session/notes.txt", "notes.txt"),
        ("C:\\Users\\me\\report.pdf", "report.pdf"),
        (".bashrc", "bashrc"),
        ("..", "upload"),
        ("a\x00b\x1b[31m.txt", "a_b__31m.txt"),
        ("\u202etxt.exe.png", "txt.exe.png"),  # a right-to-left override hid the real name
        ("![x](evil.example?q=1).md", "x_(evil.example_q_1).md"),
        ("x" * 300 + ".csv", "x" * 96 + ".csv"),
    ],
)
def test_a_name_becomes_a_safe_base_name(given: str, saved: str) -> None:
    assert safe_name(given) == saved


def test_an_upload_never_overwrites_and_never_follows_a_link(tmp_path: Path) -> None:
    (tmp_path / "uploads").mkdir()
    assert save_upload(tmp_path, "a.txt", b"first") == "uploads/a.txt"
    assert save_upload(tmp_path, "a.txt", b"second") == "uploads/a-2.txt"
    assert (tmp_path / "uploads/a.txt").read_bytes() == b"first"
    outside = tmp_path.parent / f"outside-{uuid.uuid4().hex}"
    outside.mkdir()
    (tmp_path / "uploads").rename(tmp_path / "old")
    os.symlink(outside, tmp_path / "uploads")  # the model made uploads/ a link elsewhere
    with pytest.raises(PathDenied):
        save_upload(tmp_path, "b.txt", b"x")
    assert list(outside.iterdir()) == []


def test_the_policy_is_resolved_from_what_the_ui_was_given() -> None:
    assert resolve_attachments(False) is None
    assert resolve_attachments(True) == AttachmentPolicy()
    assert resolve_attachments(["csv"]).kinds == ("csv",)  # type: ignore[union-attr]
    with pytest.raises(ConfigurationError, match="unknown kind"):
        resolve_attachments(["image", "exe"])
    with pytest.raises(ConfigurationError, match="allow_attachments"):
        agent_chat_ui("plain", allow_attachments=True)


def test_the_ui_offers_shinychats_button_with_the_smaller_cap() -> None:
    off = agent_chat_ui("off").get_html_string()
    assert "allow-attachments" not in off
    policy = AttachmentPolicy(kinds=("image", "csv", "docx"), max_message_bytes=300_000)
    html = agent_chat_ui("docs", attachments=policy).get_html_string()
    assert 'allow-attachments="true"' in html
    assert 'attachment-accept="image/png,image/jpeg,image/gif,image/webp,text/csv"' in html
    assert 'max-attachment-size="300000"' in html


# --------------------------------------------------------------------------- sessions


class Recorder:
    """A model that records each request's last user message, and answers."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        self.seen.append(messages[-1]["content"])
        return "Got it."


def kit_with(tmp_path: Path, policy: AttachmentPolicy | None) -> tuple[Kit, Recorder]:
    recorder = Recorder()

    def factory(ctx: AgentChatContext) -> Agent:
        return Agent(FunctionModel(recorder), tools=[tool_read_file()], working_dir=ctx.working_dir)

    kit = start(tmp_path, factory)
    chat_id = f"t{uuid.uuid4().hex}-chat"
    register_policy(chat_id, policy)
    kit.session.uploads = SessionUploads(chat_id, kit.session.working_dir)
    return kit, recorder


async def send(kit: Kit, text: str, *files: Any) -> str:
    await kit.session.submit(text, files)
    await kit.chat.settled()
    return kit.chat.messages[-1].plain.strip().removeprefix("> ")  # a note is a quote


def saved_files(kit: Kit) -> dict[str, bytes]:
    folder = kit.session.working_dir / "uploads"
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.exists() else {}


async def test_documents_are_saved_and_named_in_the_users_turn(tmp_path: Path) -> None:
    kit, model = kit_with(tmp_path, AttachmentPolicy())
    pdf = samples.attachment("Q3 report.pdf", samples.PDF, "application/pdf")
    csv = samples.attachment("cities.csv", samples.CSV, "text/csv")
    assert await send(kit, "Summarize these", pdf, csv) == "Got it."
    assert saved_files(kit) == {"Q3 report.pdf": samples.PDF, "cities.csv": samples.CSV}
    assert model.seen == [
        "Summarize these\n\nAttached files, saved in the workspace:\n"
        f"- uploads/Q3 report.pdf (PDF, {len(samples.PDF)} B)\n"
        f"- uploads/cities.csv (CSV, {len(samples.CSV)} B)"
    ]
    # The saved turn keeps them by name and size (the transcript, reload, downloads).
    assert "uploads/cities.csv (CSV, 38 B)" in kit.agent.get_turns()[0].contents[0].text  # type: ignore[union-attr]
    # The same name again: a new file beside it, the first one untouched.
    await send(kit, "And this", samples.attachment("cities.csv", b"a,b\n", "text/csv"))
    assert saved_files(kit)["cities.csv"] == samples.CSV
    assert saved_files(kit)["cities-2.csv"] == b"a,b\n"


async def test_an_image_goes_to_a_model_that_takes_images(tmp_path: Path) -> None:
    kit, model = kit_with(tmp_path, AttachmentPolicy(images_to_model=True))
    image = samples.png()
    await send(kit, "What is this?", samples.attachment("photo.png", image, "image/png"))
    [content] = model.seen
    text, picture = content
    assert text["type"] == "text" and "uploads/photo.png (image, " in text["text"]
    assert picture["type"] == "image_url"
    assert picture["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    assert "photo.png" in saved_files(kit)


async def test_an_image_for_a_model_without_vision_sends_nothing(tmp_path: Path) -> None:
    # A test model litellm does not know: litellm.supports_vision says no.
    kit, model = kit_with(tmp_path, AttachmentPolicy())
    note = await send(kit, "Look", samples.attachment("photo.png", samples.png(), "image/png"))
    assert "this model does not take images (photo.png)" in note.lower()
    assert model.seen == [] and saved_files(kit) == {}
    assert kit.chat.input_updates[-1]["value"] == "Look"  # the text is back in the box


@pytest.mark.parametrize(
    ("policy", "files", "said"),
    [
        (
            AttachmentPolicy(kinds=("pdf",)),
            [("cities.csv", samples.CSV)],
            "cities.csv is a CSV, which this chat does not accept",
        ),
        (
            AttachmentPolicy(max_file_bytes=50),
            [("report.pdf", samples.PDF)],
            f"report.pdf is {len(samples.PDF)} B (at most 50 B a file)",
        ),
        (
            AttachmentPolicy(max_message_bytes=100),
            [("a.csv", samples.CSV), ("b.pdf", samples.PDF)],
            "the files together are",
        ),
        (
            AttachmentPolicy(),
            [("chart.png", samples.SVG), ("ok.csv", samples.CSV)],
            "chart.png is an HTML, SVG or XML document",
        ),
        (
            AttachmentPolicy(max_unpacked_bytes=1_000_000),
            [("bomb.docx", samples.docx(size=5_000_000))],
            "looks like a decompression bomb",
        ),
        (None, [("a.csv", samples.CSV)], "This chat takes no attachments."),
    ],
)
async def test_a_refused_file_sends_nothing_and_says_why(
    tmp_path: Path, policy: AttachmentPolicy | None, files: list[tuple[str, bytes]], said: str
) -> None:
    kit, model = kit_with(tmp_path, policy)
    note = await send(kit, "Read it", *(samples.attachment(n, d) for n, d in files))
    assert note.startswith("Not sent.") and said.lower() in note.lower()
    assert note.endswith("Your message is back in the input box.")
    assert model.seen == [] and saved_files(kit) == {}  # all or nothing
    assert kit.agent.get_turns() == []


async def test_the_conversation_cap_counts_what_the_workspace_holds(tmp_path: Path) -> None:
    kit, model = kit_with(tmp_path, AttachmentPolicy(max_conversation_bytes=100))
    await send(kit, "one", samples.attachment("a.csv", samples.CSV))
    assert uploads_size(kit.session.working_dir) == len(samples.CSV)
    note = await send(kit, "two", samples.attachment("b.pdf", samples.PDF))
    assert "This conversation's uploads would pass 100 B (38 B saved)." in note
    assert len(model.seen) == 1


async def test_a_path_in_the_name_stays_in_this_sessions_workspace(tmp_path: Path) -> None:
    kit, model = kit_with(tmp_path, AttachmentPolicy())
    other, _ = kit_with(tmp_path, AttachmentPolicy())
    theirs = other.session.working_dir
    name = f"../{theirs.name}/uploads/../.profile.md"
    await send(kit, "x", samples.attachment(name, samples.MARKDOWN))
    assert saved_files(kit) == {"profile.md": samples.MARKDOWN}
    assert not (theirs / "uploads").exists() and not (theirs / ".profile.md").exists()
    assert "uploads/profile.md (Markdown" in model.seen[0]


async def test_the_file_tools_read_an_upload_under_the_same_permissions(tmp_path: Path) -> None:
    def reader(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return "Read: " + str(messages[-1]["content"])
        call = ScriptedToolCall("read_file", {"path": "uploads/notes.md"})
        return ScriptedReply(tool_calls=[call])

    def factory(ctx: AgentChatContext) -> Agent:
        return Agent(FunctionModel(reader), tools=[tool_read_file()], working_dir=ctx.working_dir)

    kit = start(tmp_path, factory)
    chat_id = f"t{uuid.uuid4().hex}-chat"
    register_policy(chat_id, AttachmentPolicy())
    kit.session.uploads = SessionUploads(chat_id, kit.session.working_dir)
    await send(kit, "x", samples.attachment("notes.md", samples.MARKDOWN))
    assert "The *quarterly* plan" in kit.agent.get_turns()[-1].contents[0].text  # type: ignore[union-attr]


async def test_a_saved_conversation_keeps_its_files_by_name_and_size(tmp_path: Path) -> None:
    persistence = KitPersistence(tmp_path / "saved", trust_user_header=True)
    chat_id = f"t{uuid.uuid4().hex}-chat"
    register_policy(chat_id, AttachmentPolicy())
    first = start(tmp_path, persistent_agent(["Noted."]), persistence=persistence)
    first.session.uploads = SessionUploads(chat_id, first.session.working_dir)
    await restored(first)
    await send(first, "Keep this", samples.attachment("cities.csv", samples.CSV, "text/csv"))
    await first.session.end()

    second = start(tmp_path, persistent_agent([]), persistence=persistence)
    await restored(second)
    listing = f"- uploads/cities.csv (CSV, {len(samples.CSV)} B)"
    [(role, shown), _reply] = second.chat.said()
    assert role == "user" and shown.startswith("Keep this") and listing in shown
    turns = second.agent.get_turns()
    assert listing in conversation_markdown(turns).replace("\\", "")  # the download
    assert (second.session.working_dir / "uploads/cities.csv").read_bytes() == samples.CSV
    await second.session.end()
