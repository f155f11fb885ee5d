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
Parsing the raw arguments and wording their problems live in
:mod:`deputy_shiny.tools._arguments_errors`, reading the signature and binding the
arguments to it in :mod:`deputy_shiny.tools._arguments_binding`.

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
import inspect
import json
import re
import threading
import types
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, PydanticJsonSchemaWarning
from pydantic_core import PydanticUndefined

from ..errors import InvalidToolError
from ._arguments_binding import (
    _Binder,
    _callable_label,
    _first_line,
    _make_binder,
    _resolved_signature,
    _unwrap,
)
from ._arguments_errors import (
    _arguments_error,
    _format_loc,
    _parse_raw,
    _short_json,
    _split_loc,
)
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
