"""Shiny module decorators that keep the function's signature and docstring, and return
values Shiny Express does not try to render.

py-shiny's ``module.server`` and ``module.ui`` return a bare ``wrapper(id, *args,
**kwargs)``: ``help(agent_chat_server)`` then shows neither the real parameters nor the
docstring. :func:`server` and :func:`ui` wrap the same way, then copy the name and the
docstring (``functools.update_wrapper``) and set ``__signature__`` to the function's own,
with ``input, output, session`` replaced by ``id`` (as py-shiny documents it).

A module runs in a session scope of its own (``chat-``); :func:`caller_session` tells
the kit server running now which session called it (the app's, or the app's own
module's), where the app's tools belong.

Shiny Express renders the value of every bare expression line of the app body, and
``htmltools`` fails on any value that is not a tag, text, None or ``...``: a bare
``permission_mode_server("mode", agent)`` line crashed the app at startup. A value a
kit server returns is therefore *tagifiable as nothing* (:class:`ExpressInert`,
:class:`InertValue`): Express renders an empty tag list, Core code uses it as before.

Examples:
    >>> import inspect
    >>> @server
    ... def echo_server(input, output, session, text: str, *, loud: bool = False) -> None:
    ...     '''Echo ``text``.'''
    >>> str(inspect.signature(echo_server))
    "(id: 'str', text: 'str', *, loud: 'bool' = False) -> 'None'"
    >>> echo_server.__doc__
    'Echo ``text``.'
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from htmltools import TagList
from shiny import module, reactive
from shiny.session import Session, get_current_session

__all__ = ["ExpressInert", "InertValue", "caller_session", "server", "ui"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

_caller: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "deputy_kit_caller_session", default=None
)

_ID = inspect.Parameter("id", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="str")


def _with_id(wrapper: Callable[..., Any], fn: Callable[..., Any], drop: int) -> None:
    """Give ``wrapper`` ``fn``'s name, docstring and signature, its first ``drop``
    parameters replaced by ``id``."""
    functools.update_wrapper(wrapper, fn)
    signature = inspect.signature(fn)
    parameters = [_ID, *list(signature.parameters.values())[drop:]]
    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    # update_wrapper copied fn's annotations; keep them true to the new signature.
    dropped = set(list(signature.parameters)[:drop])
    kept = {k: v for k, v in fn.__annotations__.items() if k not in dropped}
    wrapper.__annotations__ = {"id": "str", **kept}


def server(fn: Callable[Concatenate[Any, Any, Any, P], R]) -> Callable[Concatenate[str, P], R]:
    """``shiny.module.server`` that keeps ``fn``'s docstring and signature (``id`` first).

    Examples:
        >>> @server
        ... def demo_server(input, output, session, n: int) -> None:
        ...     '''Count to ``n``.'''
        >>> list(inspect.signature(demo_server).parameters)
        ['id', 'n']
    """
    inner = module.server(fn)

    def wrapper(id: str, *args: Any, **kwargs: Any) -> Any:
        # The module runs in its own session scope: keep the caller's for it.
        token = _caller.set(get_current_session())
        try:
            return inner(id, *args, **kwargs)
        finally:
            _caller.reset(token)

    _with_id(wrapper, fn, drop=3)
    return wrapper


def caller_session() -> Session | None:
    """The session (the app's, or its own module's) that called the kit server now
    running: where the app's own code runs, with its namespace.

    Examples:
        >>> caller_session() is None  # not inside a kit server
        True
    """
    return _caller.get()


def ui(fn: Callable[P, R]) -> Callable[Concatenate[str, P], R]:
    """``shiny.module.ui`` that keeps ``fn``'s docstring and signature (``id`` first).

    Examples:
        >>> @ui
        ... def demo_ui(label: str = "Go"):
        ...     '''A button.'''
        >>> str(inspect.signature(demo_ui))
        "(id: 'str', label: 'str' = 'Go')"
    """
    wrapper = module.ui(fn)
    _with_id(wrapper, fn, drop=0)
    return wrapper


class ExpressInert:
    """A mixin for what a kit server returns: Shiny Express renders it as nothing.

    Examples:
        >>> len(ExpressInert().tagify())
        0
    """

    def tagify(self) -> TagList:
        """Nothing to show: a bare ``x_server(...)`` line in an Express app adds no UI."""
        return TagList()


class InertValue(reactive.Value[T], ExpressInert):
    """A ``reactive.Value`` that Shiny Express renders as nothing (see
    :class:`ExpressInert`); in every other way a ``reactive.Value``.

    Examples:
        >>> from shiny import reactive
        >>> value = InertValue("standard", name="mode")
        >>> isinstance(value, reactive.Value), len(value.tagify())
        (True, 0)
    """
