"""Tools the model can call: define them with :func:`tool`, describe their effects with
:func:`tool_annotations`, and inspect them with :func:`tool_metadata`.

Example:
    >>> from deputy_shiny.tools import tool
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two numbers.'''
    ...     return a + b
    >>> add.name, add(1, 2)
    ('add', 3)
"""

from ._context import ToolContext, current_tool_context, default_tool_context, tool_context
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

__all__ = [
    "EffectiveAnnotations",
    "Tool",
    "ToolAnnotations",
    "ToolContext",
    "ToolMetadata",
    "ToolSource",
    "current_tool_context",
    "default_tool_context",
    "effective_annotations",
    "format_tool_output",
    "tool",
    "tool_annotations",
    "tool_context",
    "tool_metadata",
]
