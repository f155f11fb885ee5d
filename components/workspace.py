"""The session's workspace: a seed file, and a view of its files that follows tool calls.

The kit gives each browser session a working directory (with saved conversations, the
user's own, which stays); :func:`seed_workspace` puts a ``welcome.md`` in a new one so
listing and reading have something to show.
:func:`workspace_server` lists the directory again whenever its ``refresh`` counter
changes (the kit's ``handle.tool_events``: after each tool call).

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> ws = Path(tempfile.mkdtemp())
    >>> seed_workspace(ws)
    >>> [(e.path, e.is_dir) for e in workspace_entries(ws)]
    [('welcome.md', False)]
"""

from __future__ import annotations

import itertools
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from htmltools import Tag, TagList, tags
from shiny import Inputs, Outputs, Session, render, ui

from deputy_shiny.shiny import _module as kit_module

__all__ = [
    "WELCOME",
    "WorkspaceEntry",
    "format_size",
    "seed_workspace",
    "workspace_entries",
    "workspace_server",
    "workspace_ui",
]

WELCOME = """# Welcome to your workspace

This folder belongs to your browser session only.
The agent's file tools work here; it is deleted
when you close the tab.

- Reading and listing files needs no approval.
- Writing a file asks you first, in a dialog.
- Shell commands run here too, and a safety hook
  blocks destructive ones.

Try: "list files", "read welcome.md", "write a note".
"""

MAX_ENTRIES = 200
MAX_SCAN = 2000


@dataclass(frozen=True)
class WorkspaceEntry:
    """One file or directory, relative to the workspace (``/``-separated)."""

    path: str
    is_dir: bool
    size: int
    depth: int


def seed_workspace(working_dir: Path) -> None:
    """Put ``welcome.md`` in a new workspace; an entry of that name, of any kind, stays.

    The model may have left anything in a saved workspace: a ``welcome.md`` symlink to a
    path of its choosing would make this (host) process create or overwrite a file
    there. So nothing is followed: the file is created relative to the workspace's own
    descriptor (itself opened without following a link), with ``O_CREAT | O_EXCL |
    O_NOFOLLOW``, which fails on any existing entry, a dangling link included.

    Raises:
        OSError: the workspace is missing, not a directory, or a symlink.
    """
    try:
        directory = os.open(working_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise OSError(
            exc.errno, f"workspace {str(working_dir)!r} is not a directory (or is a symlink)"
        ) from None
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open("welcome.md", flags, 0o644, dir_fd=directory)
        except FileExistsError:
            return  # the user's file, a directory, a link: never touched
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            owner = os.fstat(directory)
            if os.geteuid() == 0 and owner.st_uid != 0:
                # Model-run code runs as the workspace's owner, never root: the file is theirs.
                os.fchown(out.fileno(), owner.st_uid, owner.st_gid)
            out.write(WELCOME)
    finally:
        os.close(directory)


def workspace_entries(root: Path, limit: int = MAX_ENTRIES) -> list[WorkspaceEntry]:
    """The workspace's entries, depth first and sorted, directories before files.

    Symlinks are listed but never followed; hidden entries (``.name``) are left out;
    at most ``limit`` entries. A missing root lists nothing.

    Examples:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> (root / "b").mkdir(); _ = (root / "b" / "c.txt").write_text("hi")
        >>> _ = (root / "a.txt").write_text("hello")
        >>> [(e.path, e.depth) for e in workspace_entries(root)]
        [('b', 0), ('b/c.txt', 1), ('a.txt', 0)]
    """
    entries: list[WorkspaceEntry] = []

    def walk(directory: Path, prefix: str, depth: int) -> None:
        try:
            with os.scandir(directory) as scan:
                # Bounded even for a directory with a million entries (render on the loop).
                children = [
                    c for c in itertools.islice(scan, MAX_SCAN) if not c.name.startswith(".")
                ]
        except OSError:
            return
        children.sort(key=lambda c: (not c.is_dir(follow_symlinks=False), c.name.lower()))
        for child in children:
            if len(entries) >= limit:
                return
            try:
                info = child.stat(follow_symlinks=False)
            except OSError:
                continue
            is_dir = stat.S_ISDIR(info.st_mode)
            path = f"{prefix}{child.name}"
            entries.append(WorkspaceEntry(path, is_dir, 0 if is_dir else info.st_size, depth))
            if is_dir:
                walk(Path(child.path), f"{path}/", depth + 1)

    walk(root, "", 0)
    return entries


def format_size(size: int) -> str:
    """A short human size.

    Examples:
        >>> format_size(0), format_size(1023), format_size(2048), format_size(5_000_000)
        ('0 B', '1023 B', '2.0 KB', '4.8 MB')
    """
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


@kit_module.ui
def workspace_ui() -> Tag:
    """The workspace panel (filled in by :func:`workspace_server`)."""
    return ui.div(ui.output_ui("files"), class_="deputy-workspace")


@kit_module.server
def workspace_server(
    input: Inputs,
    output: Outputs,
    session: Session,
    working_dir: Path | None,
    refresh: Callable[[], int],
) -> None:
    """List ``working_dir`` now and again whenever ``refresh()`` changes."""

    @render.ui
    def files() -> Tag | TagList:
        refresh()  # a dependency: re-list after every tool call
        if working_dir is None:
            return tags.p("No workspace.", class_="deputy-muted")
        entries = workspace_entries(working_dir)
        if not entries:
            return tags.p("Empty.", class_="deputy-muted")
        items = [
            tags.li(
                tags.span(
                    entry.path.rsplit("/", 1)[-1] + ("/" if entry.is_dir else ""),
                    class_="deputy-file-name",
                    title=entry.path,
                ),
                tags.span(
                    "" if entry.is_dir else format_size(entry.size), class_="deputy-file-size"
                ),
                class_="deputy-dir" if entry.is_dir else "deputy-file",
                style=f"padding-left: {entry.depth * 0.9:.1f}rem" if entry.depth else None,
            )
            for entry in entries
        ]
        more = (
            tags.p(f"Showing the first {MAX_ENTRIES} entries.", class_="deputy-muted")
            if len(entries) >= MAX_ENTRIES
            else None
        )
        return TagList(tags.ul(*items, class_="deputy-file-list"), more)
