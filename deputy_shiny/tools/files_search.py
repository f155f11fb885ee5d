"""The browsing file tools: ``list_files``, ``glob_files`` and ``grep_files``.

Walks stay inside the read roots: they go by directory descriptors, never through a
symbolic link (not even one swapped in mid-walk), and read files by descriptor. Part of
:mod:`deputy_shiny.tools.files`.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .._paths import PathDenied, confine
from .._util import safe_fs
from .._util.secret_paths import protected_paths, protected_root
from .._util.text import plural
from ..errors import ToolInvocationError
from ._context import ToolContext, current_tool_context
from ._files_common import (
    _READ_ANNOTATIONS,
    _SNIFF_BYTES,
    MAX_GREP_LINE_CHARS,
    MAX_READ_BYTES,
    MAX_SCAN_ENTRIES,
    _check_positive,
    _confined,
    _located,
    _lstat,
    _open_dir,
    _open_problem,
    _show,
    _size,
)
from ._tool import Tool, builtin_source, tool

if TYPE_CHECKING:
    # The regex engine costs ~30 ms to import: the first grep imports it, not the package.
    import regex as _regex

# --------------------------------------------------------------------------- walking


@dataclass
class _Entry:
    path: str
    parts: tuple[str, ...]
    is_dir: bool
    is_link: bool
    found: safe_fs.WalkEntry

    def open_regular(self) -> tuple[int, os.stat_result]:
        """Open this file for reading by its directory's descriptor (never through a link)."""
        if self.is_link:
            raise PathDenied(f"{self.path!r} is a symbolic link.", rule="symlink", path=self.path)
        return self.found.open_regular()


class _Walker:
    """Depth-first walk in sorted order that never leaves the read roots.

    It walks by descriptors (:func:`deputy_shiny._util.safe_fs.walk`): each directory is
    entered with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's descriptor, so a
    directory swapped for a symlink mid-walk is skipped, never followed, and files are
    opened by their directory's descriptor. A symbolic link is yielded (by name) only
    when it resolves inside the roots, and is never descended into nor read through.
    ``descend(parts)`` decides which real directories to enter. The server's own secrets
    (the record key's folder, :mod:`deputy_shiny._util.secret_paths`) are neither listed
    nor entered, even when the walked directory holds them. The walker owns
    ``dir_fd`` (the walked directory) and closes it when the walk ends.
    """

    def __init__(
        self,
        root: Path,
        dir_fd: int,
        ctx: ToolContext,
        descend: Callable[[tuple[str, ...]], bool],
    ) -> None:
        self.root = root
        self.dir_fd = dir_fd
        self.ctx = ctx
        secrets = protected_paths()
        self.secret: Callable[[tuple[str, ...]], bool] = lambda parts: (
            protected_root(os.path.join(root, *parts), secrets) is not None
        )
        self.descend: Callable[[tuple[str, ...]], bool] = lambda parts: (
            descend(parts) and not self.secret(parts)
        )
        self.scanned = 0
        self.stopped = False
        self.deep = False

    def __iter__(self) -> Iterator[_Entry]:
        try:
            with safe_fs.walk(self.dir_fd, self.descend) as walk:
                for found in walk:
                    self.scanned += 1
                    if self.scanned > MAX_SCAN_ENTRIES:
                        self.stopped = True
                        return
                    path = os.path.join(self.root, *found.parts)
                    if self.secret(found.parts):
                        continue  # the server's own keys: never listed, never read
                    if not found.is_link:
                        yield _Entry(path, found.parts, found.is_dir, False, found)
                        continue
                    try:
                        real = confine(path, self.ctx.working_dir, self.ctx.read_roots)
                    except PathDenied:
                        continue  # leads out of the roots: never listed, never followed
                    try:  # only to show a trailing '/': the link is never entered
                        is_dir = real.is_dir()
                    except OSError:
                        continue
                    yield _Entry(path, found.parts, is_dir, True, found)
                self.deep = walk.deep
        finally:
            self.close()

    def close(self) -> None:
        fd, self.dir_fd = self.dir_fd, -1
        if fd >= 0:
            os.close(fd)


