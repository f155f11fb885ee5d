"""Tools: Python functions the model can call, with their schema, annotations and source.

Examples:
    >>> from deputy_shiny.tools import tool, tool_annotations
    >>> @tool(annotations=tool_annotations(read_only_hint=True, open_world_hint=False))
    ... def add(a: int, b: int = 1) -> int:
    ...     '''Add two numbers.'''
    ...     return a + b
    >>> add(2, 3)
    5
    >>> add.parameters["required"]
    ['a']
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import re
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import Any, Literal, TypedDict, overload

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._util.callables import dunder_call, is_async_callable
from ..errors import InvalidToolError
from ._function_schema import (
    ArgumentsSchema,
    _parse_raw,
    arguments_schema,
    clean_description,
    describe_schema,
    docstring_summary,
)
from ._scope import call_within, scope_for
from ._tool_threads import run_in_tool_thread

__all__ = [
    "EffectiveAnnotations",
    "Tool",
    "ToolAnnotations",
    "ToolMetadata",
    "ToolSource",
    "effective_annotations",
    "format_tool_output",
    "tool",
    "tool_annotations",
    "tool_metadata",
]

TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")

_HINTS = ("read_only_hint", "destructive_hint", "open_world_hint", "idempotent_hint")


# --------------------------------------------------------------------------- annotations


class ToolAnnotations(BaseModel):
    """What a tool's effects are, as declared by its author (MCP tool annotations).

    Hints left as None stay None: :func:`effective_annotations` supplies the cautious
    defaults. Annotations are claims; deputy_shiny does not verify them.

    Examples:
        >>> ToolAnnotations(read_only_hint=True).destructive_hint is None
        True
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)

    read_only_hint: bool | None = Field(default=None, description="Does not change state.")
    destructive_hint: bool | None = Field(default=None, description="May delete or overwrite data.")
    open_world_hint: bool | None = Field(default=None, description="Accesses external systems.")
    idempotent_hint: bool | None = Field(
        default=None, description="Repeated calls with the same arguments have the same effect."
    )
    title: str | None = Field(default=None, description="A human-readable title for the tool.")


def _annotation_problem(error: ValidationError) -> str:
    problems = []
    for err in error.errors(include_url=False):
        key = str(err["loc"][0]) if err.get("loc") else "?"
        if err["type"] == "extra_forbidden":
            snake = re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()
            hint = f" (did you mean {snake!r}?)" if snake in (*_HINTS, "title") else ""
            known = ", ".join((*_HINTS, "title"))
            problems.append(f"unknown annotation {key!r}{hint}; the annotations are {known}")
        elif key == "title":
            problems.append(f"annotation 'title' must be a string or None, got {err['input']!r}")
        else:
            problems.append(f"annotation {key!r} must be True, False or None, got {err['input']!r}")
    return "; ".join(problems)


def tool_annotations(
    *,
    read_only_hint: bool | None = None,
    destructive_hint: bool | None = None,
    open_world_hint: bool | None = None,
    idempotent_hint: bool | None = None,
    title: str | None = None,
) -> ToolAnnotations:
    """Build :class:`ToolAnnotations`; raises InvalidToolError for a non-bool hint.

    Examples:
        >>> tool_annotations(read_only_hint=True, open_world_hint=False).read_only_hint
        True
    """
    hints = (read_only_hint, destructive_hint, open_world_hint, idempotent_hint)
    if all(h is None or type(h) is bool for h in hints) and (title is None or type(title) is str):
        # Exactly what strict validation accepts unchanged, so the same value; and it keeps
        # the tool modules' annotation constants from building the model's schema (and
        # pydantic's plugin scan) at import.
        return ToolAnnotations.model_construct(
            read_only_hint=read_only_hint,
            destructive_hint=destructive_hint,
            open_world_hint=open_world_hint,
            idempotent_hint=idempotent_hint,
            title=title,
        )
    return _coerce_annotations(
        {
            "read_only_hint": read_only_hint,
            "destructive_hint": destructive_hint,
            "open_world_hint": open_world_hint,
            "idempotent_hint": idempotent_hint,
            "title": title,
        }
    )


