"""The writing file tools: ``write_file``, ``edit_file`` and ``multi_edit``.

Writes are atomic (a temporary file beside the target, then a rename, both by
descriptor of the target's directory, opened beneath the write root with no symlink
followed); edits replace exact text. Part of :mod:`deputy_shiny.tools.files`.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .._paths import PathDenied
from .._util import safe_fs
from .._util.text import plural
from ..errors import DeputyError, ToolInvocationError
from ._context import ToolContext, current_tool_context
from ._files_common import (
    _SNIFF_BYTES,
    _WRITE_ANNOTATIONS,
    MAX_READ_BYTES,
    _confined,
    _located,
    _lstat,
    _open_file,
    _open_problem,
    _show,
    _size,
)
from ._tool import Tool, builtin_source, tool


def _read_text_for_edit(target: Path, shown: str, ctx: ToolContext) -> str:
    fh, info = _open_file(target, shown, ctx, "write")
    with fh:
        if info.st_size > MAX_READ_BYTES:
            raise ToolInvocationError(
                f"{shown} is {_size(info.st_size)}, more than the {_size(MAX_READ_BYTES)} "
                "the edit tools handle."
            )
        data = fh.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise ToolInvocationError(f"{shown} grew past {_size(MAX_READ_BYTES)} while being read.")
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


def _atomic_write(target: Path, data: bytes, shown: str, ctx: ToolContext) -> None:
    """Write ``data`` to a temporary file beside ``target``, then rename it into place,
    both by descriptor of ``target``'s directory (opened beneath the write root, no
    symlink followed), so the file lands where it was checked.

    An existing file keeps its permission bits; a new one gets the process umask's.
    """
    root, rel = _located(target, ctx, "write")
    try:
        safe_fs.replace_file(root, rel, data)
    except (OSError, PathDenied) as exc:
        raise _open_problem(exc, "write", shown) from None


def _journal(target: Path, ctx: ToolContext) -> None:
    """Let the agent's checkpoint journal record ``target`` before it changes (if on).

    A refusal (a cap, a symlink, outside the working directory) refuses the call:
    nothing has been written yet.
    """
    if ctx.file_journal is None:
        return
    try:
        ctx.file_journal.record(target)
    except DeputyError as exc:
        raise _CaptureRefused(
            f"File checkpointing refused this change: {exc} Nothing was written."
        ) from None


class _CaptureRefused(ToolInvocationError):
    """The journal refused to record a file: the engine also sends deputy's notice."""

    notice_code = "file_checkpoint_capture_failed"


def _make_parents(target: Path, ctx: ToolContext) -> list[Path]:
    """Create the missing parent directories of ``target``, beneath the write root that
    holds it (by descriptor: nothing is ever created through a symbolic link)."""
    root, rel = _located(target, ctx, "write")
    parent = rel.rpartition("/")[0]
    try:
        made = safe_fs.make_dirs(root, parent)
    except NotADirectoryError as exc:
        blocker = root / str(exc.filename) if exc.filename else target.parent
        raise ToolInvocationError(
            f"Cannot create {_show(target, ctx)}: {_show(blocker, ctx)} is a file, not a directory."
        ) from None
    except (OSError, PathDenied) as exc:
        raise _open_problem(exc, "create the directories of", _show(target, ctx)) from None
    return [root / d for d in made]


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
    info = _lstat(target, ctx, "write")
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise ToolInvocationError(f"{shown} is a directory; give a file path to write to.")
    data = content.encode("utf-8", errors="replace")
    _journal(target, ctx)
    created = _make_parents(target, ctx)
    info = _lstat(target, ctx, "write")
    previous = info.st_size if info is not None else None
    if mode == "write":
        _atomic_write(target, data, shown, ctx)
        what = f"Wrote {_size(len(data))} to {shown}"
        how = "created the file" if previous is None else f"replaced {_size(previous)}"
    else:
        root, rel = _located(target, ctx, "write")
        try:
            safe_fs.append_file(root, rel, data)
        except (OSError, PathDenied) as exc:
            raise _open_problem(exc, "append to", shown) from None
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

    Examples:
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

    Examples:
        >>> FileEdit(old_string="a", new_string="b").replace_all
        False
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

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
    text = _read_text_for_edit(target, shown, ctx)
    try:
        new_text, lines = _apply_edit(text, old_string, new_string, replace_all)
    except _EditProblem as exc:
        raise ToolInvocationError(f"edit_file {shown}: {exc} The file was not changed.") from None
    _journal(target, ctx)
    _atomic_write(target, new_text.encode("utf-8", errors="replace"), shown, ctx)
    where = "line" if len(lines) == 1 else "lines"
    return (
        f"Edited {shown}: replaced {plural(len(lines), 'occurrence')} "
        f"({where} {_list_lines(lines)})."
    )


def tool_edit_file() -> Tool:
    """A fresh ``edit_file`` tool: replace one exact piece of text (or all with replace_all).

    Examples:
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
    text = _read_text_for_edit(target, shown, ctx)
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
    _journal(target, ctx)
    _atomic_write(target, text.encode("utf-8", errors="replace"), shown, ctx)
    return (
        f"Edited {shown}: applied {plural(len(edits), 'edit')} ({plural(replaced, 'replacement')})."
    )


def tool_multi_edit() -> Tool:
    """A fresh ``multi_edit`` tool: several exact replacements in one file, all or nothing.

    Examples:
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