def _stopped_note(walker: _Walker) -> str:
    if walker.deep and not walker.stopped:
        return (
            f"\n[Directories deeper than {safe_fs.MAX_WALK_DEPTH} levels were not entered: "
            "the results may be incomplete. Search a deeper path directly.]"
        )
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
    _check_positive("max_entries", max_entries)
    dir_fd = _open_dir(target, shown, ctx)

    def descend(parts: tuple[str, ...]) -> bool:
        return recursive and (include_hidden or not parts[-1].startswith("."))

    walker = _Walker(target, dir_fd, ctx, descend)
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

    Examples:
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
    _check_positive("max_results", max_results)
    globs = [_GlobPattern(p) for p in _expand_braces(pattern)]
    if not any(g.segments for g in globs):
        raise ToolInvocationError(f"The pattern {pattern!r} names no files; try '*' or '**/*'.")
    dir_fd = _open_dir(target, shown_dir, ctx)

    def descend(parts: tuple[str, ...]) -> bool:
        return any(g.may_contain_matches(parts) for g in globs)

    walker = _Walker(target, dir_fd, ctx, descend)
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

    Examples:
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


PATTERN_BUDGET = 2.0
"""Seconds one grep_files call may spend matching its pattern, over all files."""


class _BoundedSearch:
    """Searches with a model-supplied pattern under one time budget per call.

    The pattern is the model's (and so a prompt injection's) choice: a catastrophic one,
    such as ``(a|aa|aaa)+\\1z`` against a line of ``a``, backtracks for ages. The
    ``regex`` engine stops it at the budget and, with ``concurrent=True``, releases the
    GIL while it matches, so the event loop and other sessions keep running meanwhile.
    """

    def __init__(self, pattern: str, budget: float = PATTERN_BUDGET) -> None:
        self.pattern = pattern
        self.budget = budget
        self.deadline = time.monotonic() + budget

    def __call__(self, compiled: _regex.Pattern[str], text: str) -> bool:
        left = self.deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            return compiled.search(text, timeout=left, concurrent=True) is not None
        except TimeoutError:
            raise ToolInvocationError(
                f"The pattern {self.pattern[:200]!r} is too expensive: matching it took more "
                f"than {self.budget:g} s (nested repetition such as (a+)+ or (a|aa)+ with a "
                "backreference backtracks without end). Use a simpler pattern."
            ) from None


# (opener, the path as shown): the opener returns a descriptor and its fstat.
_Candidate = tuple[Callable[[], tuple[int, os.stat_result]], str]


@dataclass
class _GrepTally:
    """What one grep_files call has found so far."""

    max_results: int
    results: list[str] = field(default_factory=list)
    more: int = 0  # matching lines past max_results
    searched: int = 0
    too_big: list[str] = field(default_factory=list)

    def add_matches(
        self, shown: str, text: str, compiled: _regex.Pattern[str], search: _BoundedSearch
    ) -> None:
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for number, line in enumerate(lines, start=1):
            line = line.removesuffix("\r")
            if not search(compiled, line):
                continue
            if len(self.results) >= self.max_results:
                self.more += 1
                continue
            if len(line) > MAX_GREP_LINE_CHARS:
                line = line[:MAX_GREP_LINE_CHARS] + "…"
            self.results.append(f"{shown}:{number}: {line}")

    def notes(self) -> list[str]:
        notes: list[str] = []
        if self.more:
            notes.append(
                f"[{len(self.results)} matches shown, {self.more} more not shown. Narrow the "
                "pattern, path or glob, or raise max_results.]"
            )
        if self.too_big:
            listed = ", ".join(self.too_big[:5]) + (", …" if len(self.too_big) > 5 else "")
            notes.append(
                f"[Skipped {plural(len(self.too_big), 'file')} over {_size(MAX_READ_BYTES)}: "
                f"{listed}. Read them in parts with read_file.]"
            )
        return notes


def _compile_pattern(pattern: str, ignore_case: bool) -> _regex.Pattern[str]:
    import regex

    try:
        return regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
    except regex.error as exc:
        raise ToolInvocationError(
            f"Invalid regular expression {pattern!r}: {exc}. grep_files uses Python `re` "
            "syntax; escape special characters such as ( [ . * + ? with a backslash to search "
            "for them literally."
        ) from None


def _grep_filter(glob: str | None) -> Callable[[tuple[str, ...]], bool]:
    """Which walked files (by path parts) to search: ``glob`` matched, hidden ones not.

    A glob without ``/`` is matched against the file name; one with ``/`` against the
    path below the searched directory. A name glob starting with ``.`` lets hidden files
    through.
    """
    if glob is None:
        return lambda parts: not parts[-1].startswith(".")
    _check_glob(glob, "glob")
    name_globs: list[str] = []
    path_globs: list[_GlobPattern] = []
    for g in _expand_braces(glob):
        if "/" in g.replace("\\", "/").strip("/"):
            path_globs.append(_GlobPattern(g))
        else:
            name_globs.append(g.strip("/\\"))
    want_hidden = any(g.startswith(".") for g in name_globs)

    def wanted(parts: tuple[str, ...]) -> bool:
        if any(fnmatch.fnmatchcase(parts[-1], g) for g in name_globs):
            return want_hidden or not parts[-1].startswith(".")
        return any(g.matches(parts) for g in path_globs)

    return wanted