def _coerce_annotations(value: ToolAnnotations | Mapping[str, Any] | None) -> ToolAnnotations:
    if value is None:
        return ToolAnnotations()
    if isinstance(value, ToolAnnotations):
        return value
    if isinstance(value, Mapping):
        try:
            return ToolAnnotations.model_validate(dict(value))
        except ValidationError as e:
            raise InvalidToolError(
                f"Malformed tool annotations: {_annotation_problem(e)}."
            ) from None
    raise InvalidToolError(
        "annotations= must be a ToolAnnotations (see tool_annotations()) or a dict with the "
        f"same keys, got {type(value).__name__}."
    )


class EffectiveAnnotations(TypedDict):
    """The four hints with cautious defaults filled in (see :func:`effective_annotations`)."""

    read_only_hint: bool
    destructive_hint: bool
    open_world_hint: bool
    idempotent_hint: bool


def effective_annotations(annotations: ToolAnnotations) -> EffectiveAnnotations:
    """The hints the permission system acts on: given ones, with cautious defaults for the rest.

    A missing hint means: may modify (read_only False), may destroy (destructive True),
    open-world (True), not idempotent (False). An explicit ``read_only_hint=True`` makes an
    omitted ``destructive_hint`` irrelevant (False). The contradiction ``read_only_hint=True``
    with ``destructive_hint=True`` is read cautiously: not read-only, destructive.

    Examples:
        >>> effective_annotations(tool_annotations(read_only_hint=True))["destructive_hint"]
        False
    """
    read_only = annotations.read_only_hint is True
    if annotations.destructive_hint is None:
        destructive = not read_only
    else:
        destructive = annotations.destructive_hint
    if read_only and destructive:
        read_only = False  # contradictory claims: trust the more dangerous one
    return {
        "read_only_hint": read_only,
        "destructive_hint": destructive,
        "open_world_hint": annotations.open_world_hint is not False,
        "idempotent_hint": annotations.idempotent_hint is True,
    }


# --------------------------------------------------------------------------- source


BuiltinKind = Literal["read", "write", "code", "web", "ask"]
"""What a built-in tool does, as the permission mode table sees it."""


