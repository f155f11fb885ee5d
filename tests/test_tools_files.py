"""Specification of the file tools: read, convert, write, edit, list, glob and grep."""

from __future__ import annotations

import os
import stat
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny._util import safe_fs as _safe_fs
from deputy_shiny.errors import ToolArgumentsError, ToolInvocationError
from deputy_shiny.tools import (
    Tool,
    ToolContext,
    files_read,
    tool_context,
    tool_metadata,
)
from deputy_shiny.tools.files import (
    tool_edit_file,
    tool_glob_files,
    tool_grep_files,
    tool_list_files,
    tool_multi_edit,
    tool_read_file,
    tool_read_markdown,
    tool_write_file,
)

FACTORIES: dict[str, Callable[[], Tool]] = {
    "read_file": tool_read_file,
    "read_markdown": tool_read_markdown,
    "write_file": tool_write_file,
    "edit_file": tool_edit_file,
    "multi_edit": tool_multi_edit,
    "list_files": tool_list_files,
    "glob_files": tool_glob_files,
    "grep_files": tool_grep_files,
}
READ = {
    "read_only_hint": True,
    "destructive_hint": False,
    "open_world_hint": False,
    "idempotent_hint": True,
}
WRITE = {
    "read_only_hint": False,
    "destructive_hint": True,
    "open_world_hint": False,
    "idempotent_hint": False,
}
WRITE_TOOLS = {"write_file", "edit_file", "multi_edit"}


# ------------------------------------------------------------------ helpers


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The agent's directory: tmp/data, with tmp/outside and tmp/data2 beside it."""
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("top secret\n")
    (tmp_path / "data2").mkdir()
    (tmp_path / "data2" / "twin.txt").write_text("sibling secret\n")
    return data.resolve()


def context(root: Path, *, write: bool = True) -> ToolContext:
    return ToolContext(working_dir=root, read_roots=(root,), write_roots=(root,) if write else ())


async def call(root: Path, t: Tool, *, write: bool = True, **arguments: Any) -> str:
    with tool_context(context(root, write=write)):
        result = await t.invoke(t.parse_arguments(arguments))
    assert isinstance(result, str)
    return result


async def fails(root: Path, t: Tool, *, write: bool = True, **arguments: Any) -> str:
    with pytest.raises(ToolInvocationError) as info:
        await call(root, t, write=write, **arguments)
    return str(info.value)


