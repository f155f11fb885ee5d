"""Where a host runs tool functions: an ambient scope it puts around each call.

A host that runs agents inside a framework with ambient state of its own (the Shiny
kit: the session and module namespace that ``ui.update_*`` resolves ids in, the
reactive context an input read needs) sets a :data:`ToolScope` with :func:`tool_scope`
around a run. As each call starts, on the event loop, :meth:`Tool.invoke
<deputy_shiny.tools.Tool.invoke>` asks the scope for a context manager (or None) and
enters it where the tool's function runs: in the worker thread for a sync tool, in the
call's own task for an async one. So a scope can make what is not thread-safe on the
loop (the call starts there) and set context variables where the function reads them.
The runtime knows nothing of what a scope does: it stays framework-free.

Examples:
    >>> import asyncio, contextlib
    >>> from deputy_shiny.tools import tool
    >>> from deputy_shiny.tools._scope import tool_scope
    >>> seen = []
    >>> @contextlib.contextmanager
    ... def around(name):
    ...     seen.append(f"enter {name}")
    ...     yield
    ...     seen.append(f"exit {name}")
    >>> def double(x: int) -> int:
    ...     '''Double x.'''
    ...     return 2 * x
    >>> async def run():
    ...     with tool_scope(lambda t: around(t.name)):
    ...         return await tool(double).invoke({"x": 4})
    >>> asyncio.run(run()), seen
    (8, ['enter double', 'exit double'])
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

__all__ = ["ToolScope", "call_within", "scope_for", "tool_scope"]

T = TypeVar("T")

ToolScope = Callable[[Any], AbstractContextManager[object] | None]
"""``scope(tool) -> context manager | None``: called on the event loop as a call of
``tool`` (a :class:`~deputy_shiny.tools.Tool`) starts; None runs it as it is."""

_current: contextvars.ContextVar[ToolScope | None] = contextvars.ContextVar(
    "deputy_tool_scope", default=None
)


@contextmanager
def tool_scope(scope: ToolScope | None) -> Iterator[None]:
    """Tool calls started in this block, and in tasks made in it, go through ``scope``.

    Examples:
        >>> with tool_scope(lambda tool: None):
        ...     scope_for(object()) is None
        True
    """
    token = _current.set(scope)
    try:
        yield
    finally:
        _current.reset(token)


def scope_for(tool: Any) -> AbstractContextManager[object] | None:
    """The context manager the current scope gives a call of ``tool`` (None: no scope).

    Examples:
        >>> scope_for(object()) is None
        True
    """
    scope = _current.get()
    return None if scope is None else scope(tool)


def call_within(
    scope: AbstractContextManager[object], fn: Callable[..., T], /, *args: Any, **kwargs: Any
) -> T:
    """``fn(*args, **kwargs)`` inside ``scope`` (what a worker thread runs).

    Examples:
        >>> import contextlib
        >>> call_within(contextlib.nullcontext(), max, 1, 2)
        2
    """
    with scope:
        return fn(*args, **kwargs)