class ToolSource(BaseModel):
    """Where a tool comes from: a user function, a package's built-in, or an MCP server.

    Examples:
        >>> ToolSource(type="package", package="deputy_shiny").package
        'deputy_shiny'
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    type: Literal["function", "package", "mcp"]
    module: str | None = Field(default=None, description='For "function": the module of fn.')
    package: str | None = Field(default=None, description='For "package": the package name.')
    server: str | None = Field(default=None, description='For "mcp": the server name.')
    remote_name: str | None = Field(
        default=None, description='For "mcp": the tool\'s name on the server.'
    )
    kind: BuiltinKind | None = Field(
        default=None,
        description=(
            'For deputy_shiny\'s built-ins: what the tool does ("read", "write", "code", '
            '"web", "ask"), which the permission mode table judges it by. None for every '
            "other tool (judged by its annotations)."
        ),
    )
    connection_id: str | None = Field(
        default=None, description='For "mcp": the id of the connection the tool calls through.'
    )
    agent_id: str | None = Field(
        default=None,
        description=(
            "For a tool bound to one agent (e.g. an McpConnection's): the only agent that may "
            "register it. None: any agent may."
        ),
    )
    session_id: str | None = Field(
        default=None,
        description="For a tool bound to one session: the only session that may register it.",
    )
    sandbox: str | None = Field(
        default=None,
        description=(
            'For "mcp": the OS sandbox mode the server was checked to run its code in '
            '(mcp-repl\'s "read-only" or "workspace-write"); None: not known.'
        ),
    )


BUILTIN_PACKAGE = "deputy_shiny"


@functools.cache  # one frozen ToolSource a kind, shared by every session's tools
def builtin_source(kind: BuiltinKind) -> ToolSource:
    """The source of one of deputy_shiny's built-in tools, recording its ``kind``.

    Examples:
        >>> builtin_source("read").kind, builtin_source("read").package
        ('read', 'deputy_shiny')
    """
    return ToolSource(type="package", package=BUILTIN_PACKAGE, kind=kind)


def _module_of(fn: Any) -> str | None:
    while isinstance(fn, functools.partial):
        fn = fn.func
    module = getattr(fn, "__module__", None)
    if module is None:
        owner = getattr(fn, "__objclass__", None)  # e.g. str.upper
        module = getattr(owner, "__module__", None)
    return module if isinstance(module, str) else None


# --------------------------------------------------------------------------- tool


def _is_generator_callable(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        fn = dunder_call(fn) or fn
    return inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)


class Tool:
    """A function the model can call: name, description, JSON schema, annotations, source.

    Build one with :func:`tool`. A Tool stays callable as the plain function, and
    ``await t.invoke(t.parse_arguments(raw_json))`` runs a model's call (sync
    functions in a worker thread). Tools may hold state, so each is its own object.

    Examples:
        >>> upper = tool(str.upper, name="uppercase", description="Uppercase text.",
        ...              arguments={"type": "object", "properties": {"x": {"type": "string"}},
        ...                         "required": ["x"]})
        >>> upper("hello")
        'HELLO'
        >>> upper.parse_arguments('{"x": "hi"}')
        {'x': 'hi'}
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        arguments: Mapping[str, Any] | type[BaseModel] | None = None,
        annotations: ToolAnnotations | Mapping[str, Any] | None = None,
        source: ToolSource | None = None,
        convert: bool | None = None,
    ) -> None:
        schema: ArgumentsSchema | None = None
        self._schema: ArgumentsSchema
        if isinstance(fn, Tool):  # re-wrap: the old tool's settings are the defaults
            base = fn
            fn = base.fn
            name = name if name is not None else base.name
            description = description if description is not None else base.description
            annotations = annotations if annotations is not None else base.annotations
            source = source if source is not None else base.source
            schema = base._schema if arguments is None else None
            convert = convert if convert is not None else base.convert
        if not callable(fn):
            raise InvalidToolError(
                f"A tool needs a callable function, got {type(fn).__name__} {fn!r:.60}."
            )
        self._name = _check_name(fn, name)
        if _is_generator_callable(fn):
            raise InvalidToolError(
                f"tool {self._name!r}: generator functions cannot be tools; return a value "
                "(e.g. a list or a string) instead of yielding."
            )
        self._description = _check_description(fn, description, self._name)
        self._annotations = _coerce_annotations(annotations)
        if source is not None and not isinstance(source, ToolSource):
            raise InvalidToolError(
                f"tool {self._name!r}: source= must be a ToolSource, got {type(source).__name__}."
            )
        self._source = source or ToolSource(type="function", module=_module_of(fn))
        self._schema = schema or arguments_schema(fn, tool_name=self._name, arguments=arguments)
        if convert is not None and not isinstance(convert, bool):
            raise InvalidToolError(
                f"tool {self._name!r}: convert= must be True or False, not {convert!r}."
            )
        self._convert = convert is not False
        self._fn = fn
        self._is_async = is_async_callable(fn)
        self.__wrapped__ = fn  # inspect.signature(tool) shows the function's signature
        self.__doc__ = getattr(fn, "__doc__", None)

    # -- read-only properties ---------------------------------------------------------

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        return self._name

    @property
    def description(self) -> str:
        """What the tool does, as the model reads it."""
        return self._description

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the argument object (a fresh copy each time)."""
        return copy.deepcopy(self._schema.json_schema)

    @property
    def annotations(self) -> ToolAnnotations:
        """The annotations exactly as given (missing hints stay None)."""
        return self._annotations

    @property
    def source(self) -> ToolSource:
        """Where the tool comes from."""
        return self._source

    @property
    def kind(self) -> BuiltinKind | None:
        """What a deputy_shiny built-in does (``"read"``, ``"write"``...); None otherwise."""
        return self._source.kind

    @property
    def fn(self) -> Callable[..., Any]:
        """The wrapped function."""
        return self._fn

    @property
    def convert(self) -> bool:
        """False: the function gets the model's arguments as JSON values (see :func:`tool`)."""
        return self._convert

    @property
    def is_async(self) -> bool:
        """True when the function is a coroutine function (awaited on the loop, not in a thread)."""
        return self._is_async

    # -- calling ------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function directly (for async functions this returns the coroutine)."""
        return self._fn(*args, **kwargs)

    def openai_schema(self) -> dict[str, Any]:
        """The tool in OpenAI chat-completions format (what litellm sends to providers).

        Examples:
            >>> tool(lambda: 1, name="one", description="One.").openai_schema()["function"]["name"]
            'one'
        """
        return {
            "type": "function",
            "function": {
                "name": self._name,
                "description": self._description,
                "parameters": self.parameters,
            },
        }

    def parse_arguments(self, raw: str | Mapping[str, Any] | None) -> dict[str, Any]:
        """Parse and validate the model's arguments (JSON text or a dict) into call values.

        ``""``, ``None`` and ``"null"`` mean no arguments. Raises
        :class:`~deputy_shiny.errors.ToolArgumentsError`, whose message tells the model
        what to fix: malformed JSON, not an object, missing or unknown arguments, wrong types.

        Examples:
            >>> t = tool(lambda n: n, name="n", description="N.", arguments={
            ...     "type": "object", "properties": {"n": {"type": "integer"}}})
            >>> t.parse_arguments('{"n": 3}')
            {'n': 3}
        """
        values = self._schema.validate(raw, tool_name=self._name)
        if self._convert:
            return values
        # Checked, then given as sent: the model's own JSON object, without conversion.
        sent = _parse_raw(raw, self._name, self._schema.json_schema)
        return {k: pydantic_core.to_jsonable_python(v, fallback=str) for k, v in sent.items()}

    async def invoke(self, arguments: Mapping[str, Any] | None = None) -> Any:
        """Run the tool with arguments from :meth:`parse_arguments`; return the raw result.

        Sync functions run in the process's bounded pool of tool threads (see
        :func:`~deputy_shiny.set_tool_threads`) so the event loop never blocks; async
        functions are awaited. Exceptions propagate unchanged.

        Examples:
            >>> import asyncio
            >>> t = tool(lambda x: x * 2, name="double", description="Double.",
            ...          arguments={"type": "object", "properties": {"x": {"type": "integer"}}})
            >>> asyncio.run(t.invoke({"x": 4}))
            8
        """
        args, kwargs = self._schema.bind(arguments or {})
        # A host's scope (the Shiny kit: the app's session) is made here, on the loop,
        # and entered where the function runs (see tools/_scope.py).
        scope = scope_for(self)
        if self._is_async:
            with scope or nullcontext():
                return await self._fn(*args, **kwargs)
        if scope is None:
            result = await run_in_tool_thread(self._fn, *args, **kwargs)
        else:
            result = await run_in_tool_thread(call_within, scope, self._fn, *args, **kwargs)
        if inspect.isawaitable(result):  # a sync wrapper that returned a coroutine
            with scope_for(self) or nullcontext():  # it runs here, on the loop
                result = await result
        return result

    def __repr__(self) -> str:
        props = self._schema.json_schema.get("properties", {})
        required = set(self._schema.json_schema.get("required", []))
        params = ", ".join(
            f"{n}{'' if n in required else '?'}: {describe_schema(s)}" for n, s in props.items()
        )
        given = ", ".join(
            f"{k}={v}"
            for k, v in self._annotations.model_dump().items()
            if v is not None and k != "title"
        )
        source = self._source
        where = {
            "function": source.module,
            "package": source.package,
            "mcp": f"{source.server}:{source.remote_name}",
        }[source.type]
        description = self._description
        if len(description) > 60:
            description = description[:57] + "..."
        kind = "async " if self._is_async else ""
        return (
            f"<{kind}Tool {self._name}({params}) {description!r} "
            f"annotations=[{given or 'none'}] source={source.type}:{where}>"
        )


