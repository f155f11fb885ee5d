"""File tools: read, convert, write, edit, list, glob and grep inside the agent's directories.

Every tool resolves its ``path`` with :func:`deputy_shiny._paths.confine` against the
:class:`~deputy_shiny.tools.ToolContext` of the call: reads stay inside ``read_roots``,
writes inside ``write_roots``. The permission layer checks the same policy first; this
is defence in depth. Walks (``list_files``, ``glob_files``, ``grep_files``) never follow
a symbolic link out of the roots: such links are skipped, never listed, and symlinked
directories are never descended into. Problems come back to the model as
:class:`~deputy_shiny.errors.ToolInvocationError` messages that say what to do next.

``read_markdown`` converts PDF, Word, PowerPoint, Excel and HTML documents with
Microsoft's ``markitdown``, an optional dependency (``pip install 'deputy_shiny[docs-tools]'``).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from deputy_shiny.tools import ToolContext, tool_context
    >>> root = Path(tempfile.mkdtemp()).resolve()
    >>> _ = (root / "hello.txt").write_text("hi\\nthere\\n")
    >>> read = tool_read_file()
    >>> with tool_context(ToolContext(working_dir=root, read_roots=(root,), write_roots=())):
    ...     print(read(path="hello.txt"))  # doctest: +NORMALIZE_WHITESPACE
         1	hi
         2	there
    <BLANKLINE>
    [hello.txt: all 2 lines shown.]
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import importlib
import os
import re
import secrets
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._paths import PathDenied, confine
from .._text import plural
from ..errors import ToolInvocationError
from ._context import ToolContext, current_tool_context
from ._tool import Tool, builtin_source, tool, tool_annotations

__all__ = [
    "FileEdit",
    "tool_edit_file",
    "tool_glob_files",
    "tool_grep_files",
    "tool_list_files",
    "tool_multi_edit",
    "tool_read_file",
    "tool_read_markdown",
    "tool_write_file",
]

_READ_ANNOTATIONS = tool_annotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=False, idempotent_hint=True
)
_WRITE_ANNOTATIONS = tool_annotations(
    read_only_hint=False, destructive_hint=True, open_world_hint=False, idempotent_hint=False
)

MAX_READ_BYTES = 10 * 1024 * 1024
"""read_file reads a larger file only in parts (with ``limit``); edits refuse larger files."""
MAX_MARKDOWN_BYTES = 50 * 1024 * 1024
"""read_markdown refuses larger documents."""
DEFAULT_LINE_LIMIT = 2000
MAX_LINE_CHARS = 2000
MAX_OUTPUT_CHARS = 100_000
MAX_GREP_LINE_CHARS = 500
MAX_SCAN_ENTRIES = 200_000
"""Walks stop after this many directory entries (and say so)."""

_SNIFF_BYTES = 8192
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)

DOCS_TOOLS_INSTALL = "pip install 'deputy_shiny[docs-tools]'"

_DOCUMENT_SUFFIXES = (".pdf", ".docx", ".pptx", ".xlsx", ".html", ".htm", ".xhtml")
_TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst", ".csv", ".json", ".xml", ".ipynb")
MARKDOWN_SUFFIXES = _DOCUMENT_SUFFIXES + _TEXT_SUFFIXES
"""The file types read_markdown converts."""


# --------------------------------------------------------------------------- helpers


def _confined(path: str, ctx: ToolContext, what: Literal["read", "write"]) -> Path:
    roots = ctx.read_roots if what == "read" else ctx.write_roots
    try:
        return confine(path, ctx.working_dir, roots, what=what)
    except PathDenied as exc:
        raise ToolInvocationError(str(exc)) from None


def _show(target: Path, ctx: ToolContext, *, is_dir: bool = False) -> str:
    """The path as the model should write it: relative to the working dir when inside."""
    base = Path(os.path.realpath(ctx.working_dir))
    try:
        text = target.relative_to(base).as_posix()
    except ValueError:
        text = str(target)
    if is_dir and text != "." and not text.endswith("/"):
        text += "/"
    return text


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def _os_problem(exc: OSError, doing: str, shown: str) -> ToolInvocationError:
    reason = exc.strerror or type(exc).__name__
    return ToolInvocationError(f"Could not {doing} {shown}: {reason}.")


def _require_file(target: Path, shown: str) -> os.stat_result:
    try:
        st = target.stat()
    except FileNotFoundError:
        raise ToolInvocationError(
            f"File not found: {shown}. Check the path with list_files or glob_files."
        ) from None
    except OSError as exc:
        raise _os_problem(exc, "access", shown) from None
    if stat.S_ISDIR(st.st_mode):
        raise ToolInvocationError(f"{shown} is a directory, not a file; use list_files on it.")
    if not stat.S_ISREG(st.st_mode):
        raise ToolInvocationError(f"{shown} is not a regular file.")
    return st


def _require_dir(target: Path, shown: str) -> None:
    if not target.exists():
        raise ToolInvocationError(f"Directory not found: {shown}. Check the path with list_files.")
    if not target.is_dir():
        raise ToolInvocationError(
            f"{shown} is a file, not a directory; read it with read_file instead."
        )


def _open_binary(target: str | Path, shown: str) -> IO[bytes]:
    """Open a confined (already resolved) path for reading, never through a swapped-in link."""
    try:
        fd = os.open(target, os.O_RDONLY | _NOFOLLOW | _BINARY)
    except OSError as exc:
        raise _os_problem(exc, "open", shown) from None
    return os.fdopen(fd, "rb")


def _check_positive(name: str, value: int, *, minimum: int = 1) -> None:
    if value < minimum:
        raise ToolInvocationError(f"{name} must be at least {minimum}, got {value}.")


def _read_text_for_edit(target: Path, shown: str) -> str:
    st = _require_file(target, shown)
    if st.st_size > MAX_READ_BYTES:
        raise ToolInvocationError(
            f"{shown} is {_size(st.st_size)}, more than the {_size(MAX_READ_BYTES)} the edit "
            "tools handle."
        )
    with _open_binary(target, shown) as fh:
        data = fh.read()
    if b"\0" in data[:_SNIFF_BYTES]:
        raise ToolInvocationError(
            f"{shown} is a binary file, {len(data)} bytes; only text can be edited."
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolInvocationError(
            f"{shown} is not valid UTF-8 text, so it cannot be edited safely; rewrite it "
            "whole with write_file if that is intended."
        ) from None


def _atomic_write(target: Path, data: bytes, shown: str) -> None:
    """Write ``data`` to a temporary file beside ``target``, then ``os.replace`` it into place.

    An existing file keeps its permission bits; a new one gets the process umask's.
    """
    try:
        keep_mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        keep_mode = None
    except OSError as exc:
        raise _os_problem(exc, "write", shown) from None
    temp = target.parent / f".{target.name[:80]}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY, 0o666)
    except OSError as exc:
        raise _os_problem(exc, "write", shown) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if keep_mode is not None:
            os.chmod(temp, keep_mode)
        os.replace(temp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            raise _os_problem(exc, "write", shown) from None
        raise


def _make_parents(target: Path, ctx: ToolContext) -> list[Path]:
    """Create the missing parent directories of ``target`` (each checked against the roots)."""
    missing: list[Path] = []
    parent = target.parent
    while not parent.exists() and not parent.is_symlink():
        missing.append(parent)
        if parent.parent == parent:
            break
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise ToolInvocationError(
            f"Cannot create {_show(target, ctx)}: {_show(parent, ctx)} is a file, not a directory."
        )
    for directory in reversed(missing):
        _confined(str(directory), ctx, "write")  # never create anything outside the roots
        try:
            os.mkdir(directory)
        except FileExistsError:
            if not directory.is_dir():
                raise ToolInvocationError(
                    f"Cannot create {_show(target, ctx)}: {_show(directory, ctx)} is not a "
                    "directory."
                ) from None
        except OSError as exc:
            raise _os_problem(exc, "create directory", _show(directory, ctx)) from None
    return list(reversed(missing))


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
    size = _require_file(target, shown).st_size
    if size > MAX_READ_BYTES and offset == 0 and limit is None:
        raise ToolInvocationError(
            f"{shown} is {_size(size)}, more than the {_size(MAX_READ_BYTES)} read_file reads "
            "in one go. Read it in parts with offset and limit (e.g. offset=0, limit=500), or "
            "search it with grep_files."
        )
    count = limit if limit is not None else DEFAULT_LINE_LIMIT
    numbered: list[str] = []
    chars = 0
    consumed = 0
    with _open_binary(target, shown) as fh:
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

    Example:
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


def _convert_to_markdown(target: Path) -> str:
    global _converter
    module = _markitdown()
    with _converter_lock:
        if _converter is None or _converter[0] is not module:
            _converter = (module, module.MarkItDown(enable_plugins=False))
        result = _converter[1].convert_local(str(target))
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
    size = _require_file(target, shown).st_size
    if size > MAX_MARKDOWN_BYTES:
        raise ToolInvocationError(
            f"{shown} is {_size(size)}, more than the {_size(MAX_MARKDOWN_BYTES)} read_markdown "
            "converts."
        )
    try:
        markdown = _convert_to_markdown(target)
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

    Example:
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


# --------------------------------------------------------------------------- write_file


def _write_file(path: str, content: str, mode: Literal["write", "append"] = "write") -> str:
    """Write or append text to a file.

    Args:
        path: The file, relative to the working directory (or absolute inside it).
        content: The text to write (UTF-8).
        mode: "write" replaces the whole file (creating it if needed); "append" adds to its end.
    """
    ctx = current_tool_context()
    target = _confined(path, ctx, "write")
    shown = _show(target, ctx)
    if target.is_dir():
        raise ToolInvocationError(f"{shown} is a directory; give a file path to write to.")
    data = content.encode("utf-8", errors="replace")
    created = _make_parents(target, ctx)
    try:
        previous: int | None = target.stat().st_size
    except FileNotFoundError:
        previous = None
    if mode == "write":
        _atomic_write(target, data, shown)
        what = f"Wrote {_size(len(data))} to {shown}"
        how = "created the file" if previous is None else f"replaced {_size(previous)}"
    else:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _BINARY
        try:
            fd = os.open(target, flags, 0o666)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise _os_problem(exc, "append to", shown) from None
        what = f"Appended {_size(len(data))} to {shown}"
        how = (
            "created the file" if previous is None else f"it now has {_size(previous + len(data))}"
        )
    if created:
        dirs = ", ".join(_show(d, ctx, is_dir=True) for d in created)
        how += f"; created {'directory' if len(created) == 1 else 'directories'} {dirs}"
    return f"{what} ({how})."


def tool_write_file() -> Tool:
    """A fresh ``write_file`` tool: write (atomically) or append text, creating parent dirs.

    Example:
        >>> t = tool_write_file()
        >>> t.name, t.parameters["properties"]["mode"]["enum"]
        ('write_file', ['write', 'append'])
    """
    return tool(
        _write_file,
        name="write_file",
        description=(
            "Write text to a file, creating it and any missing parent directories. "
            'mode="write" (the default) replaces the whole file; mode="append" adds to its '
            "end. To change part of an existing file, prefer edit_file."
        ),
        annotations=_WRITE_ANNOTATIONS,
        source=builtin_source("write"),
    )


# --------------------------------------------------------------------------- edits


class FileEdit(BaseModel):
    """One exact-text replacement for ``multi_edit``.

    Example:
        >>> FileEdit(old_string="a", new_string="b").replace_all
        False
    """

    model_config = ConfigDict(extra="forbid")

    old_string: str = Field(description="The exact text to replace (must match the file).")
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(
        default=False, description="Replace every occurrence instead of exactly one."
    )


class _EditProblem(Exception):
    pass


_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+\t")


def _positions(text: str, old: str) -> list[int]:
    found: list[int] = []
    i = text.find(old)
    while i != -1:
        found.append(i)
        i = text.find(old, i + len(old))
    return found


def _line_numbers(text: str, positions: list[int]) -> list[int]:
    lines: list[int] = []
    line, last = 1, 0
    for pos in positions:
        line += text.count("\n", last, pos)
        last = pos
        lines.append(line)
    return lines


def _list_lines(lines: list[int]) -> str:
    head = ", ".join(str(n) for n in lines[:20])
    return head + (f", … ({len(lines) - 20} more)" if len(lines) > 20 else "")


def _not_found_hint(text: str, old: str) -> str:
    hints: list[str] = []
    old_lines = [ln for ln in old.split("\n") if ln.strip()]
    if old_lines and all(_LINE_NUMBER_PREFIX.match(ln) for ln in old_lines):
        hints.append(
            "old_string seems to include the line numbers read_file shows (a number and a "
            "tab); leave them out."
        )
    squeezed = " ".join(old.split())
    if squeezed and squeezed in " ".join(text.split()):
        hints.append(
            "It does match if whitespace is ignored: the indentation, tabs, spaces or line "
            "breaks differ. Copy the exact text from read_file (without the line numbers)."
        )
    elif squeezed and squeezed.lower() in " ".join(text.split()).lower():
        hints.append("It does match if case and whitespace are ignored: check the capitalisation.")
    if not hints:
        hints.append("Read the file again with read_file and copy the text exactly.")
    return " " + " ".join(hints)


def _apply_edit(text: str, old: str, new: str, replace_all: bool) -> tuple[str, list[int]]:
    """Replace ``old`` by ``new`` in ``text``; return the new text and the matched line numbers."""
    if old == "":
        raise _EditProblem(
            "old_string is empty; give the exact text to replace (to create or rewrite a "
            "whole file, use write_file)."
        )
    if old == new:
        raise _EditProblem("old_string and new_string are identical; there is nothing to change.")
    positions = _positions(text, old)
    if not positions and "\r\n" in text and "\n" in old and "\r\n" not in old:
        # The file has Windows line endings; the model wrote Unix ones.
        crlf_old = old.replace("\n", "\r\n")
        positions = _positions(text, crlf_old)
        if positions:
            old, new = crlf_old, new.replace("\r\n", "\n").replace("\n", "\r\n")
    if not positions:
        raise _EditProblem("old_string was not found." + _not_found_hint(text, old))
    lines = _line_numbers(text, positions)
    if len(positions) > 1 and not replace_all:
        raise _EditProblem(
            f"old_string matches {len(positions)} times (lines {_list_lines(lines)}). Include "
            "more surrounding text to make it unique, or pass replace_all=true to replace "
            "every occurrence."
        )
    if replace_all:
        return text.replace(old, new), lines
    pos = positions[0]
    return text[:pos] + new + text[pos + len(old) :], lines


def _edit_file(path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
    """Replace exact text in a file.

    Args:
        path: The file, relative to the working directory (or absolute inside it).
        old_string: The exact text to replace, as in the file (without read_file's line numbers).
        new_string: The text to put in its place.
        replace_all: Replace every occurrence instead of exactly one.
    """
    ctx = current_tool_context()
    target = _confined(path, ctx, "write")
    shown = _show(target, ctx)
    text = _read_text_for_edit(target, shown)
    try:
        new_text, lines = _apply_edit(text, old_string, new_string, replace_all)
    except _EditProblem as exc:
        raise ToolInvocationError(f"edit_file {shown}: {exc} The file was not changed.") from None
    _atomic_write(target, new_text.encode("utf-8", errors="replace"), shown)
    where = "line" if len(lines) == 1 else "lines"
    return (
        f"Edited {shown}: replaced {plural(len(lines), 'occurrence')} "
        f"({where} {_list_lines(lines)})."
    )


def tool_edit_file() -> Tool:
    """A fresh ``edit_file`` tool: replace one exact piece of text (or all with replace_all).

    Example:
        >>> tool_edit_file().parameters["required"]
        ['path', 'old_string', 'new_string']
    """
    return tool(
        _edit_file,
        name="edit_file",
        description=(
            "Replace exact text in an existing file. old_string must match the file exactly "
            "(whitespace and indentation included, without read_file's line numbers) and "
            "occur exactly once, unless replace_all is true. Read the file first. For several "
            "changes to one file use multi_edit."
        ),
        annotations=_WRITE_ANNOTATIONS,
        source=builtin_source("write"),
    )


def _multi_edit(path: str, edits: list[FileEdit]) -> str:
    """Apply several exact-text replacements to one file, all or nothing.

    Args:
        path: The file, relative to the working directory (or absolute inside it).
        edits: The replacements, applied in order; each sees the result of the ones before.
    """
    ctx = current_tool_context()
    target = _confined(path, ctx, "write")
    shown = _show(target, ctx)
    if not edits:
        raise ToolInvocationError("edits is empty; give at least one {old_string, new_string}.")
    text = _read_text_for_edit(target, shown)
    replaced = 0
    for index, edit in enumerate(edits, start=1):
        try:
            text, lines = _apply_edit(text, edit.old_string, edit.new_string, edit.replace_all)
        except _EditProblem as exc:
            raise ToolInvocationError(
                f"multi_edit {shown}: edit {index} of {len(edits)} failed: {exc} No edit was "
                "applied; the file was not changed."
            ) from None
        replaced += len(lines)
    _atomic_write(target, text.encode("utf-8", errors="replace"), shown)
    return (
        f"Edited {shown}: applied {plural(len(edits), 'edit')} ({plural(replaced, 'replacement')})."
    )


def tool_multi_edit() -> Tool:
    """A fresh ``multi_edit`` tool: several exact replacements in one file, all or nothing.

    Example:
        >>> tool_multi_edit().parameters["properties"]["edits"]["type"]
        'array'
    """
    return tool(
        _multi_edit,
        name="multi_edit",
        description=(
            "Apply several exact-text replacements to one file in one step. Edits run in "
            "order, each on the result of the previous ones, with the same rules as "
            "edit_file. If any edit fails, nothing is written."
        ),
        annotations=_WRITE_ANNOTATIONS,
        source=builtin_source("write"),
    )


# --------------------------------------------------------------------------- walking


@dataclass
class _Entry:
    path: str
    parts: tuple[str, ...]
    is_dir: bool
    is_link: bool


class _Walker:
    """Depth-first walk in sorted order that never leaves the read roots.

    A symbolic link is yielded only when it resolves inside the roots, and is never
    descended into. ``descend(parts)`` decides which real directories to enter.
    """

    def __init__(
        self, root: Path, ctx: ToolContext, descend: Callable[[tuple[str, ...]], bool]
    ) -> None:
        self.root = root
        self.ctx = ctx
        self.descend = descend
        self.scanned = 0
        self.stopped = False

    def _children(self, directory: str | Path, parts: tuple[str, ...]) -> Iterator[_Entry]:
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            is_link = entry.is_symlink()
            if is_link:
                try:
                    real = confine(entry.path, self.ctx.working_dir, self.ctx.read_roots)
                except PathDenied:
                    continue  # leads out of the roots: never listed, never followed
                is_dir = real.is_dir()
            else:
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
            yield _Entry(entry.path, (*parts, entry.name), is_dir, is_link)

    def __iter__(self) -> Iterator[_Entry]:
        stack = [self._children(self.root, ())]
        while stack:
            entry = next(stack[-1], None)
            if entry is None:
                stack.pop()
                continue
            self.scanned += 1
            if self.scanned > MAX_SCAN_ENTRIES:
                self.stopped = True
                return
            yield entry
            if entry.is_dir and not entry.is_link and self.descend(entry.parts):
                stack.append(self._children(entry.path, entry.parts))


def _stopped_note(walker: _Walker) -> str:
    if not walker.stopped:
        return ""
    return (
        f"\n[Stopped after scanning {MAX_SCAN_ENTRIES} entries: the results may be "
        "incomplete. Narrow the path or pattern.]"
    )


# --------------------------------------------------------------------------- list_files


def _list_files(
    path: str = ".", recursive: bool = False, include_hidden: bool = False, max_entries: int = 500
) -> str:
    """List a directory.

    Args:
        path: The directory, relative to the working directory (default: the working directory).
        recursive: Also list the contents of subdirectories.
        include_hidden: Include entries whose names start with a dot.
        max_entries: The most entries to show.
    """
    ctx = current_tool_context()
    target = _confined(path, ctx, "read")
    shown = _show(target, ctx, is_dir=True)
    _require_dir(target, shown)
    _check_positive("max_entries", max_entries)

    def descend(parts: tuple[str, ...]) -> bool:
        return recursive and (include_hidden or not parts[-1].startswith("."))

    walker = _Walker(target, ctx, descend)
    listed: list[str] = []
    more = hidden = 0
    for entry in walker:
        if not include_hidden and entry.parts[-1].startswith("."):
            hidden += 1
            continue
        if len(listed) >= max_entries:
            more += 1
            continue
        listed.append("/".join(entry.parts) + ("/" if entry.is_dir else ""))
    where = "the working directory" if shown == "." else shown
    if not listed:
        lines = [f"{where} is empty."]
    else:
        total = len(listed) + more
        kind = " (recursive)" if recursive else ""
        lines = [f"Contents of {where}{kind}: {plural(total, 'entry', 'entries')}", *listed]
    if more:
        lines.append(f"[{more} more not shown. List a subdirectory, or raise max_entries.]")
    if hidden:
        lines.append(
            f"[{plural(hidden, 'hidden entry', 'hidden entries')} not shown; pass "
            "include_hidden=true to see them.]"
        )
    return "\n".join(lines) + _stopped_note(walker)


def tool_list_files() -> Tool:
    """A fresh ``list_files`` tool: a directory's entries, sorted, directories ending in ``/``.

    Example:
        >>> tool_list_files().parameters["properties"]["max_entries"]["default"]
        500
    """
    return tool(
        _list_files,
        name="list_files",
        description=(
            "List the files and directories in a directory, sorted; directories end with "
            "'/'. Paths are relative to the listed directory. Hidden entries (names starting "
            "with '.') are left out unless include_hidden is true; recursive lists "
            "subdirectories too."
        ),
        annotations=_READ_ANNOTATIONS,
        source=builtin_source("read"),
    )


# --------------------------------------------------------------------------- glob


_BRACES = re.compile(r"\{([^{}]*,[^{}]*)\}")


def _expand_braces(pattern: str, limit: int = 64) -> list[str]:
    """``*.{py,md}`` -> ``['*.py', '*.md']`` (nested groups too, at most ``limit`` patterns)."""
    out: list[str] = []
    todo = [pattern]
    while todo:
        current = todo.pop()
        match = _BRACES.search(current)
        if match is None:
            if current not in out:
                out.append(current)
            continue
        for option in reversed(match.group(1).split(",")):
            todo.append(current[: match.start()] + option + current[match.end() :])
        if len(todo) + len(out) > limit:
            raise ToolInvocationError(
                f"The pattern {pattern!r} expands to more than {limit} patterns; simplify it."
            )
    return out


@functools.lru_cache(maxsize=256)
def _segment_regex(segment: str) -> re.Pattern[str]:
    # Like a shell, a wildcard does not match a leading dot unless the segment spells it.
    guard = "" if segment.startswith(".") else r"(?!\.)"
    return re.compile(guard + fnmatch.translate(segment))


def _segment_matches(segment: str, name: str) -> bool:
    return _segment_regex(segment).match(name) is not None


class _GlobPattern:
    """A relative glob: ``*``, ``?``, ``[...]`` within a name, ``**`` across directories."""

    def __init__(self, pattern: str) -> None:
        segments: list[str] = []
        for seg in pattern.replace("\\", "/").split("/"):
            if seg in ("", "."):
                continue
            if seg == "**" and segments and segments[-1] == "**":
                continue
            segments.append(seg)
        self.segments = tuple(segments)

    def matches(self, parts: tuple[str, ...]) -> bool:
        segs = self.segments
        if "**" not in segs:
            return len(segs) == len(parts) and all(map(_segment_matches, segs, parts))

        @functools.cache
        def match(i: int, j: int) -> bool:
            if i == len(segs):
                return j == len(parts)
            if segs[i] == "**":
                if match(i + 1, j):
                    return True
                return j < len(parts) and not parts[j].startswith(".") and match(i, j + 1)
            return j < len(parts) and _segment_matches(segs[i], parts[j]) and match(i + 1, j + 1)

        return match(0, 0)

    def may_contain_matches(self, parts: tuple[str, ...]) -> bool:
        """Could a path below the directory ``parts`` match?"""
        segs = self.segments
        if "**" not in segs:
            return len(parts) < len(segs) and all(map(_segment_matches, segs, parts))

        @functools.cache
        def prefix(i: int, j: int) -> bool:
            if j == len(parts):
                return i < len(segs)
            if i == len(segs):
                return False
            if segs[i] == "**":
                if prefix(i + 1, j):
                    return True
                return not parts[j].startswith(".") and prefix(i, j + 1)
            return _segment_matches(segs[i], parts[j]) and prefix(i + 1, j + 1)

        return prefix(0, 0)


def _check_glob(pattern: str, what: str = "pattern") -> None:
    if not pattern.strip():
        raise ToolInvocationError(f"The {what} is empty; give one such as '**/*.py'.")
    if any(ord(ch) < 32 for ch in pattern):
        raise ToolInvocationError(f"The {what} contains control characters.")
    if pattern.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", pattern):
        raise ToolInvocationError(
            f"The {what} {pattern!r} is absolute; it must be relative to the searched "
            "directory. To search elsewhere, pass that directory as path."
        )
    if pattern.startswith("~"):
        raise ToolInvocationError(
            f"The {what} {pattern!r} points into a home directory; it must be relative to the "
            "searched directory."
        )
    if ".." in re.split(r"[/\\]", pattern):
        raise ToolInvocationError(
            f"The {what} {pattern!r} uses '..' to leave the searched directory; patterns "
            "must stay inside it."
        )


def _glob_files(pattern: str, path: str = ".", max_results: int = 500) -> str:
    """Find files by glob pattern.

    Args:
        pattern: A glob relative to path, e.g. "*.md", "src/**/*.py" or "**/test_*.{py,txt}".
        path: The directory to search, relative to the working directory (default: it).
        max_results: The most paths to show.
    """
    ctx = current_tool_context()
    _check_glob(pattern)
    target = _confined(path, ctx, "read")
    shown_dir = _show(target, ctx, is_dir=True)
    _require_dir(target, shown_dir)
    _check_positive("max_results", max_results)
    globs = [_GlobPattern(p) for p in _expand_braces(pattern)]
    if not any(g.segments for g in globs):
        raise ToolInvocationError(f"The pattern {pattern!r} names no files; try '*' or '**/*'.")

    def descend(parts: tuple[str, ...]) -> bool:
        return any(g.may_contain_matches(parts) for g in globs)

    walker = _Walker(target, ctx, descend)
    prefix = "" if shown_dir == "." else shown_dir
    found = sorted(
        (prefix + "/".join(entry.parts) + ("/" if entry.is_dir else ""), entry.path)
        for entry in walker
        if any(g.matches(entry.parts) for g in globs)
    )
    lines: list[str] = []
    for index, (shown, real_path) in enumerate(found):
        if len(lines) >= max_results:
            lines.append(
                f"[{len(found) - index} more not shown ({len(found)} matches). Narrow the "
                "pattern or path, or raise max_results.]"
            )
            break
        try:  # defence in depth: every listed match is checked against the roots again
            confine(real_path, ctx.working_dir, ctx.read_roots, what="read")
        except PathDenied:
            continue
        lines.append(shown)
    if not lines:
        where = "the working directory" if shown_dir == "." else shown_dir
        return f"No files match {pattern!r} in {where}." + _stopped_note(walker)
    return "\n".join(lines) + _stopped_note(walker)


def tool_glob_files() -> Tool:
    """A fresh ``glob_files`` tool: paths matching a glob pattern, sorted.

    Example:
        >>> tool_glob_files().parameters["required"]
        ['pattern']
    """
    return tool(
        _glob_files,
        name="glob_files",
        description=(
            "Find files and directories whose paths match a glob pattern: '*' and '?' "
            "within a name, '**' across directories, '[abc]' character sets, '{a,b}' "
            "alternatives. The pattern is relative to path; results are sorted paths "
            "relative to the working directory (directories end with '/'). Hidden names "
            "(starting with '.') match only when the pattern spells out the dot."
        ),
        annotations=_READ_ANNOTATIONS,
        source=builtin_source("read"),
    )


# --------------------------------------------------------------------------- grep


def _grep_files(
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    ignore_case: bool = False,
    max_results: int = 200,
) -> str:
    """Search file contents with a regular expression.

    Args:
        pattern: A Python regular expression, matched against each line.
        path: A directory to search recursively, or one file (default: the working directory).
        glob: Only search files whose names match this glob, e.g. "*.py" or "*.{md,txt}" (a
            glob containing '/' is matched against the path below the searched directory).
        ignore_case: Match regardless of case.
        max_results: The most matching lines to show.
    """
    ctx = current_tool_context()
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolInvocationError(
            f"Invalid regular expression {pattern!r}: {exc}. grep_files uses Python `re` "
            "syntax; escape special characters such as ( [ . * + ? with a backslash to search "
            "for them literally."
        ) from None
    _check_positive("max_results", max_results)
    name_globs: list[str] = []
    path_globs: list[_GlobPattern] = []
    if glob is not None:
        _check_glob(glob, "glob")
        for g in _expand_braces(glob):
            if "/" in g.replace("\\", "/").strip("/"):
                path_globs.append(_GlobPattern(g))
            else:
                name_globs.append(g.strip("/\\"))
    want_hidden = glob is not None and any(g.startswith(".") for g in name_globs)

    def wanted(parts: tuple[str, ...]) -> bool:
        if glob is None:
            return not parts[-1].startswith(".")
        if any(fnmatch.fnmatchcase(parts[-1], g) for g in name_globs):
            return want_hidden or not parts[-1].startswith(".")
        return any(g.matches(parts) for g in path_globs)

    target = _confined(path, ctx, "read")
    walker: _Walker | None = None
    files: Iterator[tuple[str, str]]  # (path, as shown)
    if target.is_file():
        files = iter([(str(target), _show(target, ctx))])
    else:
        shown_dir = _show(target, ctx, is_dir=True)
        _require_dir(target, shown_dir)
        prefix = "" if shown_dir == "." else shown_dir
        walker = _Walker(target, ctx, lambda parts: not parts[-1].startswith("."))
        files = (
            (e.path, prefix + "/".join(e.parts)) for e in walker if not e.is_dir and wanted(e.parts)
        )

    # A whole-file search first skips the files without a match; it can miss a match only
    # for patterns whose meaning changes at line edges (\A, \Z, lookarounds).
    prefilter = None
    if not re.search(r"\\[AZ]|\(\?<?[=!]", pattern):
        prefilter = re.compile(pattern, regex.flags | re.MULTILINE)
    results: list[str] = []
    more = searched = 0
    too_big: list[str] = []
    for file, shown in files:
        try:
            st = os.stat(file)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if st.st_size > MAX_READ_BYTES:
            too_big.append(shown)
            continue
        try:
            with _open_binary(file, shown) as fh:
                data = fh.read()
        except ToolInvocationError:
            continue
        if b"\0" in data[:_SNIFF_BYTES]:
            if walker is None:
                raise ToolInvocationError(
                    f"{shown} is a binary file, {len(data)} bytes; grep_files searches text only."
                )
            continue
        searched += 1
        text = data.decode("utf-8", errors="replace")
        if prefilter is not None and not prefilter.search(text):
            continue
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for number, line in enumerate(lines, start=1):
            line = line.removesuffix("\r")
            if not regex.search(line):
                continue
            if len(results) >= max_results:
                more += 1
                continue
            if len(line) > MAX_GREP_LINE_CHARS:
                line = line[:MAX_GREP_LINE_CHARS] + "…"
            results.append(f"{shown}:{number}: {line}")
    notes: list[str] = []
    if more:
        notes.append(
            f"[{len(results)} matches shown, {more} more not shown. Narrow the pattern, path "
            "or glob, or raise max_results.]"
        )
    if too_big:
        listed = ", ".join(too_big[:5]) + (", …" if len(too_big) > 5 else "")
        notes.append(
            f"[Skipped {plural(len(too_big), 'file')} over {_size(MAX_READ_BYTES)}: {listed}. "
            "Read them in parts with read_file.]"
        )
    stopped = _stopped_note(walker) if walker is not None else ""
    if not results:
        where = _show(target, ctx, is_dir=target.is_dir())
        where = "the working directory" if where == "." else where
        head = (
            f"No matches for {pattern!r} in {where} "
            f"({plural(searched, 'file')} searched"
            + (f", glob {glob!r}" if glob is not None else "")
            + ")."
        )
        return "\n".join([head, *notes]) + stopped
    return "\n".join([*results, *notes]) + stopped


def tool_grep_files() -> Tool:
    """A fresh ``grep_files`` tool: regex search over files, as ``file:line: text`` lines.

    Example:
        >>> tool_grep_files().parameters["properties"]["max_results"]["default"]
        200
    """
    return tool(
        _grep_files,
        name="grep_files",
        description=(
            "Search the contents of files for a Python regular expression, line by line. "
            "path is a directory (searched recursively) or one file; glob limits the files "
            "by name (e.g. '*.py'). Returns matching lines as 'file:line: text' with paths "
            "relative to the working directory. Binary files, hidden files and hidden "
            "directories such as .git are skipped."
        ),
        annotations=_READ_ANNOTATIONS,
        source=builtin_source("read"),
    )
