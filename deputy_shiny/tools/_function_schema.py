"""Describe a callable's arguments as JSON schema, and validate and bind a model's arguments.

This is the one place that turns a Python signature (type hints, defaults, docstring)
into the JSON schema a provider sends to the model, and turns the model's JSON
arguments back into a call. Three sources of truth are supported:

- the function's own signature (:func:`arguments_schema` with ``arguments=None``),
  validated by a pydantic model built from the parameters;
- a pydantic ``BaseModel`` subclass (``arguments=Model``);
- a JSON-schema dict for the whole argument object (``arguments={...}``), validated
  with ``jsonschema``.

The descriptions in the schema (cleaned docstrings, ``Args:`` sections) come from
:mod:`deputy_shiny.tools._descriptions`; its functions stay importable from here.

Examples:
    >>> def add(a: int, b: int = 1) -> int:
    ...     '''Add two numbers.
    ...
    ...     Args:
    ...         a: The first number.
    ...         b: The second number.
    ...     '''
    ...     return a + b
    >>> schema = arguments_schema(add, tool_name="add")
    >>> schema.json_schema["properties"]["a"]
    {'description': 'The first number.', 'type': 'integer'}
    >>> schema.bind(schema.validate('{"a": "2"}', tool_name="add"))
    ([], {'a': 2})
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import re
import threading
import types
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, PydanticJsonSchemaWarning
from pydantic_core import PydanticUndefined

from .._util.json import loads_bounded
from ..errors import InvalidToolError, ToolArgumentsError
from ._descriptions import (
    clean_description,
    clean_schema_descriptions,
    describe_schema,
    docstring_summary,
    parameter_descriptions,
)

__all__ = [
    "ArgumentsSchema",
    "arguments_schema",
    "clean_description",
    "clean_schema_descriptions",
    "describe_schema",
    "docstring_summary",
    "parameter_descriptions",
]

_MAX_PROBLEMS = 10
_EXCERPT = 80


# --------------------------------------------------------------------------- schema helpers


class _NoFieldTitles(GenerateJsonSchema):
    """JSON schema generator that leaves out the per-property ``title`` noise."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _model_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    with warnings.catch_warnings():
        # Defaults that are not JSON (sentinels, objects) are just left out of the schema.
        warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
        return model.model_json_schema(by_alias=True, schema_generator=_NoFieldTitles)


