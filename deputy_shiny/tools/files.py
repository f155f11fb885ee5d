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

The tools live in three parts, re-exported here: :mod:`~deputy_shiny.tools.files_read`
(``read_file``, ``read_markdown``), :mod:`~deputy_shiny.tools.files_write`
(``write_file``, ``edit_file``, ``multi_edit``) and
:mod:`~deputy_shiny.tools.files_search` (``list_files``, ``glob_files``, ``grep_files``).

Examples:
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

from ._files_common import (
    DEFAULT_LINE_LIMIT,
    DOCS_TOOLS_INSTALL,
    MARKDOWN_SUFFIXES,
    MAX_GREP_LINE_CHARS,
    MAX_LINE_CHARS,
    MAX_MARKDOWN_BYTES,
    MAX_OUTPUT_CHARS,
    MAX_READ_BYTES,
    MAX_SCAN_ENTRIES,
)
from .files_read import tool_read_file, tool_read_markdown
from .files_search import tool_glob_files, tool_grep_files, tool_list_files
from .files_write import FileEdit, tool_edit_file, tool_multi_edit, tool_write_file

__all__ = [
    "DEFAULT_LINE_LIMIT",
    "DOCS_TOOLS_INSTALL",
    "MARKDOWN_SUFFIXES",
    "MAX_GREP_LINE_CHARS",
    "MAX_LINE_CHARS",
    "MAX_MARKDOWN_BYTES",
    "MAX_OUTPUT_CHARS",
    "MAX_READ_BYTES",
    "MAX_SCAN_ENTRIES",
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
