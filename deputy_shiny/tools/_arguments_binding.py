"""A callable's signature read, and validated tool arguments bound to its parameters.

:mod:`deputy_shiny.tools._function_schema` describes the arguments; this module decides,
when a tool is defined, how the described properties map onto the function's parameters
(by keyword, or by position for callables like ``str.upper``), and resolves string
annotations (PEP 563) naming the one that fails.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import InvalidToolError, ToolArgumentsError

# --------------------------------------------------------------------------- binding


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


@dataclass(frozen=True)
class _Binder:
    """Turns validated arguments (by name) into ``(args, kwargs)`` for the function."""

    mode: Literal["keyword", "positional"]
    # keyword mode: every positional-only parameter of the function, in order
    positional_only: tuple[inspect.Parameter, ...] = ()
    # positional mode: the schema's property order, and fill-ins for gaps
    order: tuple[str, ...] = ()
    fill: Mapping[str, Any] | None = None

    def bind(self, arguments: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        kwargs = dict(arguments)
        args: list[Any] = []
        if self.mode == "keyword":
            names = [p.name for p in self.positional_only]
            last = max((i for i, n in enumerate(names) if n in kwargs), default=-1)
            for param in self.positional_only[: last + 1]:
                if param.name in kwargs:
                    args.append(kwargs.pop(param.name))
                elif param.default is not inspect.Parameter.empty:
                    args.append(param.default)
                else:
                    raise ToolArgumentsError(f"Missing required argument {param.name!r}.")
            return args, kwargs
        fill = self.fill or {}
        last = max((i for i, n in enumerate(self.order) if n in kwargs), default=-1)
        for name in self.order[: last + 1]:
            if name in kwargs:
                args.append(kwargs.pop(name))
            elif name in fill:
                args.append(fill[name])
            else:
                later = [n for n in self.order[self.order.index(name) + 1 :] if n in arguments]
                raise ToolArgumentsError(
                    f"Argument {name!r} is needed when {later[0]!r} is given "
                    "(the arguments are passed by position)."
                )
        return args, kwargs


def _callable_label(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _make_binder(
    fn: Callable[..., Any],
    names: Sequence[str],
    *,
    tool_name: str,
    schema_defaults: Mapping[str, Any],
    what: str,
) -> _Binder:
    """Decide how properties ``names`` map onto ``fn``'s parameters (checked at definition)."""
    try:
        sig = inspect.signature(fn)
    except (ValueError, TypeError):
        return _Binder("positional", order=tuple(names), fill=dict(schema_defaults))
    params = list(sig.parameters.values())
    named = {p.name: p for p in params if p.kind not in _VARIADIC}
    has_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    has_var_pos = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    label = _callable_label(fn)
    prefix = f"tool {tool_name!r}: {what}"

    unmatched = [n for n in names if n not in named]
    all_positional_only = all(p.kind is inspect.Parameter.POSITIONAL_ONLY for p in named.values())
    if (
        (unmatched and not has_var_kw)
        and all_positional_only
        and not any(n in named for n in names)
    ):
        # e.g. str.upper(self, /): pass the values by position in property order.
        positional = [p for p in params if p.kind in _POSITIONAL]
        if len(positional) < len(names) and not has_var_pos:
            raise InvalidToolError(
                f"{prefix} has {len(names)} properties but {label} takes only "
                f"{len(positional)} positional arguments."
            )
        fill = dict(schema_defaults)
        for name, param in zip(names, positional, strict=False):
            if param.default is not inspect.Parameter.empty:
                fill[name] = param.default
        for param in positional[len(names) :]:
            if param.default is inspect.Parameter.empty:
                raise InvalidToolError(
                    f"{prefix} does not give {label}'s required parameter {param.name!r}."
                )
        return _Binder("positional", order=tuple(names), fill=fill)

    if unmatched and not has_var_kw:
        accepted = ", ".join(repr(n) for n in named) or "none"
        raise InvalidToolError(
            f"{prefix} has properties {', '.join(repr(n) for n in unmatched)} that match no "
            f"parameter of {label} (its parameters: {accepted}). Rename them to match, or "
            "give the function a **kwargs parameter."
        )
    for param in named.values():
        if param.default is inspect.Parameter.empty and param.name not in names:
            raise InvalidToolError(
                f"{prefix} does not describe {label}'s required parameter {param.name!r}."
            )
    positional_only = tuple(p for p in params if p.kind is inspect.Parameter.POSITIONAL_ONLY)
    return _Binder("keyword", positional_only=positional_only)


def _unwrap(fn: Any) -> Any:
    """The underlying function of a partial (for docstrings and annotations)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _globals_of(fn: Any) -> dict[str, Any]:
    target = _unwrap(fn)
    namespace = getattr(target, "__globals__", None)
    if namespace is None:
        for klass in type(target).__mro__:  # a callable object: its class's __call__
            if "__call__" in klass.__dict__:
                namespace = getattr(klass.__dict__["__call__"], "__globals__", None)
                break
    return dict(namespace or {})


def _resolved_signature(fn: Callable[..., Any], tool_name: str) -> inspect.Signature:
    """The signature of ``fn`` with string annotations (PEP 563) resolved."""
    label = _callable_label(fn)
    try:
        raw = inspect.signature(fn)
    except (ValueError, TypeError) as e:
        raise InvalidToolError(
            f"tool {tool_name!r}: cannot read the signature of {label} ({e}). Pass arguments= "
            "with a pydantic model or a JSON schema."
        ) from e
    if not any(isinstance(p.annotation, str) for p in raw.parameters.values()):
        return raw
    try:
        return inspect.signature(fn, eval_str=True)
    except Exception:
        pass  # resolve parameter by parameter below, to name the one that fails
    namespace = _globals_of(fn)
    params = []
    for param in raw.parameters.values():
        if isinstance(param.annotation, str):
            try:
                resolved = eval(param.annotation, namespace)
            except Exception as e:
                raise InvalidToolError(
                    f"tool {tool_name!r}: the type hint {param.annotation!r} of parameter "
                    f"{param.name!r} of {label} cannot be resolved ({type(e).__name__}: "
                    f"{_first_line(e)}). Define the type at module level."
                ) from e
            param = param.replace(annotation=resolved)
        params.append(param)
    # Only the return annotation failed: it does not matter for the arguments.
    return raw.replace(parameters=params, return_annotation=inspect.Signature.empty)