def _walked_candidates(
    target: Path, ctx: ToolContext, wanted: Callable[[tuple[str, ...]], bool]
) -> tuple[_Walker, Iterator[_Candidate]]:
    """The walker over directory ``target`` and the wanted regular files it yields."""
    shown_dir = _show(target, ctx, is_dir=True)
    prefix = "" if shown_dir == "." else shown_dir
    walker = _Walker(
        target, _open_dir(target, shown_dir, ctx), ctx, lambda p: not p[-1].startswith(".")
    )
    files = (
        (e.open_regular, prefix + "/".join(e.parts))
        for e in walker
        if not e.is_dir and not e.is_link and wanted(e.parts)
    )
    return walker, files


def _read_candidate(
    opener: Callable[[], tuple[int, os.stat_result]], shown: str, tally: _GrepTally, *, named: bool
) -> str | None:
    """The text of one file to search, or None to skip it.

    A file the caller ``named`` (not found by the walk) that cannot be opened or is
    binary is an error; a walked one is skipped. Files over MAX_READ_BYTES are noted.
    Opened by descriptor (the walk's, or beneath the root), then checked with fstat:
    what is read is what was listed, never a link swapped in meanwhile.
    """
    try:
        fd, st = opener()
    except (OSError, PathDenied) as exc:
        if named:
            raise _open_problem(exc, "open", shown) from None
        return None
    with os.fdopen(fd, "rb") as fh:
        if st.st_size > MAX_READ_BYTES:
            tally.too_big.append(shown)
            return None
        data = fh.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        tally.too_big.append(shown)
        return None
    if b"\0" in data[:_SNIFF_BYTES]:
        if named:
            raise ToolInvocationError(
                f"{shown} is a binary file, {len(data)} bytes; grep_files searches text only."
            )
        return None
    return data.decode("utf-8", errors="replace")


def _search_files(
    files: Iterator[_Candidate],
    pattern: str,
    compiled: _regex.Pattern[str],
    tally: _GrepTally,
    *,
    named: bool,
) -> None:
    # A whole-file search first skips the files without a match; it can miss a match only
    # for patterns whose meaning changes at line edges (\A, \Z, lookarounds).
    prefilter = None
    if not re.search(r"\\[AZ]|\(\?<?[=!]", pattern):
        import regex

        prefilter = regex.compile(pattern, compiled.flags | regex.MULTILINE)
    search = _BoundedSearch(pattern)
    for opener, shown in files:
        text = _read_candidate(opener, shown, tally, named=named)
        if text is None:
            continue
        tally.searched += 1
        if prefilter is not None and not search(prefilter, text):
            continue
        tally.add_matches(shown, text, compiled, search)


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
    compiled = _compile_pattern(pattern, ignore_case)
    _check_positive("max_results", max_results)
    wanted = _grep_filter(glob)
    target = _confined(path, ctx, "read")
    walker: _Walker | None = None
    files: Iterator[_Candidate]
    info = _lstat(target, ctx, "read")
    searched_dir = info is not None and stat.S_ISDIR(info.st_mode)
    if info is not None and not searched_dir:
        root, rel = _located(target, ctx, "read")
        files = iter([(functools.partial(safe_fs.open_regular, root, rel), _show(target, ctx))])
    else:
        walker, files = _walked_candidates(target, ctx, wanted)
    tally = _GrepTally(max_results)
    try:
        _search_files(files, pattern, compiled, tally, named=walker is None)
    finally:
        # Release the walk's directory descriptors now, even when the pattern's time
        # budget ends the search early.
        close = getattr(files, "close", None)
        if close is not None:
            close()
        if walker is not None:
            walker.close()
    stopped = _stopped_note(walker) if walker is not None else ""
    if tally.results:
        return "\n".join([*tally.results, *tally.notes()]) + stopped
    where = _show(target, ctx, is_dir=searched_dir)
    where = "the working directory" if where == "." else where
    head = (
        f"No matches for {pattern!r} in {where} ({plural(tally.searched, 'file')} searched"
        + (f", glob {glob!r}" if glob is not None else "")
        + ")."
    )
    return "\n".join([head, *tally.notes()]) + stopped


def tool_grep_files() -> Tool:
    """A fresh ``grep_files`` tool: regex search over files, as ``file:line: text`` lines.

    Examples:
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