def _check_name(fn: Any, name: str | None) -> str:
    if name is None:
        name = getattr(fn, "__name__", None)
        if name is None:
            raise InvalidToolError(
                f"Cannot take a tool name from {type(fn).__name__} {fn!r:.60}; pass name=."
            )
        if name == "<lambda>":
            raise InvalidToolError("A lambda has no usable name; pass name= to tool().")
    if not isinstance(name, str):
        raise InvalidToolError(f"A tool name must be a string, got {type(name).__name__}.")
    if not TOOL_NAME_PATTERN.match(name):
        if not name:
            problem = "it is empty"
        elif len(name) > 64:
            problem = f"it has {len(name)} characters (at most 64)"
        elif not re.match(r"[A-Za-z_]", name[0]):
            problem = "it must start with a letter or underscore"
        else:
            bad = sorted({c for c in name if not re.match(r"[A-Za-z0-9_-]", c)})
            problem = f"it contains {', '.join(repr(c) for c in bad)}"
        raise InvalidToolError(
            f"Invalid tool name {name!r}: {problem}. Names may use only letters, digits, '_' "
            "and '-', start with a letter or '_', and have at most 64 characters."
        )
    return name


def _check_description(fn: Any, description: str | None, name: str) -> str:
    if description is not None and not isinstance(description, str):
        raise InvalidToolError(
            f"tool {name!r}: description= must be a string, got {type(description).__name__}."
        )
    if description is not None and description.strip():
        cleaned = clean_description(description)  # the prose, without examples or sections
        if cleaned:
            return cleaned
    target = fn
    while isinstance(target, functools.partial):
        target = target.func
    summary = docstring_summary(inspect.getdoc(target))
    if summary:
        return summary
    raise InvalidToolError(
        f"tool {name!r} has no description: describe what the tool does with description= "
        "or a docstring."
    )