def tree(path: Path) -> list[str]:
    """Every path below ``path`` (for "nothing was created" checks)."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# ------------------------------------------------------------------ names, annotations, sources


@pytest.mark.parametrize("name", list(FACTORIES))
def test_names_annotations_and_source(name: str) -> None:
    t = FACTORIES[name]()
    meta = tool_metadata(t)
    assert meta["name"] == name
    assert meta["annotations"] == (WRITE if name in WRITE_TOOLS else READ)
    assert meta["missing_annotations"] == []
    assert meta["source"] == {"type": "package", "package": "deputy_shiny"}
    assert "path" in t.parameters["properties"]
    assert t.parameters["properties"]["path"]["type"] == "string"


@pytest.mark.parametrize("name", list(FACTORIES))
def test_factories_return_fresh_tools(name: str) -> None:
    first, second = FACTORIES[name](), FACTORIES[name]()
    assert first is not second
    assert first.openai_schema() == second.openai_schema()


def test_read_file_description_mentions_cat_n() -> None:
    assert "cat -n" in tool_read_file().description


# ------------------------------------------------------------------ read_file


async def test_read_file_numbers_lines_like_cat_n(root: Path) -> None:
    (root / "notes.txt").write_text("alpha\nbeta\n\ngamma")
    out = await call(root, tool_read_file(), path="notes.txt")
    assert out == (
        "     1\talpha\n     2\tbeta\n     3\t\n     4\tgamma\n\n[notes.txt: all 4 lines shown.]"
    )


async def test_read_file_offset_and_limit_page_through(root: Path) -> None:
    (root / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    t = tool_read_file()
    first = await call(root, t, path="n.txt", limit=3)
    assert first.splitlines()[:3] == ["     1\tline 1", "     2\tline 2", "     3\tline 3"]
    assert "lines 1-3 of 10 shown (truncated)" in first
    assert "offset=3" in first
    middle = await call(root, t, path="n.txt", offset=3, limit=2)
    assert middle.splitlines()[:2] == ["     4\tline 4", "     5\tline 5"]
    tail = await call(root, t, path="n.txt", offset=8)
    assert tail.splitlines()[:2] == ["     9\tline 9", "    10\tline 10"]
    assert "lines 9-10 of 10 shown (end of file)" in tail


async def test_read_file_default_limit_is_2000_lines(root: Path) -> None:
    (root / "long.txt").write_text("x\n" * 2500)
    out = await call(root, tool_read_file(), path="long.txt")
    assert out.count("\tx") == 2000
    assert "lines 1-2000 of 2500 shown (truncated)" in out


async def test_read_file_windows_line_endings_and_bom(root: Path) -> None:
    (root / "w.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\n")
    out = await call(root, tool_read_file(), path="w.txt")
    assert out.startswith("     1\tone\n     2\ttwo\n")


async def test_read_file_empty_file(root: Path) -> None:
    (root / "empty.txt").write_text("")
    assert await call(root, tool_read_file(), path="empty.txt") == "[empty.txt is empty: 0 lines.]"


async def test_read_file_undecodable_text_is_replaced(root: Path) -> None:
    (root / "latin.txt").write_bytes(b"caf\xe9 au lait\n")
    out = await call(root, tool_read_file(), path="latin.txt")
    assert "caf\ufffd au lait" in out


async def test_read_file_refuses_binary(root: Path) -> None:
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(100))
    msg = await fails(root, tool_read_file(), path="img.png")
    assert "binary file, 116 bytes" in msg
    assert "read_markdown" in msg


async def test_read_file_cuts_very_long_lines(root: Path) -> None:
    (root / "min.js").write_text("a" * 5000 + "\nshort\n")
    out = await call(root, tool_read_file(), path="min.js")
    first, second = out.splitlines()[:2]
    assert first.startswith("     1\t" + "a" * 2000 + "… [line cut at 2000 characters")
    assert "a" * 2001 not in first
    assert second == "     2\tshort"


async def test_read_file_output_cap_says_where_to_continue(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files_read, "MAX_OUTPUT_CHARS", 100)
    (root / "f.txt").write_text("".join(f"row {i:04d}\n" for i in range(50)))
    out = await call(root, tool_read_file(), path="f.txt")
    shown = [line for line in out.splitlines() if "\trow" in line]
    assert 0 < len(shown) < 50
    assert f"Continue with offset={len(shown)}" in out
    assert "of 50 shown (truncated)" in out


async def test_read_file_size_cap_asks_for_a_range(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files_read, "MAX_READ_BYTES", 1000)
    (root / "big.log").write_text("event\n" * 400)  # 2400 bytes
    t = tool_read_file()
    msg = await fails(root, t, path="big.log")
    assert "big.log is 2.3 KB" in msg
    assert "offset and limit" in msg
    out = await call(root, t, path="big.log", offset=10, limit=5)
    assert "lines 11-15 of 400 shown" in out


async def test_read_file_bad_input(root: Path) -> None:
    (root / "a.txt").write_text("one\ntwo\n")
    (root / "sub").mkdir()
    t = tool_read_file()
    assert "File not found: nope.txt" in await fails(root, t, path="nope.txt")
    assert "is a directory" in await fails(root, t, path="sub")
    assert "past the end" in await fails(root, t, path="a.txt", offset=5)
    assert "limit must be at least 1" in await fails(root, t, path="a.txt", limit=0)
    assert "offset must be at least 0" in await fails(root, t, path="a.txt", offset=-1)
    with pytest.raises(ToolArgumentsError):
        t.parse_arguments('{"path": 3}')
    with pytest.raises(ToolArgumentsError):
        t.parse_arguments("{}")


async def test_read_file_absolute_path_inside_root(root: Path) -> None:
    (root / "a.txt").write_text("one\n")
    out = await call(root, tool_read_file(), path=str(root / "a.txt"))
    assert out.startswith("     1\tone")


# ------------------------------------------------------------------ read_markdown


def _make_docx(path: Path, paragraphs: list[str]) -> None:
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    body = "".join(f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>" for text in paragraphs)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/word/document.xml" ContentType="application/'
            'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
            "</Types>",
        )
        z.writestr(
            "_rels/.rels",
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
            '2006/relationships/officeDocument" Target="word/document.xml"/>'
            "</Relationships>",
        )
        z.writestr(
            "word/document.xml",
            f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{w}">'
            f"<w:body>{body}</w:body></w:document>",
        )


def _make_pdf(path: Path, text: str) -> None:
    content = f"BT /F1 24 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, obj)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    path.write_bytes(out)


@pytest.fixture
def markitdown_installed() -> None:
    # The test command installs the docs-tools extra: a missing converter is a failure here.
    import markitdown  # noqa: F401


@pytest.mark.usefixtures("markitdown_installed")
async def test_read_markdown_html(root: Path) -> None:
    (root / "page.html").write_text(
        "<html><body><h1>Report</h1><p>Some <b>bold</b> text.</p>"
        "<ul><li>one</li><li>two</li></ul></body></html>"
    )
    out = await call(root, tool_read_markdown(), path="page.html")
    assert "# Report" in out
    assert "**bold**" in out
    assert "one" in out and "two" in out
    assert "[page.html: all" in out


@pytest.mark.usefixtures("markitdown_installed")
async def test_read_markdown_docx(root: Path) -> None:
    _make_docx(root / "memo.docx", ["Quarterly memo", "Revenue went up."])
    out = await call(root, tool_read_markdown(), path="memo.docx")
    assert "Quarterly memo" in out
    assert "Revenue went up." in out


@pytest.mark.usefixtures("markitdown_installed")
async def test_read_markdown_xlsx(root: Path) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Sales"
    sheet.append(["region", "units"])
    sheet.append(["north", 42])
    book.save(root / "sales.xlsx")
    out = await call(root, tool_read_markdown(), path="sales.xlsx")
    assert "## Sales" in out
    assert "| region | units |" in out
    assert "| north | 42 |" in out


@pytest.mark.usefixtures("markitdown_installed")
async def test_read_markdown_pptx(root: Path) -> None:
    import pptx

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Roadmap"
    slide.placeholders[1].text = "Ship the file tools"
    deck.save(str(root / "deck.pptx"))
    out = await call(root, tool_read_markdown(), path="deck.pptx")
    assert "Roadmap" in out
    assert "Ship the file tools" in out


@pytest.mark.usefixtures("markitdown_installed")
async def test_read_markdown_pdf(root: Path) -> None:
    _make_pdf(root / "paper.pdf", "Hello from a PDF")
    out = await call(root, tool_read_markdown(), path="paper.pdf")
    assert "Hello from a PDF" in out


@pytest.mark.usefixtures("markitdown_installed")
async def test_read_markdown_pages_with_offset_and_limit(root: Path) -> None:
    (root / "notes.md").write_text("".join(f"- item {i}\n" for i in range(10)))
    out = await call(root, tool_read_markdown(), path="notes.md", offset=2, limit=3)
    assert out.splitlines()[:3] == ["- item 2", "- item 3", "- item 4"]
    assert "lines 3-5 of 10 shown (truncated)" in out


@pytest.mark.usefixtures("markitdown_installed")
async def test_read_markdown_bad_input(root: Path) -> None:
    t = tool_read_markdown()
    (root / "archive.tar").write_bytes(b"x")
    msg = await fails(root, t, path="archive.tar")
    assert "cannot convert archive.tar" in msg and ".docx" in msg and "read_file" in msg
    (root / "broken.docx").write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)  # a bad zip
    msg = await fails(root, t, path="broken.docx")
    assert msg.startswith("Could not convert broken.docx to markdown")
    assert "zip" in msg.lower()  # the converter's own reason is passed on
    assert "File not found: gone.pdf" in await fails(root, t, path="gone.pdf")
    assert "outside" in await fails(root, t, path=str(root.parent / "outside" / "x.html"))


async def test_read_markdown_without_markitdown_names_the_extra(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "markitdown", None)  # makes `import markitdown` fail
    (root / "page.html").write_text("<p>hi</p>")
    msg = await fails(root, tool_read_markdown(), path="page.html")
    assert "pip install 'deputy_shiny[docs-tools]'" in msg
    assert "markitdown" in msg


# ------------------------------------------------------------------ write_file


async def test_write_file_creates_file_and_parents(root: Path) -> None:
    out = await call(root, tool_write_file(), path="notes/2024/a.txt", content="héllo\n")
    assert (root / "notes" / "2024" / "a.txt").read_text(encoding="utf-8") == "héllo\n"
    assert out == (
        "Wrote 7 bytes to notes/2024/a.txt (created the file; created directories "
        "notes/, notes/2024/)."
    )


async def test_write_file_overwrites_atomically_and_keeps_mode(root: Path) -> None:
    target = root / "run.sh"
    target.write_text("old contents here\n")
    target.chmod(0o750)
    out = await call(root, tool_write_file(), path="run.sh", content="new\n")
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert out == "Wrote 4 bytes to run.sh (replaced 18 bytes)."
    assert tree(root) == ["run.sh"]  # no temporary file left behind


async def test_write_file_keeps_exact_content(root: Path) -> None:
    await call(root, tool_write_file(), path="crlf.txt", content="a\r\nb\r\n")
    assert (root / "crlf.txt").read_bytes() == b"a\r\nb\r\n"


async def test_write_file_failed_replace_leaves_original(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = root / "keep.txt"
    target.write_text("original\n")

    def broken_rename(src: Any, dst: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_safe_fs.os, "rename", broken_rename)
    msg = await fails(root, tool_write_file(), path="keep.txt", content="new\n")
    assert msg == "Could not write keep.txt: No space left on device."
    assert target.read_text() == "original\n"
    assert tree(root) == ["keep.txt"]


async def test_write_file_append(root: Path) -> None:
    t = tool_write_file()
    first = await call(root, t, path="log/app.log", content="one\n", mode="append")
    second = await call(root, t, path="log/app.log", content="two\n", mode="append")
    assert (root / "log" / "app.log").read_text() == "one\ntwo\n"
    assert first == "Appended 4 bytes to log/app.log (created the file; created directory log/)."
    assert second == "Appended 4 bytes to log/app.log (it now has 8 bytes)."


async def test_write_file_bad_input(root: Path) -> None:
    t = tool_write_file()
    (root / "dir").mkdir()
    (root / "plain").write_text("x")
    assert "is a directory" in await fails(root, t, path="dir", content="x")
    msg = await fails(root, t, path="plain/child.txt", content="x")
    assert "plain is a file, not a directory" in msg
    with pytest.raises(ToolArgumentsError):
        t.parse_arguments({"path": "a.txt", "content": "x", "mode": "truncate"})
    with pytest.raises(ToolArgumentsError):
        t.parse_arguments({"path": "a.txt"})


async def test_write_file_with_no_write_roots_writes_nothing(root: Path) -> None:
    msg = await fails(root, tool_write_file(), write=False, path="new/a.txt", content="x")
    assert "No directory is allowed to write" in msg
    assert tree(root) == []


# ------------------------------------------------------------------ edit_file


async def test_edit_file_replaces_one_exact_match(root: Path) -> None:
    (root / "app.py").write_text("def f():\n    return 1\n\nprint(f())\n")
    out = await call(
        root, tool_edit_file(), path="app.py", old_string="return 1", new_string="return 2"
    )
    assert (root / "app.py").read_text() == "def f():\n    return 2\n\nprint(f())\n"
    assert out == "Edited app.py: replaced 1 occurrence (line 2)."
    assert tree(root) == ["app.py"]


async def test_edit_file_multiple_matches_need_replace_all(root: Path) -> None:
    (root / "a.txt").write_text("x = 1\ny = 2\nx = 1\n\nx = 1\n")
    t = tool_edit_file()
    msg = await fails(root, t, path="a.txt", old_string="x = 1", new_string="x = 9")
    assert "matches 3 times (lines 1, 3, 5)" in msg
    assert "replace_all" in msg
    assert "not changed" in msg
    assert (root / "a.txt").read_text() == "x = 1\ny = 2\nx = 1\n\nx = 1\n"
    out = await call(
        root, t, path="a.txt", old_string="x = 1", new_string="x = 9", replace_all=True
    )
    assert (root / "a.txt").read_text() == "x = 9\ny = 2\nx = 9\n\nx = 9\n"
    assert out == "Edited a.txt: replaced 3 occurrences (lines 1, 3, 5)."


async def test_edit_file_not_found_with_whitespace_hint(root: Path) -> None:
    (root / "a.py").write_text("if x:\n\tdo()\n")
    t = tool_edit_file()
    msg = await fails(root, t, path="a.py", old_string="if x:\n    do()", new_string="y")
    assert "old_string was not found" in msg
    assert "whitespace is ignored" in msg
    msg = await fails(root, t, path="a.py", old_string="nothing like it", new_string="y")
    assert "old_string was not found" in msg
    assert "whitespace" not in msg
    msg = await fails(root, t, path="a.py", old_string="     2\tdo()", new_string="y")
    assert "line numbers" in msg


async def test_edit_file_adapts_to_windows_line_endings(root: Path) -> None:
    (root / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await call(root, tool_edit_file(), path="w.txt", old_string="one\ntwo", new_string="1\n2")
    assert (root / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_edit_file_bad_input(root: Path) -> None:
    t = tool_edit_file()
    (root / "a.txt").write_text("abc\n")
    (root / "bin.dat").write_bytes(b"ab\x00cd")
    (root / "latin.txt").write_bytes(b"caf\xe9\n")
    assert "File not found" in await fails(root, t, path="nope.txt", old_string="a", new_string="b")
    assert "old_string is empty" in await fails(
        root, t, path="a.txt", old_string="", new_string="b"
    )
    assert "identical" in await fails(root, t, path="a.txt", old_string="a", new_string="a")
    assert "binary file, 5 bytes" in await fails(
        root, t, path="bin.dat", old_string="a", new_string="b"
    )
    assert "not valid UTF-8" in await fails(
        root, t, path="latin.txt", old_string="caf", new_string="b"
    )
    assert (root / "latin.txt").read_bytes() == b"caf\xe9\n"


# ------------------------------------------------------------------ multi_edit


async def test_multi_edit_applies_in_order(root: Path) -> None:
    (root / "c.py").write_text("a = 1\nb = 2\nc = a + b\n")
    out = await call(
        root,
        tool_multi_edit(),
        path="c.py",
        edits=[
            {"old_string": "a = 1", "new_string": "alpha = 1"},
            {"old_string": "a + b", "new_string": "alpha + b"},
            {"old_string": "alpha", "new_string": "first", "replace_all": True},
        ],
    )
    assert (root / "c.py").read_text() == "first = 1\nb = 2\nc = first + b\n"
    assert out == "Edited c.py: applied 3 edits (4 replacements)."


async def test_multi_edit_failure_writes_nothing(root: Path) -> None:
    original = "one\ntwo\nthree\n"
    (root / "m.txt").write_text(original)
    msg = await fails(
        root,
        tool_multi_edit(),
        path="m.txt",
        edits=[
            {"old_string": "one", "new_string": "1"},
            {"old_string": "four", "new_string": "4"},
            {"old_string": "three", "new_string": "3"},
        ],
    )
    assert "edit 2 of 3 failed" in msg
    assert "old_string was not found" in msg
    assert "No edit was applied" in msg
    assert (root / "m.txt").read_text() == original
    assert tree(root) == ["m.txt"]


async def test_multi_edit_bad_input(root: Path) -> None:
    (root / "m.txt").write_text("x\n")
    t = tool_multi_edit()
    assert "edits is empty" in await fails(root, t, path="m.txt", edits=[])
    with pytest.raises(ToolArgumentsError, match=r"edits\[0\]\.new_string"):
        t.parse_arguments({"path": "m.txt", "edits": [{"old_string": "x"}]})
    with pytest.raises(ToolArgumentsError):
        t.parse_arguments(
            {"path": "m.txt", "edits": [{"old_string": "x", "new_string": "y", "oops": 1}]}
        )
    edits_schema = t.parameters["properties"]["edits"]
    assert edits_schema["type"] == "array"
    msg = await fails(
        root,
        t,
        path="m.txt",
        edits=[{"old_string": "x", "new_string": "y"}, {"old_string": "y", "new_string": "y"}],
    )
    assert "edit 2 of 2 failed" in msg and "identical" in msg
    assert (root / "m.txt").read_text() == "x\n"


# ------------------------------------------------------------------ list_files


def _populate(root: Path) -> None:
    (root / "b.txt").write_text("b")
    (root / "a.py").write_text("print('a')\n")
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("import os\n")
    (root / "src" / "lib").mkdir()
    (root / "src" / "lib" / "util.py").write_text("def util(): pass\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".env").write_text("TOKEN=abc\n")


async def test_list_files_sorted_with_trailing_slash(root: Path) -> None:
    _populate(root)
    out = await call(root, tool_list_files())
    assert out.splitlines() == [
        "Contents of the working directory: 3 entries",
        "a.py",
        "b.txt",
        "src/",
        "[2 hidden entries not shown; pass include_hidden=true to see them.]",
    ]


async def test_list_files_recursive_and_hidden(root: Path) -> None:
    _populate(root)
    t = tool_list_files()
    out = await call(root, t, path="src", recursive=True)
    assert out.splitlines() == [
        "Contents of src/ (recursive): 3 entries",
        "lib/",
        "lib/util.py",
        "main.py",
    ]
    everything = await call(root, t, recursive=True, include_hidden=True)
    assert ".git/" in everything.splitlines()
    assert ".git/config" in everything.splitlines()
    assert ".env" in everything.splitlines()
    assert "src/lib/util.py" in everything.splitlines()


async def test_list_files_cap(root: Path) -> None:
    for i in range(12):
        (root / f"f{i:02d}.txt").write_text("")
    out = await call(root, tool_list_files(), max_entries=5)
    lines = out.splitlines()
    assert lines[0] == "Contents of the working directory: 12 entries"
    assert lines[1:6] == ["f00.txt", "f01.txt", "f02.txt", "f03.txt", "f04.txt"]
    assert lines[6].startswith("[7 more not shown.")


async def test_list_files_bad_input(root: Path) -> None:
    (root / "a.txt").write_text("")
    (root / "empty").mkdir()
    t = tool_list_files()
    assert "is a file, not a directory" in await fails(root, t, path="a.txt")
    assert "Directory not found: nope" in await fails(root, t, path="nope")
    assert "max_entries must be at least 1" in await fails(root, t, max_entries=0)
    assert await call(root, t, path="empty") == "empty/ is empty."


async def test_list_files_skips_symlinks_out_of_the_root(root: Path) -> None:
    outside = root.parent / "outside"
    (root / "real.txt").write_text("x")
    (root / "inner").mkdir()
    os.symlink(outside, root / "out_dir")
    os.symlink(outside / "secret.txt", root / "out_file")
    os.symlink(outside / "not_yet.txt", root / "out_dangling")
    os.symlink(root / "real.txt", root / "in_link")
    os.symlink(root / "inner", root / "in_dir_link")
    out = await call(root, tool_list_files(), recursive=True)
    assert out.splitlines()[1:] == ["in_dir_link/", "in_link", "inner/", "real.txt"]
    assert "secret" not in out and "out_" not in out


# ------------------------------------------------------------------ glob_files


async def test_glob_files_patterns(root: Path) -> None:
    _populate(root)
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("# Guide\n")
    (root / ".github").mkdir()
    (root / ".github" / "ci.yml").write_text("on: push\n")
    t = tool_glob_files()
    assert (await call(root, t, pattern="*.py")).splitlines() == ["a.py"]
    assert (await call(root, t, pattern="**/*.py")).splitlines() == [
        "a.py",
        "src/lib/util.py",
        "src/main.py",
    ]
    assert (await call(root, t, pattern="**/*.{md,txt}")).splitlines() == [
        "b.txt",
        "docs/guide.md",
    ]
    assert (await call(root, t, pattern="*")).splitlines() == ["a.py", "b.txt", "docs/", "src/"]
    # hidden names only when the pattern spells out the dot
    assert "config" not in await call(root, t, pattern="**/*")
    assert (await call(root, t, pattern=".github/*.yml")).splitlines() == [".github/ci.yml"]
    assert (await call(root, t, pattern=".*")).splitlines() == [".env", ".git/", ".github/"]


async def test_glob_files_relative_to_working_dir_and_cap(root: Path) -> None:
    _populate(root)
    t = tool_glob_files()
    assert (await call(root, t, pattern="**/*.py", path="src")).splitlines() == [
        "src/lib/util.py",
        "src/main.py",
    ]
    for i in range(8):
        (root / f"n{i}.txt").write_text("")
    out = await call(root, t, pattern="n*.txt", max_results=3)
    assert out.splitlines() == [
        "n0.txt",
        "n1.txt",
        "n2.txt",
        "[5 more not shown (8 matches). Narrow the pattern or path, or raise max_results.]",
    ]
    assert await call(root, t, pattern="*.rs") == "No files match '*.rs' in the working directory."


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("../outside/*", "'..'"),
        ("src/../../outside/*", "'..'"),
        ("..\\outside\\*", "'..'"),
        ("/etc/*", "absolute"),
        ("C:/Windows/*", "absolute"),
        ("~/.ssh/*", "home directory"),
        ("", "empty"),
    ],
)
async def test_glob_files_refuses_escaping_patterns(root: Path, pattern: str, words: str) -> None:
    msg = await fails(root, tool_glob_files(), pattern=pattern)
    assert words in msg


async def test_glob_files_skips_symlinks_out_of_the_root(root: Path) -> None:
    outside = root.parent / "outside"
    (root / "ok.txt").write_text("")
    os.symlink(outside, root / "out_dir")
    os.symlink(outside / "secret.txt", root / "out_file.txt")
    os.symlink(outside / "missing.txt", root / "dangling.txt")
    os.symlink(root / "ok.txt", root / "in_link.txt")
    t = tool_glob_files()
    assert (await call(root, t, pattern="**/*")).splitlines() == ["in_link.txt", "ok.txt"]
    assert (await call(root, t, pattern="*.txt")).splitlines() == ["in_link.txt", "ok.txt"]
    assert "No files match" in await call(root, t, pattern="out_dir/*")
    assert "outside" in await fails(root, t, pattern="*", path="out_dir")


# ------------------------------------------------------------------ grep_files


async def test_grep_files_finds_lines(root: Path) -> None:
    _populate(root)
    (root / ".git" / "HEAD").write_text("import nothing\n")
    (root / "blob.bin").write_bytes(b"import\x00binary")
    t = tool_grep_files()
    out = await call(root, t, pattern=r"^import \w+")
    assert out.splitlines() == ["src/main.py:1: import os"]
    out = await call(root, t, pattern="DEF", ignore_case=True)
    assert out.splitlines() == ["src/lib/util.py:1: def util(): pass"]
    out = await call(root, t, pattern="print|util", glob="*.py")
    assert out.splitlines() == ["a.py:1: print('a')", "src/lib/util.py:1: def util(): pass"]
    out = await call(root, t, pattern=".", glob="src/**/*.py")
    assert [line.split(":")[0] for line in out.splitlines()] == ["src/lib/util.py", "src/main.py"]
    out = await call(root, t, pattern="TOKEN", glob=".env")
    assert out.splitlines() == [".env:1: TOKEN=abc"]
    assert await call(root, t, pattern="TOKEN") == (
        "No matches for 'TOKEN' in the working directory (4 files searched)."
    )


async def test_grep_files_single_file_and_line_numbers(root: Path) -> None:
    (root / "log.txt").write_text("ok\r\nerror: disk\nok\nerror: net\n")
    out = await call(root, tool_grep_files(), pattern="^error", path="log.txt")
    assert out.splitlines() == ["log.txt:2: error: disk", "log.txt:4: error: net"]


async def test_grep_files_anchors_apply_per_line(root: Path) -> None:
    (root / "log.txt").write_text("ok\nerror one\n  error two\n")
    t = tool_grep_files()
    assert (await call(root, t, pattern=r"\Aerror")).splitlines() == ["log.txt:2: error one"]
    assert (await call(root, t, pattern=r"(?<!\s)error")).splitlines() == ["log.txt:2: error one"]
    assert (await call(root, t, pattern=r"two$")).splitlines() == ["log.txt:3:   error two"]


async def test_grep_files_cap(root: Path) -> None:
    (root / "many.txt").write_text("hit\n" * 30)
    out = await call(root, tool_grep_files(), pattern="hit", max_results=5)
    lines = out.splitlines()
    assert lines[:5] == [f"many.txt:{i}: hit" for i in range(1, 6)]
    assert lines[5].startswith("[5 matches shown, 25 more not shown.")


async def test_grep_files_bad_input(root: Path) -> None:
    (root / "bin.dat").write_bytes(b"\x00\x01")
    t = tool_grep_files()
    msg = await fails(root, t, pattern="foo(")
    assert "Invalid regular expression 'foo('" in msg
    assert "backslash" in msg
    assert "binary file" in await fails(root, t, pattern="x", path="bin.dat")
    assert "'..'" in await fails(root, t, pattern="x", glob="../*.txt")
    assert "Directory not found" in await fails(root, t, pattern="x", path="nope")


async def test_grep_files_skips_symlinks_out_of_the_root(root: Path) -> None:
    outside = root.parent / "outside"
    (root / "mine.txt").write_text("secret of mine\n")
    os.symlink(outside, root / "out_dir")
    os.symlink(outside / "secret.txt", root / "out_file.txt")
    out = await call(root, tool_grep_files(), pattern="secret")
    assert out.splitlines() == ["mine.txt:1: secret of mine"]


# ------------------------------------------------------------------ path escapes, every tool

READ_CALLS: dict[str, dict[str, Any]] = {
    "read_file": {},
    "read_markdown": {},
    "list_files": {},
    "glob_files": {"pattern": "*"},
    "grep_files": {"pattern": "secret"},
}
WRITE_CALLS: dict[str, dict[str, Any]] = {
    "write_file": {"content": "pwned\n"},
    "edit_file": {"old_string": "secret", "new_string": "pwned"},
    "multi_edit": {"edits": [{"old_string": "secret", "new_string": "pwned"}]},
}


def _escapes(root: Path) -> dict[str, tuple[str, str, str]]:
    """name -> (path for files, path for dirs, expected rule words)."""
    outside = root.parent / "outside"
    os.symlink(outside / "secret.txt", root / "link_file")
    os.symlink(outside, root / "link_dir")
    os.symlink(outside / "new.txt", root / "dangling")
    os.symlink(outside / "newdir", root / "dangling_dir")
    return {
        "dotdot": ("../outside/secret.txt", "../outside", "'..'"),
        "absolute": (str(outside / "secret.txt"), str(outside), "outside the directories"),
        "sibling_prefix": (
            str(root.parent / "data2" / "twin.txt"),
            str(root.parent / "data2"),
            "outside the directories",
        ),
        "symlink": ("link_file", "link_dir", "symbolic link"),
        "dangling_symlink": ("dangling", "dangling_dir", "symbolic link"),
        "home": ("~/secret.txt", "~", "home directory"),
    }


@pytest.mark.parametrize("name", list(READ_CALLS))
async def test_read_tools_refuse_paths_out_of_the_root(root: Path, name: str) -> None:
    escapes = _escapes(root)
    for case, (file_path, dir_path, words) in escapes.items():
        path = dir_path if name in ("list_files", "glob_files", "grep_files") else file_path
        msg = await fails(root, FACTORIES[name](), path=path, **READ_CALLS[name])
        assert words in msg, (case, msg)
        assert "top secret" not in msg and "sibling secret" not in msg


@pytest.mark.parametrize("name", list(WRITE_CALLS))
async def test_write_tools_refuse_paths_out_of_the_root(root: Path, name: str) -> None:
    escapes = _escapes(root)
    outside = root.parent / "outside"
    before_outside, before_root = tree(outside), tree(root)
    for case, (file_path, _, words) in escapes.items():
        msg = await fails(root, FACTORIES[name](), path=file_path, **WRITE_CALLS[name])
        assert words in msg, (case, msg)
    if name == "write_file":  # also through directories that do not exist yet
        for path in ("link_dir/a/b/c.txt", "dangling_dir/x.txt", "../outside/new/x.txt"):
            await fails(root, FACTORIES[name](), path=path, **WRITE_CALLS[name])
    assert tree(outside) == before_outside
    assert tree(root) == before_root
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert (root.parent / "data2" / "twin.txt").read_text() == "sibling secret\n"


async def test_read_roots_do_not_grant_writes(root: Path) -> None:
    """A directory readable through read_roots is not writable unless in write_roots."""
    extra = root.parent / "outside"
    ctx = ToolContext(working_dir=root, read_roots=(root, extra), write_roots=(root,))
    with tool_context(ctx):
        read = tool_read_file()
        assert "top secret" in await read.invoke(
            read.parse_arguments({"path": str(extra / "secret.txt")})
        )
        write = tool_write_file()
        with pytest.raises(ToolInvocationError, match="outside the directories"):
            await write.invoke(
                write.parse_arguments({"path": str(extra / "x.txt"), "content": "x"})
            )
    assert not (extra / "x.txt").exists()


# ------------------------------------------------------------------ through a real Agent


async def test_agent_writes_then_reads_a_file(tmp_path: Path) -> None:
    from deputy_shiny import Agent
    from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

    model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=[
                    ScriptedToolCall(
                        "write_file",
                        {"path": "out/hello.txt", "content": "hello\nworld\n"},
                        id="w",
                    )
                ]
            ),
            ScriptedReply(
                tool_calls=[ScriptedToolCall("read_file", {"path": "out/hello.txt"}, id="r")]
            ),
            ScriptedReply(
                tool_calls=[ScriptedToolCall("read_file", {"path": "../escape.txt"}, id="x")]
            ),
            "Done.",
        ]
    )
    (tmp_path / "work").mkdir()
    (tmp_path / "escape.txt").write_text("ESCAPED CONTENT")
    agent = Agent(model, tools=[tool_write_file(), tool_read_file()], working_dir=tmp_path / "work")
    result = await agent.run_async("Write and read a file")
    assert result.response == "Done."
    assert (tmp_path / "work" / "out" / "hello.txt").read_text() == "hello\nworld\n"
    ends = {e.call_id: e for e in result.events if e.type == "tool_end"}
    assert ends["w"].is_error is False
    assert ends["w"].output.startswith("Wrote 12 bytes to out/hello.txt")
    assert ends["r"].is_error is False
    assert ends["r"].output == "     1\thello\n     2\tworld\n\n[out/hello.txt: all 2 lines shown.]"
    assert ends["x"].is_error is True
    assert "'..'" in ends["x"].output
    assert "ESCAPED" not in ends["x"].output
    tool_message = model.requests[2]["messages"][-1]
    assert tool_message["content"] == ends["r"].output


def test_doc_example_runs_outside_an_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside an agent the tools use the current directory (the default context)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.txt").write_text("hi\n")
    assert tool_read_file()(path="x.txt").startswith("     1\thi")
    assert "x.txt" in tool_list_files()()


async def test_grep_files_releases_the_walks_descriptors_when_it_stops_early(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deputy_shiny.tools import files_search

    for i in range(5):
        (root / f"d{i}" / "sub").mkdir(parents=True)
        (root / f"d{i}" / "sub" / "f.txt").write_text("some text\n")

    def over_budget(self: Any, compiled: Any, text: str) -> bool:
        raise ToolInvocationError("The pattern is too expensive.")

    monkeypatch.setattr(files_search._BoundedSearch, "__call__", over_budget)
    before = sorted(os.listdir("/proc/self/fd"))
    assert "too expensive" in await fails(root, tool_grep_files(), pattern="text")
    assert sorted(os.listdir("/proc/self/fd")) == before
