"""What the file tools share: annotations, size limits, path display and safe opening.

Every tool checks a path with :func:`~deputy_shiny._paths.confine`, then opens what it
returned through :mod:`deputy_shiny._util.safe_fs`: beneath a descriptor of the allowed root,
no symlink followed at any component, so a directory swapped for a link after the check
is refused (rule ``symlink``), never followed.

Private to :mod:`deputy_shiny.tools.files` and its parts (``files_read``,
``files_write``, ``files_search``).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO, Literal

from .._paths import PathDenied, confine, real_roots
from .._util import safe_fs
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


def _located(target: Path, ctx: ToolContext, what: Literal["read", "write"]) -> tuple[Path, str]:
    """The allowed root holding ``target`` (as :func:`confine` returned it) and the
    path below it, for :mod:`deputy_shiny._util.safe_fs` to open beneath the root."""
    roots = real_roots(ctx.read_roots if what == "read" else ctx.write_roots)
    found = safe_fs.beneath(target, roots)
    if found is None:  # confine returned a path inside a root: only a moved root gets here
        raise ToolInvocationError(
            f"{_show(target, ctx)} is no longer inside the directories this agent may {what}."
        )
    return found


def _open_problem(exc: OSError | PathDenied, doing: str, shown: str) -> ToolInvocationError:
    """The model-facing error for a failed open beneath a root."""
    if isinstance(exc, PathDenied):
        return ToolInvocationError(f"Could not {doing} {shown}: {exc}")
    if isinstance(exc, FileNotFoundError):
        return ToolInvocationError(
            f"File not found: {shown}. Check the path with list_files or glob_files."
        )
    if isinstance(exc, IsADirectoryError):
        return ToolInvocationError(f"{shown} is a directory, not a file; use list_files on it.")
    if isinstance(exc, NotADirectoryError):
        return ToolInvocationError(f"Could not {doing} {shown}: a part of its path is a file.")
    if exc.errno == errno.EINVAL and exc.strerror == "Not a regular file":
        return ToolInvocationError(f"{shown} is not a regular file.")
    return _os_problem(exc, doing, shown)


def _open_file(
    target: Path, shown: str, ctx: ToolContext, what: Literal["read", "write"] = "read"
) -> tuple[IO[bytes], os.stat_result]:
    """Open the confined file ``target`` for reading, beneath its root, never through a
    symbolic link at any component, with the ``fstat`` of what was opened."""
    root, rel = _located(target, ctx, what)
    try:
        fd, info = safe_fs.open_regular(root, rel)
    except (OSError, PathDenied) as exc:
        raise _open_problem(exc, "open", shown) from None
    return os.fdopen(fd, "rb"), info


def _lstat(target: Path, ctx: ToolContext, what: Literal["read", "write"]) -> os.stat_result | None:
    """``target``'s own status beneath its root (None: missing)."""
    root, rel = _located(target, ctx, what)
    try:
        return safe_fs.lstat(root, rel)
    except (OSError, PathDenied) as exc:
        raise _open_problem(exc, "access", _show(target, ctx)) from None


def _open_dir(target: Path, shown: str, ctx: ToolContext) -> int:
    """A descriptor of the confined directory ``target`` (no symlink followed)."""
    root, rel = _located(target, ctx, "read")
    try:
        return safe_fs.open_dir(root, rel)
    except FileNotFoundError:
        raise ToolInvocationError(
            f"Directory not found: {shown}. Check the path with list_files."
        ) from None
    except NotADirectoryError:
        info = _lstat(target, ctx, "read")
        if info is not None and stat.S_ISREG(info.st_mode):
            raise ToolInvocationError(
                f"{shown} is a file, not a directory; read it with read_file instead."
            ) from None
        raise ToolInvocationError(f"{shown} is not a directory.") from None
    except (OSError, PathDenied) as exc:
        raise _open_problem(exc, "open", shown) from None


def _check_positive(name: str, value: int, *, minimum: int = 1) -> None:
    if value < minimum:
        raise ToolInvocationError(f"{name} must be at least {minimum}, got {value}.")