@overload
def tool(
    fn: Callable[..., Any],
    description: str | None = None,
    *,
    name: str | None = None,
    arguments: Mapping[str, Any] | type[BaseModel] | None = None,
    annotations: ToolAnnotations | Mapping[str, Any] | None = None,
    source: ToolSource | None = None,
    convert: bool | None = None,
) -> Tool: ...


@overload
def tool(
    fn: None = None,
    description: str | None = None,
    *,
    name: str | None = None,
    arguments: Mapping[str, Any] | type[BaseModel] | None = None,
    annotations: ToolAnnotations | Mapping[str, Any] | None = None,
    source: ToolSource | None = None,
    convert: bool | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    description: str | None = None,
    *,
    name: str | None = None,
    arguments: Mapping[str, Any] | type[BaseModel] | None = None,
    annotations: ToolAnnotations | Mapping[str, Any] | None = None,
    source: ToolSource | None = None,
    convert: bool | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Define a tool from a function; with no function, return a decorator.

    As ellmer's ``tool(fun, description, ...)``, the description may come second by
    position. The name defaults to ``fn.__name__``, the description to the docstring's
    first paragraph, and the argument schema to the signature's type hints (parameter
    descriptions from the docstring or ``Annotated[..., Field(description=...)]``).
    ``arguments=`` overrides the schema with a pydantic model or a JSON-schema dict.
    ``convert=False`` (ellmer's ``convert = FALSE``) still checks the model's
    arguments against the schema but calls the function with them as JSON values
    (dicts, lists, strings) instead of the converted ones (pydantic models, dates...);
    None means True, or, re-wrapping a tool, that tool's setting.
    Raises :class:`~deputy_shiny.errors.InvalidToolError` for anything that cannot be
    described.

    Examples:
        >>> @tool(description="Shout a word.")
        ... def shout(word: str) -> str:
        ...     return word.upper() + "!"
        >>> shout.name, shout("hey")
        ('shout', 'HEY!')
        >>> def add(a: int, b: int) -> int:
        ...     return a + b
        >>> tool(add, "Add two numbers together").description
        'Add two numbers together'
    """
    options: dict[str, Any] = {
        "name": name,
        "description": description,
        "arguments": arguments,
        "annotations": annotations,
        "source": source,
        "convert": convert,
    }
    if fn is None:

        def decorate(f: Callable[..., Any]) -> Tool:
            return Tool(f, **options)

        return decorate
    return Tool(fn, **options)


# --------------------------------------------------------------------------- metadata


class ToolMetadata(TypedDict):
    """What :func:`tool_metadata` returns: the supplied fields and the effective defaults."""

    name: str
    source: dict[str, str | None]
    annotations: dict[str, bool]
    missing_annotations: list[str]
    effective_annotations: EffectiveAnnotations


def tool_metadata(t: Tool) -> ToolMetadata:
    """Inspect a tool's name, source and annotations (given, missing, effective) without running it.

    Examples:
        >>> m = tool_metadata(tool(lambda: 1, name="one", description="One.",
        ...                        annotations={"read_only_hint": True}))
        >>> m["annotations"], m["effective_annotations"]["destructive_hint"]
        ({'read_only_hint': True}, False)
    """
    if not isinstance(t, Tool):
        raise InvalidToolError(f"tool_metadata() needs a Tool, got {type(t).__name__}.")
    src = t.source
    source: dict[str, str | None]
    if src.type == "function":
        source = {"type": "function", "module": src.module}
    elif src.type == "package":
        source = {"type": "package", "package": src.package}
    else:
        source = {
            "type": "mcp",
            "server": src.server,
            "tool": src.remote_name,
            "remote_name": src.remote_name,
        }
        if src.connection_id is not None:
            source["connection_id"] = src.connection_id
        if src.sandbox is not None:
            source["sandbox"] = src.sandbox
    given = {k: v for k in _HINTS if (v := getattr(t.annotations, k)) is not None}
    return {
        "name": t.name,
        "source": source,
        "annotations": given,
        "missing_annotations": [k for k in _HINTS if k not in given],
        "effective_annotations": effective_annotations(t.annotations),
    }


# --------------------------------------------------------------------------- output


_JSON_TYPES = (bool, int, float, dict, list, tuple, set, frozenset, BaseModel)


def format_tool_output(value: Any) -> str:
    """Turn a tool's return value into the text the model sees; never raises.

    - ``str``: as is; ``None``: ``""``.
    - bool, int, float, dict, list, tuple, set, pydantic models, dataclasses: compact
      JSON (leaves JSON cannot hold become ``str(leaf)``; nested bytes are UTF-8 text,
      or URL-safe base64 when they are not valid UTF-8).
    - ``bytes``: the UTF-8 text when it decodes; binary data is not sent to the model,
      only a note saying how many bytes were left out (return text or JSON instead).
    - anything else: ``str(value)``.

    Examples:
        >>> format_tool_output({"a": [1, 2], "ok": True})
        '{"a":[1,2],"ok":true}'
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return (
                f"[binary output: {len(data)} bytes not shown; the tool should return text or JSON]"
            )
    if isinstance(value, _JSON_TYPES) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        for bytes_mode in ("utf8", "base64"):
            try:
                return pydantic_core.to_json(value, fallback=str, bytes_mode=bytes_mode).decode()
            except Exception:
                continue
    try:
        return str(value)
    except Exception:
        return repr(value)
