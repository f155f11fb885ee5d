"""Bundles and presets: ready-made lists of the built-in tools.

Every call builds fresh tools (tools may hold state, such as run_python's process).
Registration is not authorization: the agent's Permissions still decide each call.

Examples:
    >>> from deputy_shiny.tools import tools_preset
    >>> [t.name for t in tools_preset("minimal")]
    ['read_file', 'read_markdown', 'list_files', 'glob_files', 'grep_files']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError
from ..sandbox import Sandbox
from ._tool import Tool
from .code import tool_run_bash, tool_run_python
from .data import tool_read_csv
from .files import (
    tool_edit_file,
    tool_glob_files,
    tool_grep_files,
    tool_list_files,
    tool_multi_edit,
    tool_read_file,
    tool_read_markdown,
    tool_write_file,
)
from .interactive import tools_interactive
from .web import tool_web_fetch, tool_web_search


def tools_file() -> list[Tool]:
    """read_file, read_markdown, write_file, edit_file, multi_edit, list_files, glob_files,
    grep_files.

    Examples:
        >>> len(tools_file())
        8
    """
    return [
        tool_read_file(),
        tool_read_markdown(),
        tool_write_file(),
        tool_edit_file(),
        tool_multi_edit(),
        tool_list_files(),
        tool_glob_files(),
        tool_grep_files(),
    ]


def tools_code(sandbox: Sandbox | None = None) -> list[Tool]:
    """run_python and run_bash, confined by ``sandbox`` (default: bubblewrap); off unless
    permitted.

    Examples:
        >>> [t.name for t in tools_code()]
        ['run_python', 'run_bash']
    """
    return [tool_run_python(sandbox), tool_run_bash(sandbox)]


def tools_data() -> list[Tool]:
    """read_csv, read_file and read_markdown.

    Examples:
        >>> [t.name for t in tools_data()]
        ['read_csv', 'read_file', 'read_markdown']
    """
    return [tool_read_csv(), tool_read_file(), tool_read_markdown()]


def _universal_web() -> list[Tool]:
    return [tool_web_fetch(), tool_web_search()]


def tools_all() -> list[Tool]:
    """Every built-in tool once: files, code, read_csv, the universal web tools, ask_user.

    Examples:
        >>> len({t.name for t in tools_all()}) == len(tools_all())
        True
    """
    return [*tools_file(), *tools_code(), tool_read_csv(), *_universal_web(), *tools_interactive()]


PRESETS: dict[str, Callable[[], list[Any]]] = {
    "minimal": lambda: [
        tool_read_file(),
        tool_read_markdown(),
        tool_list_files(),
        tool_glob_files(),
        tool_grep_files(),
    ],
    "standard": lambda: [
        *PRESETS["minimal"](),
        tool_write_file(),
        tool_edit_file(),
        tool_multi_edit(),
    ],
    "data": lambda: [*tools_data(), tool_run_python()],
    "dev": lambda: [*tools_file(), *tools_code()],
    "full": tools_all,
}


def tools_preset(name: str) -> list[Tool]:
    """A named preset: ``minimal``, ``standard``, ``data``, ``dev`` or ``full``.

    Examples:
        >>> [t.name for t in tools_preset("data")]
        ['read_csv', 'read_file', 'read_markdown', 'run_python']
    """
    try:
        make = PRESETS[name]
    except (KeyError, TypeError):
        raise ConfigurationError(
            f"Unknown tool preset {name!r}; use one of {', '.join(PRESETS)}"
        ) from None
    return list(make())