def _tidy_object_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Order the top-level keys and make sure ``properties`` and ``required`` are present."""
    rest = {k: v for k, v in schema.items() if k not in ("title", "description")}
    tidy: dict[str, Any] = {
        "type": "object",
        "properties": rest.pop("properties", {}),
        "required": list(rest.pop("required", [])),
    }
    rest.pop("type", None)
    if "additionalProperties" in rest:
        tidy["additionalProperties"] = rest.pop("additionalProperties")
    tidy.update(rest)
    return tidy


def _example_call(json_schema: Mapping[str, Any]) -> str:
    props = json_schema.get("properties") or {}
    parts = [f'"{name}": <{describe_schema(s)}>' for name, s in list(props.items())[:6]]
    if len(props) > 6:
        parts.append("...")
    return "{" + ", ".join(parts) + "}"


def _short_json(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, default=str, ensure_ascii=False)
    except Exception:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _format_loc(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _arguments_error(tool_name: str, problems: list[str]) -> ToolArgumentsError:
    shown = problems[:_MAX_PROBLEMS]
    if len(problems) > len(shown):
        shown.append(f"... and {len(problems) - len(shown)} more problems")
    lines = "\n".join(f"- {p}" for p in shown)
    return ToolArgumentsError(
        f"Invalid arguments for tool {tool_name!r}:\n{lines}\n"
        "Fix the arguments and call the tool again.",
        tool_name=tool_name,
    )


def _parse_raw(
    raw: str | Mapping[str, Any] | None, tool_name: str, schema: dict[str, Any]
) -> dict[str, Any]:
    """Parse the model's raw arguments into a dict; ``""``, ``None`` and ``null`` mean ``{}``."""
    example = _example_call(schema)
    if raw is None:
        return {}
    if isinstance(raw, (bytes, bytearray)):
        raw = bytes(raw).decode("utf-8", errors="replace")
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            value = loads_bounded(raw)
        except json.JSONDecodeError as e:
            if len(raw) <= _EXCERPT:
                excerpt = raw
            else:
                start = max(0, e.pos - _EXCERPT // 2)
                excerpt = raw[start : start + _EXCERPT]
                excerpt = (
                    ("..." if start else "")
                    + excerpt
                    + ("..." if start + _EXCERPT < len(raw) else "")
                )
            raise ToolArgumentsError(
                f"Invalid arguments for tool {tool_name!r}: not valid JSON ({e.msg} at line "
                f"{e.lineno} column {e.colno}) in {excerpt!r}. "
                f"Send the arguments as one JSON object, e.g. {example}.",
                tool_name=tool_name,
            ) from None
        if value is None:
            return {}
    else:
        value = raw
    if not isinstance(value, Mapping):
        kind = {
            list: "an array",
            str: "a string",
            bool: "a boolean",
            int: "a number",
            float: "a number",
        }
        what = kind.get(type(value), f"a {type(value).__name__}")
        raise ToolArgumentsError(
            f"Invalid arguments for tool {tool_name!r}: the arguments must be a JSON object "
            f"with named arguments, e.g. {example}, not {what} ({_short_json(value)}).",
            tool_name=tool_name,
        )
    return dict(value)


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


# --------------------------------------------------------------------------- error locations


_PYDANTIC_TAG_TYPES = {
    "int": "integer",
    "str": "string",
    "float": "number",
    "bool": "boolean",
    "none": "null",
    "list": "array",
    "dict": "object",
}


def _split_loc(
    loc: tuple[Any, ...], root: Mapping[str, Any]
) -> tuple[tuple[Any, ...], str | None, int]:
    """Split a pydantic error location into the value's path and the first union tag in it.

    Pydantic puts the name of the union member it tried into ``loc`` (``('x', 'int')``);
    walking the JSON schema alongside tells those tags from real keys. Returns
    ``(path without tags, first tag or None, index in path where that union sits)``.
    """
    defs = root.get("$defs", {}) if isinstance(root, Mapping) else {}
    node: Any = root
    path: list[Any] = []
    tag: str | None = None
    union_at = 0
    for part in loc:
        node = _resolve_ref(node, defs)
        branches = node.get("anyOf") or node.get("oneOf") if isinstance(node, Mapping) else None
        if isinstance(branches, list):
            real = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
            if len(real) == 1:  # Optional[X]: pydantic adds no tag
                node = _resolve_ref(real[0], defs)
            elif isinstance(part, str) and isinstance(node, Mapping):
                mapping = (node.get("discriminator") or {}).get("mapping") or {}
                if part in mapping:  # a discriminated union picked its member: no failure
                    node = {"$ref": mapping[part]}
                    continue
                if tag is None:
                    tag, union_at = part, len(path)
                node = _pick_branch(real, part)
                continue
        if not isinstance(node, Mapping):
            path.append(part)
            continue
        path.append(part)
        properties = node.get("properties") or {}
        if isinstance(part, int):
            prefix = node.get("prefixItems")
            if isinstance(prefix, list) and part < len(prefix):
                node = prefix[part]
            else:
                node = node.get("items")
        elif part in properties:
            node = properties[part]
        else:
            extra = node.get("additionalProperties")
            node = extra if isinstance(extra, Mapping) else None
    return tuple(path), tag, union_at


def _resolve_ref(node: Any, defs: Mapping[str, Any]) -> Any:
    for _ in range(20):
        if not (isinstance(node, Mapping) and isinstance(node.get("$ref"), str)):
            return node
        node = defs.get(node["$ref"].rsplit("/", 1)[-1])
    return node


def _pick_branch(branches: list[Any], tag: str) -> Any:
    base = tag.split("[", 1)[0]
    for branch in branches:
        if not isinstance(branch, Mapping):
            continue
        ref = branch.get("$ref")
        if isinstance(ref, str) and ref.rsplit("/", 1)[-1] == tag:
            return branch
        if branch.get("type") == _PYDANTIC_TAG_TYPES.get(base):
            return branch
    return None


# --------------------------------------------------------------------------- schemas


class ArgumentsSchema(ABC):
    """The JSON schema of a tool's arguments, with a validator and a binder for calls.

    Build one with :func:`arguments_schema`.

    Examples:
        >>> s = arguments_schema(lambda x: x, tool_name="echo", arguments={
        ...     "type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]})
        >>> s.validate({"x": "hi"}, tool_name="echo")
        {'x': 'hi'}
    """

    def __init__(self, json_schema: dict[str, Any], binder: _Binder) -> None:
        # What the model reads: descriptions are prose, without examples or doc sections.
        self._json_schema: dict[str, Any] = clean_schema_descriptions(json_schema)
        self._binder = binder

    @property
    def json_schema(self) -> dict[str, Any]:
        """The argument object's JSON schema (the tool's ``parameters``); do not mutate."""
        return self._json_schema

    @property
    def property_names(self) -> list[str]:
        """The argument names the model sends, in schema order."""
        return list(self._json_schema.get("properties", {}))

    def validate(self, raw: str | Mapping[str, Any] | None, *, tool_name: str) -> dict[str, Any]:
        """Parse (if text) and validate the model's arguments; raise ToolArgumentsError if bad."""
        obj = _parse_raw(raw, tool_name, self._json_schema)
        problems, values = self._validate_object(obj)
        if problems:
            raise _arguments_error(tool_name, problems)
        return values

    def bind(self, arguments: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """Turn validated arguments into ``(args, kwargs)`` for calling the function."""
        return self._binder.bind(arguments)

    @abstractmethod
    def _validate_object(self, obj: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
        """Return (problems, validated values); values are ignored when there are problems."""

    # shared message helpers --------------------------------------------------------

    def _expected(self, name: Any) -> str | None:
        prop = self._json_schema.get("properties", {}).get(name)
        return describe_schema(prop) if prop is not None else None

    def _unknown(self, name: str) -> str:
        allowed = ", ".join(repr(n) for n in self.property_names)
        if allowed:
            return f"{name!r}: unknown argument; the arguments are {allowed}"
        return f"{name!r}: unknown argument; this tool takes no arguments"

    def _missing(self, name: str) -> str:
        expected = self._expected(name)
        suffix = f" (expected {expected})" if expected else ""
        return f"{name!r}: missing required argument{suffix}"

    def _pydantic_problems(self, error: ValidationError) -> list[str]:
        problems: list[str] = []
        # Errors from the branches of one union, grouped under the union value's path.
        unions: dict[tuple[Any, ...], tuple[int, list[str], list[Any]]] = {}
        for err in error.errors(include_url=False):
            path, tag, union_at = _split_loc(tuple(err.get("loc", ())), self._json_schema)
            if tag is None:
                problems.append(self._pydantic_problem(path, dict(err)))
                continue
            key = path[:union_at]
            if key not in unions:
                problems.append("")  # filled below, at the place of the first branch error
                unions[key] = (len(problems) - 1, [], [])
            sub = _format_loc(path[union_at:])
            unions[key][1].append(f"as {tag}: {f'{sub!r}: ' if sub else ''}{err['msg']}")
            if not sub:
                unions[key][2].append(err.get("input"))
        for key, (index, branches, inputs) in unions.items():
            detail = f"matches none of the allowed types ({'; '.join(branches)})"
            if inputs:
                detail += f"; got {_short_json(inputs[0])}"
            problems[index] = self._located(key, detail)
        return problems

    def _located(self, path: tuple[Any, ...], detail: str) -> str:
        expected = self._expected(path[0]) if len(path) == 1 else None
        if expected:
            detail += f"; expected {expected}"
        return f"{_format_loc(path) or '(arguments)'!r}: {detail}"

    def _pydantic_problem(self, path: tuple[Any, ...], err: dict[str, Any]) -> str:
        if err["type"] == "missing":
            if len(path) == 1:
                return self._missing(str(path[0]))
            return f"{_format_loc(path)!r}: missing required field"
        if err["type"] == "extra_forbidden":
            if len(path) == 1:
                return self._unknown(str(path[0]))
            return f"{_format_loc(path)!r}: unknown field"
        return self._located(path, f"{err['msg']}; got {_short_json(err.get('input'))}")


class _SignatureSchema(ArgumentsSchema):
    """Arguments described by the function's own signature, validated by a pydantic model."""

    def __init__(self, fn: Callable[..., Any], *, tool_name: str) -> None:
        sig = _resolved_signature(fn, tool_name)
        descriptions = parameter_descriptions(inspect.getdoc(_unwrap(fn)))
        fields: dict[str, Any] = {}
        self._param_names: dict[str, str] = {}  # internal field name -> parameter name
        self._always: set[str] = set()  # fields passed even when the model omits them
        self._none_means_default: set[str] = set()  # parameters whose default is None
        label = _callable_label(fn)
        for index, param in enumerate(sig.parameters.values()):
            where = f"tool {tool_name!r}: parameter {param.name!r} of {label}"
            if param.kind is inspect.Parameter.VAR_POSITIONAL:
                raise InvalidToolError(
                    f"tool {tool_name!r}: {label} takes *{param.name}, which cannot be described "
                    "to a model. Use named parameters, or pass arguments= with a schema."
                )
            if param.kind is inspect.Parameter.VAR_KEYWORD:
                raise InvalidToolError(
                    f"tool {tool_name!r}: {label} takes **{param.name}, which cannot be "
                    "described to a model. Use named parameters, or pass arguments= with a schema."
                )
            if param.annotation is inspect.Parameter.empty:
                raise InvalidToolError(
                    f"{where} has no type hint. Add one (e.g. `{param.name}: str`), or pass "
                    "arguments= with a schema."
                )
            annotation = param.annotation
            try:
                has_description = FieldInfo.from_annotation(annotation).description is not None
            except Exception as e:
                raise InvalidToolError(
                    f"{where} has an unusable type hint {annotation!r}: {e}"
                ) from e
            extra: dict[str, Any] = {
                "alias": param.name,
                "validation_alias": param.name,
                "serialization_alias": param.name,
            }
            if not has_description and param.name in descriptions:
                extra["description"] = descriptions[param.name]
            internal = f"p{index}"
            default = param.default
            if default is inspect.Parameter.empty:
                default = PydanticUndefined
                self._always.add(internal)
            elif isinstance(default, FieldInfo):
                self._always.add(internal)
            elif default is None:
                self._none_means_default.add(param.name)
            fields[internal] = (Annotated[annotation, Field(**extra)], default)
            self._param_names[internal] = param.name

        config = ConfigDict(extra="forbid", validate_by_alias=True, validate_by_name=False)
        try:
            model = create_model("Arguments", __config__=config, **fields)
            json_schema = _model_json_schema(model)
        except Exception as e:
            culprit = self._culprit(fields, config)
            name = f"parameter {culprit!r}" if culprit else "its parameters"
            raise InvalidToolError(
                f"tool {tool_name!r}: cannot describe {name} of {label} as JSON schema "
                f"({type(e).__name__}: {_first_line(e)}). Use JSON-compatible types (str, int, "
                "float, bool, list, dict, Literal, enums, pydantic models, dataclasses), or pass "
                "arguments= with a schema."
            ) from e
        self._model = model
        binder = _make_binder(
            fn,
            list(sig.parameters),
            tool_name=tool_name,
            schema_defaults={},
            what="the signature",
        )
        super().__init__(_tidy_object_schema(json_schema), binder)

    def _culprit(self, fields: Mapping[str, Any], config: ConfigDict) -> str | None:
        for internal, spec in fields.items():
            try:
                probe = create_model("Probe", __config__=config, **{internal: spec})
                _model_json_schema(probe)
            except Exception:
                return self._param_names[internal]
        return None

    def _validate_object(self, obj: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
        # Models often send null for an optional argument: treat it as "use the default".
        for name in self._none_means_default:
            if name in obj and obj[name] is None:
                del obj[name]
        try:
            instance = self._model.model_validate(obj)
        except ValidationError as e:
            return self._pydantic_problems(e), {}
        given = instance.model_fields_set | self._always
        return [], {
            self._param_names[f]: getattr(instance, f) for f in self._param_names if f in given
        }


class _ModelSchema(ArgumentsSchema):
    """Arguments described by a pydantic model; the function gets its fields as keywords."""

    def __init__(self, fn: Callable[..., Any], model: type[BaseModel], *, tool_name: str) -> None:
        extra = model.model_config.get("extra")
        validating: type[BaseModel] = model
        if extra not in ("allow", "forbid"):
            # Unknown keys are errors the model should hear about, not silently dropped.
            validating = type(
                model.__name__,
                (model,),
                {"model_config": ConfigDict(extra="forbid"), "__module__": model.__module__},
            )
        try:
            json_schema = _model_json_schema(validating)
        except Exception as e:
            raise InvalidToolError(
                f"tool {tool_name!r}: cannot make a JSON schema from {model.__name__} "
                f"({type(e).__name__}: {_first_line(e)})."
            ) from e
        self._model = validating
        self._fields = list(model.model_fields)
        binder = _make_binder(
            fn,
            self._fields,
            tool_name=tool_name,
            schema_defaults={},  # every field is passed, so there are no gaps to fill
            what=f"arguments model {model.__name__}",
        )
        super().__init__(_tidy_object_schema(json_schema), binder)

    def _validate_object(self, obj: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
        try:
            instance = self._model.model_validate(obj)
        except ValidationError as e:
            return self._pydantic_problems(e), {}
        values = {name: getattr(instance, name) for name in self._fields}
        values.update(instance.model_extra or {})
        return [], values


class _JsonSchemaSchema(ArgumentsSchema):
    """Arguments described by a JSON-schema dict, validated with ``jsonschema``."""

    def __init__(
        self, fn: Callable[..., Any], schema: Mapping[str, Any], *, tool_name: str
    ) -> None:
        prefix = f"tool {tool_name!r}: arguments="
        schema_dict: dict[str, Any] = copy.deepcopy(dict(schema))
        schema = schema_dict
        if schema.get("type") != "object":
            raise InvalidToolError(
                f'{prefix} must be a JSON schema for an object, like {{"type": "object", '
                f'"properties": {{"x": {{"type": "string"}}}}, "required": ["x"]}}; '
                f"got type {schema.get('type')!r}."
            )
        properties = schema_dict.setdefault("properties", {})
        if not isinstance(properties, Mapping):
            raise InvalidToolError(f"{prefix} 'properties' must be an object, got {properties!r}.")
        schema_dict.setdefault("additionalProperties", False)
        # jsonschema (with referencing, attrs, rpds) costs ~50 ms to import: only here.
        import jsonschema  # type: ignore[import-untyped]

        validator_cls = jsonschema.validators.validator_for(
            schema, default=jsonschema.Draft202012Validator
        )
        try:
            _check_schema_once(validator_cls, schema)
        except jsonschema.SchemaError as e:
            where = _format_loc(list(e.absolute_path)) or "the top level"
            raise InvalidToolError(
                f"{prefix} is not a valid JSON schema at {where}: {e.message}"
            ) from None
        unknown_required = [n for n in schema.get("required", []) if n not in properties]
        if unknown_required:
            raise InvalidToolError(
                f"{prefix} requires {', '.join(repr(n) for n in unknown_required)}, "
                "which are not in its properties."
            )
        self._validator = validator_cls(schema)
        defaults = {
            name: prop["default"]
            for name, prop in properties.items()
            if isinstance(prop, Mapping) and "default" in prop
        }
        binder = _make_binder(
            fn,
            list(properties),
            tool_name=tool_name,
            schema_defaults=defaults,
            what="the arguments schema",
        )
        super().__init__(_tidy_object_schema(schema), binder)

    def _validate_object(self, obj: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
        problems: list[str] = []
        seen: set[str] = set()
        errors = sorted(
            self._validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path]
        )
        for error in errors:
            path = list(error.absolute_path)
            location = _format_loc(path)
            if error.validator == "required" and isinstance(error.instance, Mapping):
                missing = [n for n in error.validator_value if n not in error.instance]
                for name in missing:
                    text = self._missing(name) if not path else f"{location!r}: missing {name!r}"
                    if text not in seen:
                        seen.add(text)
                        problems.append(text)
                continue
            if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
                known = (
                    error.schema.get("properties", {}) if isinstance(error.schema, Mapping) else {}
                )
                patterns = (
                    error.schema.get("patternProperties", {})
                    if isinstance(error.schema, Mapping)
                    else {}
                )
                extras = [
                    k
                    for k in error.instance
                    if k not in known and not any(re.search(p, k) for p in patterns)
                ]
                for name in extras:
                    text = (
                        self._unknown(name) if not path else f"{location!r}: unknown field {name!r}"
                    )
                    if text not in seen:
                        seen.add(text)
                        problems.append(text)
                continue
            detail = error.message
            if len(path) == 1:
                expected = self._expected(path[0])
                if expected:
                    detail += f"; expected {expected}"
            text = f"{location or '(arguments)'!r}: {detail}"
            if text not in seen:
                seen.add(text)
                problems.append(text)
        return problems, dict(obj)


# --------------------------------------------------------------------------- entry point


def arguments_schema(
    fn: Callable[..., Any],
    *,
    tool_name: str,
    arguments: Mapping[str, Any] | type[BaseModel] | None = None,
) -> ArgumentsSchema:
    """Build the arguments schema of ``fn``: from its signature, or from ``arguments=``.

    ``arguments`` is a pydantic ``BaseModel`` subclass or a JSON-schema dict for the
    whole argument object. Raises :class:`InvalidToolError` naming the parameter or
    property that cannot be described.

    Examples:
        >>> def greet(name: str) -> str:
        ...     return "hi " + name
        >>> arguments_schema(greet, tool_name="greet").json_schema["required"]
        ['name']
    """
    if arguments is None:
        return _signature_schema(fn, tool_name)
    if isinstance(arguments, type) and issubclass(arguments, BaseModel):
        return _ModelSchema(fn, arguments, tool_name=tool_name)
    if isinstance(arguments, Mapping):
        return _JsonSchemaSchema(fn, arguments, tool_name=tool_name)
    raise InvalidToolError(
        f"tool {tool_name!r}: arguments= must be a pydantic BaseModel subclass or a JSON schema "
        f"dict, got {type(arguments).__name__}."
    )


# A module-level function's signature schema, built once a process: the kit makes the
# same built-in tools for every browser session (``tools_preset("standard")`` was ~9
# pydantic models and JSON schemas a session). A schema is read-only once built (a
# re-wrapped Tool already shares its base's). Only module- or class-level functions
# are cached: they live as long as their module, so the cache holds nothing a session
# made (a closure's schema refers to the closure, and would keep it alive).
_SCHEMA_CACHE_SIZE = 512
_schema_cache: dict[tuple[Callable[..., Any], bool, str], ArgumentsSchema] = {}
_schema_cache_lock = threading.Lock()


def _signature_schema(fn: Callable[..., Any], tool_name: str) -> ArgumentsSchema:
    """``_SignatureSchema(fn)``, from the cache when ``fn`` is a module-level function
    or a method of a module-level class (bound to any instance: the schema holds
    neither the instance nor the function)."""
    bound = isinstance(fn, types.MethodType)
    target: Any = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if not (isinstance(target, types.FunctionType) and "<locals>" not in target.__qualname__):
        return _SignatureSchema(fn, tool_name=tool_name)
    key = (target, bound, tool_name)
    with _schema_cache_lock:
        cached = _schema_cache.get(key)
    if cached is not None:
        return cached
    schema: ArgumentsSchema = _SignatureSchema(fn, tool_name=tool_name)  # may raise
    with _schema_cache_lock:
        if len(_schema_cache) < _SCHEMA_CACHE_SIZE:
            schema = _schema_cache.setdefault(key, schema)
    return schema


_checked_schemas: set[tuple[str, str]] = set()  # (validator, schema JSON) found valid


def _check_schema_once(validator_cls: Any, schema: Mapping[str, Any]) -> None:
    """``validator_cls.check_schema(schema)``, skipped for a schema already found valid
    (the delegate tool's is the same for every session of an app)."""
    try:
        key = (validator_cls.__name__, json.dumps(schema, sort_keys=True))
    except (TypeError, ValueError):  # not plain JSON: check it every time
        validator_cls.check_schema(schema)
        return
    with _schema_cache_lock:
        if key in _checked_schemas:
            return
    validator_cls.check_schema(schema)  # raises SchemaError: nothing is remembered
    with _schema_cache_lock:
        if len(_checked_schemas) < _SCHEMA_CACHE_SIZE:
            _checked_schemas.add(key)


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
