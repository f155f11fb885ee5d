"""weakly: a function of an agent, bound to it without keeping it alive.

A component is given what it reads of its agent as functions (its current permissions,
model, the next run's deps). Bound strongly they would make a cycle (agent -> component
-> function -> agent), and an Agent would then be freed only by the garbage collector,
not as soon as its last user lets it go, as it is without one: its ``run_python``
interpreters and MCP connections would outlive it until a collection.

Examples:
    >>> class Box:
    ...     def __init__(self) -> None:
    ...         self.value = 1
    >>> box = Box()
    >>> read = weakly(lambda b: b.value, box)
    >>> read()
    1
    >>> del box
    >>> read()
    Traceback (most recent call last):
    ...
    ReferenceError: the agent this belongs to is gone
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

__all__ = ["weakly"]

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")


def weakly(fn: Callable[Concatenate[T, P], R], owner: T) -> Callable[P, R]:
    """``fn`` with ``owner`` as its first argument, holding ``owner`` weakly (``fn`` must
    not refer to ``owner`` itself: pass a function of it, e.g. ``lambda a: a._x``)."""
    ref = weakref.ref(owner)

    def bound(*args: P.args, **kwargs: P.kwargs) -> R:
        target = ref()
        if target is None:
            raise ReferenceError("the agent this belongs to is gone")
        return fn(target, *args, **kwargs)

    return bound
