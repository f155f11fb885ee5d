"""The reading file tools: ``read_file`` (numbered lines, paged) and ``read_markdown``.

Part of :mod:`deputy_shiny.tools.files`, which documents the tools' shared rules.
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path
from typing import IO, Any

from .._util.text import plural
from ..errors import ToolInvocationError
from ._context import current_tool_context
from ._files_common import (
    _READ_ANNOTATIONS,
    _SNIFF_BYTES,
    DEFAULT_LINE_LIMIT,
    DOCS_TOOLS_INSTALL,
    MARKDOWN_SUFFIXES,
    MAX_LINE_CHARS,
    MAX_MARKDOWN_BYTES,
    MAX_OUTPUT_CHARS,
    MAX_READ_BYTES,
    _check_positive,
    _confined,
    _open_file,
    _show,
    _size,
)
from ._tool import Tool, builtin_source, tool

# --------------------------------------------------------------------------- line windows


def _next_line(fh: IO[bytes], cap: int) -> tuple[bytes, int] | None:
    """The next line's first ``cap`` bytes and its full length, consuming the whole line."""
    head = fh.readline(cap)
    if not head:
        return None
    total = len(head)
    tail = head
    while not tail.endswith(b"\n"):
        tail = fh.readline(1 << 16)
        if not tail:
            break
        total += len(tail)
    return head, total


def _count_rest(fh: IO[bytes]) -> int:
    """How many lines remain (from a line boundary to the end of the file)."""
    lines = 0
    last = b""
    while chunk := fh.read(1 << 20):
        lines += chunk.count(b"\n")
        last = chunk[-1:]
    if last and last != b"\n":
        lines += 1
    return lines


def _cut_line(text: str, full_bytes: int, cut: bool) -> str:
    if cut or len(text) > MAX_LINE_CHARS:
        return (
            f"{text[:MAX_LINE_CHARS]}… [line cut at {MAX_LINE_CHARS} characters; "
            f"it has {_size(full_bytes)}]"
        )
    return text


def _window_footer(shown: str, offset: int, shown_count: int, total: int, what: str) -> str:
    last = offset + shown_count
    if last < total:
        return (
            f"[{what} {shown}: lines {offset + 1}-{last} of {total} shown (truncated). "
            f"Continue with offset={last}.]"
        )
    if offset > 0:
        return f"[{what} {shown}: lines {offset + 1}-{total} of {total} shown (end of file).]"
    return f"[{shown}: all {plural(total, 'line')} shown.]"


def _past_end(shown: str, offset: int, total: int) -> ToolInvocationError:
    return ToolInvocationError(
        f"offset={offset} is past the end of {shown}, which has {plural(total, 'line')}; "
        f"use an offset below {total}."
    )


# --------------------------------------------------------------------------- read_file


def _read_file(path: str, offset: int = 0, limit: int | None = None) -> str:
    """Read a text file, numbered like cat -n.

    Args:
        path: The file, relative to the working directory (or absolute inside it).
        offset: How many lines to skip before the first line shown (0 = from the start).
        limit: How many lines to show (default 2000). Needed for files over 10 MB.
    """
    ctx = current_tool_context()
    target = _confined(path, ctx, "read")
    shown = _show(target, ctx)
    _check_positive("offset", offset, minimum=0)
    if limit is not None:
        _check_positive("limit", limit)
    fh, info = _open_file(target, shown, ctx)
    size = info.st_size
    count = limit if limit is not None else DEFAULT_LINE_LIMIT
    numbered: list[str] = []
    chars = 0
    consumed = 0
    with fh:
        if size > MAX_READ_BYTES and offset == 0 and limit is None:
            raise ToolInvocationError(
                f"{shown} is {_size(size)}, more than the {_size(MAX_READ_BYTES)} read_file "
                "reads in one go. Read it in parts with offset and limit (e.g. offset=0, "
                "limit=500), or search it with grep_files."
            )
        if b"\0" in fh.read(_SNIFF_BYTES):
            raise ToolInvocationError(
                f"{shown} is a binary file, {size} bytes; read_file reads text only. For PDF, "
                "Word, PowerPoint or Excel documents use read_markdown."
            )
        fh.seek(0)
        while consumed < offset + count:
            item = _next_line(fh, MAX_LINE_CHARS * 4)
            if item is None:
                break
            consumed += 1
            if consumed <= offset:
                continue
            raw, full = item
            body = raw[:-1] if raw.endswith(b"\n") else raw
            body = body[:-1] if body.endswith(b"\r") else body
            text = body.decode("utf-8", errors="replace")
            if consumed == 1:
                text = text.removeprefix("\ufeff")
            entry = f"{consumed:6d}\t{_cut_line(text, full, full > len(raw))}"
            if numbered and chars + len(entry) + 1 > MAX_OUTPUT_CHARS:
                break  # this line is consumed but not shown; the footer says where to go on
            numbered.append(entry)
            chars += len(entry) + 1
        total = consumed + _count_rest(fh)
    if total == 0:
        return f"[{shown} is empty: 0 lines.]"
    if offset >= total:
        raise _past_end(shown, offset, total)
    footer = _window_footer(shown, offset, len(numbered), total, "File")
    return "\n".join(numbered) + "\n\n" + footer


