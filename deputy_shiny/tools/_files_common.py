"""What the file tools share: annotations, size limits, path display and safe opening.

Private to :mod:`deputy_shiny.tools.files` and its parts (``files_read``,
``files_write``, ``files_search``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import IO, Literal

from .._paths import PathDenied, confine
from ..errors import ToolInvocationError
from ._context import ToolContext
from ._tool import tool_annotations

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
