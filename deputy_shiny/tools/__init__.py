"""Tools the model can call: define them with :func:`tool`, describe their effects with
:func:`tool_annotations`, and inspect them with :func:`tool_metadata`.

Examples:
    >>> from deputy_shiny.tools import tool
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two numbers.'''
    ...     return a + b
    >>> add.name, add(1, 2)
    ('add', 3)
"""

from ._content import content_image_file, content_image_inline
from ._context import (
    ToolContext,
    ToolState,
    current_tool_context,
    default_tool_context,
    tool_context,
)
from ._tool import (
    EffectiveAnnotations,
    Tool,
    ToolAnnotations,
    ToolMetadata,
    ToolSource,
    effective_annotations,
    format_tool_output,
    tool,
    tool_annotations,
    tool_metadata,
)
from .bundles import PRESETS, tools_all, tools_code, tools_data, tools_file, tools_preset
from .code import PythonSession, python_session, tool_run_bash, tool_run_python
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
from .interactive import (
    AskUserContext,
    AskUserDeclined,
    Option,
    Question,
    set_ask_user_callback,
    tool_ask_user,
    tools_interactive,
)
from .web import (
    NativeWebFetch,
    NativeWebSearch,
    NativeWebTool,
    SearchResult,
    tool_web_fetch,
    tool_web_search,
    tools_web,
)

__all__ = [
    "PRESETS",
    "AskUserContext",
    "AskUserDeclined",
    "EffectiveAnnotations",
    "NativeWebFetch",
    "NativeWebSearch",
    "NativeWebTool",
    "Option",
    "PythonSession",
    "Question",
    "SearchResult",
    "Tool",
    "ToolAnnotations",
    "ToolContext",
    "ToolMetadata",
    "ToolSource",
    "ToolState",
    "content_image_file",
    "content_image_inline",
    "current_tool_context",
    "default_tool_context",
    "effective_annotations",
    "format_tool_output",
    "python_session",
    "set_ask_user_callback",
    "tool",
    "tool_annotations",
    "tool_ask_user",
    "tool_context",
    "tool_edit_file",
    "tool_glob_files",
    "tool_grep_files",
    "tool_list_files",
    "tool_metadata",
    "tool_multi_edit",
    "tool_read_csv",
    "tool_read_file",
    "tool_read_markdown",
    "tool_run_bash",
    "tool_run_python",
    "tool_web_fetch",
    "tool_web_search",
    "tool_write_file",
    "tools_all",
    "tools_code",
    "tools_data",
    "tools_file",
    "tools_interactive",
    "tools_preset",
    "tools_web",
]