def tool_read_file() -> Tool:
    """A fresh ``read_file`` tool: read a text file in numbered lines, paged by offset/limit.

    Examples:
        >>> t = tool_read_file()
        >>> t.name, sorted(t.parameters["properties"])
        ('read_file', ['limit', 'offset', 'path'])
    """
    return tool(
        _read_file,
        name="read_file",
        description=(
            "Read a text file. Lines come numbered like `cat -n` (line number, a tab, then "
            "the line); the numbers are not part of the file, so leave them out of "
            "edit_file's old_string. Shows up to 2000 lines per call: page through longer "
            "files with offset and limit. Lines longer than 2000 characters are cut. The "
            "last line says how many lines the file has and whether the output was "
            "truncated. Binary files are refused; use read_markdown for PDF and Office "
            "documents."
        ),
        annotations=_READ_ANNOTATIONS,
        source=builtin_source("read"),
    )


# --------------------------------------------------------------------------- read_markdown


_converter_lock = threading.Lock()
_converter: tuple[Any, Any] | None = None  # (markitdown module, MarkItDown instance)


def _markitdown() -> Any:
    try:
        return importlib.import_module("markitdown")
    except ImportError:
        raise ToolInvocationError(
            "read_markdown needs the optional package 'markitdown', which is not installed. "
            f"Install it with: {DOCS_TOOLS_INSTALL}. Plain text files can be read with "
            "read_file meanwhile."
        ) from None


def _convert_to_markdown(fh: IO[bytes], target: Path) -> str:
    """Convert the opened document ``fh`` (opened beneath its root: markitdown never opens
    the path by name, so a link swapped in after the check cannot be followed)."""
    global _converter
    module = _markitdown()
    with _converter_lock:
        if _converter is None or _converter[0] is not module:
            _converter = (module, module.MarkItDown(enable_plugins=False))
        info = module.StreamInfo(
            extension=target.suffix.lower(), filename=target.name, local_path=None
        )
        result = _converter[1].convert_stream(fh, stream_info=info)
    text = getattr(result, "markdown", None)
    if text is None:
        text = getattr(result, "text_content", "")
    return str(text or "")


def _read_markdown(path: str, offset: int = 0, limit: int = DEFAULT_LINE_LIMIT) -> str:
    """Convert a document to markdown.

    Args:
        path: The document, relative to the working directory (or absolute inside it).
        offset: How many lines of the markdown to skip (0 = from the start).
        limit: How many lines of the markdown to show.
    """
    ctx = current_tool_context()
    target = _confined(path, ctx, "read")
    shown = _show(target, ctx)
    _check_positive("offset", offset, minimum=0)
    _check_positive("limit", limit)
    suffix = target.suffix.lower()
    if suffix not in MARKDOWN_SUFFIXES:
        raise ToolInvocationError(
            f"read_markdown cannot convert {shown}: it reads {', '.join(MARKDOWN_SUFFIXES)} "
            "files. Use read_file for other text files."
        )
    fh, info = _open_file(target, shown, ctx)
    try:
        with fh:
            if info.st_size > MAX_MARKDOWN_BYTES:
                raise ToolInvocationError(
                    f"{shown} is {_size(info.st_size)}, more than the "
                    f"{_size(MAX_MARKDOWN_BYTES)} read_markdown converts."
                )
            markdown = _convert_to_markdown(fh, target)
    except ToolInvocationError:
        raise
    except Exception as exc:
        detail = " ".join(str(exc).split())[:400] or "no details"
        raise ToolInvocationError(
            f"Could not convert {shown} to markdown ({type(exc).__name__}: {detail}). "
            "The file may be damaged or not really a "
            f"{suffix.lstrip('.').upper()} file."
        ) from None
    lines = markdown.splitlines()
    total = len(lines)
    if total == 0:
        return f"[{shown} converted to empty markdown: the document has no extractable text.]"
    if offset >= total:
        raise _past_end(shown, offset, total)
    out: list[str] = []
    chars = 0
    for line in lines[offset : offset + limit]:
        entry = _cut_line(line, len(line.encode()), False)
        if out and chars + len(entry) + 1 > MAX_OUTPUT_CHARS:
            break
        out.append(entry)
        chars += len(entry) + 1
    footer = _window_footer(shown, offset, len(out), total, "Markdown of")
    return "\n".join(out) + "\n\n" + footer


def tool_read_markdown() -> Tool:
    """A fresh ``read_markdown`` tool: PDF, DOCX, PPTX, XLSX, HTML and text files as markdown.

    Needs the optional ``markitdown`` package (``pip install 'deputy_shiny[docs-tools]'``);
    without it the tool answers with an error saying so.

    Examples:
        >>> tool_read_markdown().name
        'read_markdown'
    """
    return tool(
        _read_markdown,
        name="read_markdown",
        description=(
            "Convert a document to markdown and read it: PDF, Word (.docx), PowerPoint "
            "(.pptx), Excel (.xlsx), HTML, and text formats (.txt, .md, .csv, .json, .xml, "
            ".ipynb). Shows up to 2000 lines of the markdown per call; page with offset and "
            "limit. The last line says how many lines there are."
        ),
        annotations=_READ_ANNOTATIONS,
        source=builtin_source("read"),
    )
