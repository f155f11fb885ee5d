"""What kind of callable a user gave us: the one check shared by tools and hooks.

Examples:
    >>> async def fetch() -> None: ...
    >>> class Handler:
    ...     async def __call__(self) -> None: ...
    >>> is_async_callable(fetch), is_async_callable(Handler()), is_async_callable(print)
    (True, True, False)
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

__all__ = ["dunder_call", "is_async_callable"]


def dunder_call(obj: Any) -> Any:
    """The ``__call__`` function of a callable object's class (None if it has none)."""
    for klass in type(obj).__mro__:
        if "__call__" in klass.__dict__:
            return klass.__dict__["__call__"]
    return None


def is_async_callable(fn: Any) -> bool:
    """Whether calling ``fn`` returns an awaitable: an async function, a partial of one,
    or an object whose class has an async ``__call__``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    if not (inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn)):
        return inspect.iscoroutinefunction(dunder_call(fn))
    return False
