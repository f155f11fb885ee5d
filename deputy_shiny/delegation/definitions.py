"""Agent definitions: a subagent described as data (files: :mod:`.definition_files`).

An :class:`AgentDefinition` is a frozen value naming everything a lead needs to build
a subagent: its ``name`` and ``description`` (the lead's model reads the description to
choose a subagent), its system ``prompt`` and ``memory``, its ``tools`` and ``skills``,
tools it must never use (``disallowed_tools``), a ``model`` (a litellm model string, or
``"inherit"`` for the lead's), a request cap, a permission mode (None: the lead's), MCP
server names and an optional first message (``initial_prompt``).
:func:`agent_definition` makes one as deputy's function does.

Tools and skills are named, or given as objects by host code: a name is looked up by
:func:`agent_definition_resolve` in registries the host supplies (a mapping of name to
Tool or Skill, a callable, or a list of them); an object is the host's own grant. A
definition file holds names only, so a file cannot reach a tool or skill the host did
not offer.

Examples:
    >>> from deputy_shiny.tools import tool_read_file
    >>> reviewer = agent_definition("reviewer", "Reviews code.", "Review the code.",
    ...                             tools=["read_file"], permission_mode="readonly")
    >>> resolved = agent_definition_resolve(reviewer, [tool_read_file()])
    >>> [t.name for t in resolved.tools], resolved.definition.permission_mode
    (['read_file'], 'readonly')
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Self, TypeVar

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    PlainValidator,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
)

from .._util.config import FrozenConfig
from ..errors import AgentDefinitionError, ConfigurationError, InvalidModelError
from ..models._chat_model import check_model_string
from ..permissions import MODES, PermissionMode
from ..skills._values import SKILL_NAME_PATTERN, Skill
from ..tools._tool import TOOL_NAME_PATTERN, Tool

__all__ = [
    "AGENT_DEFINITION_VERSION",
    "MAX_AGENT_DEFINITION_BYTES",
    "MAX_AGENT_DEFINITION_DEPTH",
    "AgentDefinition",
    "ResolvedAgentDefinition",
    "SkillRegistry",
    "ToolRegistry",
    "agent_definition",
    "agent_definition_resolve",
    "entry_names",
    "resolve_named",
]

AGENT_DEFINITION_VERSION = 1
"""The definition file format version written and read (:mod:`.definition_files`)."""

MAX_AGENT_DEFINITION_BYTES = 1024 * 1024
"""The largest definition file read or written (1 MiB)."""

MAX_AGENT_DEFINITION_DEPTH = 8
"""How deeply YAML collections may nest in a definition file (the format needs 2)."""

INHERIT = "inherit"

ToolRegistry = Mapping[str, Tool] | Callable[[str], Tool | None] | Iterable[Tool]
"""Where tool names are looked up: ``{name: Tool}``, ``lookup(name) -> Tool | None`` (a
KeyError means unknown too), or a list of tools (keyed by their names)."""

SkillRegistry = Mapping[str, Skill] | Callable[[str], Skill | None] | Iterable[Skill]
"""Where skill names are looked up; shaped like :data:`ToolRegistry`."""

_SERVER_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


# --------------------------------------------------------------------------- the value


def _names(value: Any) -> Any:
    """A single string is a one-item list; lists become tuples (validated item by item)."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(value)
    return value


def _checker(pattern: re.Pattern[str], what: str, example: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not pattern.match(value):
            problem = "it is empty" if not value else f"{value!r:.80} is not allowed"
            raise ValueError(f"{problem}: {what} (e.g. {example!r})")
        return value

    return check


_TOOL_NAME_RULE = "a name has 1 to 64 letters, digits, '_' or '-', starting with a letter or '_'"
_check_tool_name = _checker(TOOL_NAME_PATTERN, _TOOL_NAME_RULE, "read_file")
_check_agent_name = _checker(TOOL_NAME_PATTERN, _TOOL_NAME_RULE, "code_reviewer")
_check_skill_name = _checker(
    SKILL_NAME_PATTERN,
    "a skill name has 1 to 64 lowercase letters, digits, '_' or '-'",
    "data-analysis",
)
_check_server_name = _checker(
    _SERVER_NAME_PATTERN,
    "a server name has 1 to 64 letters, digits, '_', '.' or '-', as in the MCP config",
    "github",
)

_ToolNames = Annotated[
    tuple[Annotated[StrictStr, AfterValidator(_check_tool_name)], ...], BeforeValidator(_names)
]


def _entry(kind: type[Any], check: Callable[[str], str], what: str) -> Callable[[Any], Any]:
    """A validator of one ``tools``/``skills`` entry: a name, or the object itself."""

    def validate(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        if isinstance(value, str):
            return check(value)
        hint = ""
        if callable(value):
            hint = f"; call it to make the {what} (e.g. tool_read_file(), not tool_read_file)"
        got = type(value).__name__
        raise ValueError(f"expected a {what} name or a {kind.__name__}, got a {got}{hint}")

    return validate


_ToolEntries = Annotated[
    tuple[Annotated[str | Tool, PlainValidator(_entry(Tool, _check_tool_name, "tool"))], ...],
    BeforeValidator(_names),
]
_SkillEntries = Annotated[
    tuple[Annotated[str | Skill, PlainValidator(_entry(Skill, _check_skill_name, "skill"))], ...],
    BeforeValidator(_names),
]


def _check_memory(value: str) -> str:
    if not value.strip():
        raise ValueError("an entry is blank; leave it out")
    return value


_Texts = Annotated[
    tuple[Annotated[StrictStr, AfterValidator(_check_memory)], ...], BeforeValidator(_names)
]


def entry_names(entries: Iterable[str | Tool | Skill]) -> tuple[str, ...]:
    """The names of ``tools`` or ``skills`` entries, objects or names alike."""
    return tuple(e if isinstance(e, str) else e.name for e in entries)


_ServerNames = Annotated[
    tuple[Annotated[StrictStr, AfterValidator(_check_server_name)], ...],
    BeforeValidator(_names),
]


def _distinct(values: tuple[Any, ...]) -> tuple[Any, ...]:
    seen: set[str] = set()
    for value in entry_names(values):
        if value in seen:
            raise ValueError(f"{value!r} is listed twice")
        seen.add(value)
    return values


class AgentDefinition(FrozenConfig):
    """A subagent described as data (frozen; revise with ``model_copy(update=...)``).

    Attributes:
        name: How the lead names the subagent: 1 to 64 letters, digits, ``_`` or ``-``,
            starting with a letter or ``_`` (like a tool name).
        description: What the subagent is for; the lead's model reads it to choose a
            subagent, so it is required and not blank.
        prompt: The subagent's system prompt.
        tools: The tools it gets: names, looked up in the host's tool registry (the
            lead's tools), or :class:`~deputy_shiny.tools.Tool` objects, the host's own
            grant to this subagent (see :func:`agent_definition`).
        model: A litellm model string, or ``"inherit"`` (the default) for the lead's.
        skills: The skills it loads: names, looked up in the host's skill registry (the
            lead's skills), or :class:`~deputy_shiny.skills.Skill` objects.
        disallowed_tools: Tool names it may never call, whatever else grants them (a
            skill's or an MCP server's tools, or the lead's): the lead puts them on the
            subagent's ``tool_denylist``. Compared ignoring case, like the denylist;
            none may also be in ``tools``.
        max_requests: At most this many model requests a run (None: the lead's
            budget alone limits it).
        permission_mode: ``"standard"``, ``"plan"``, ``"readonly"`` or ``"full"``;
            None (the default) inherits the lead's mode. A subagent's authority never
            exceeds its lead's, whatever this says.
        mcp_servers: Names of MCP servers (as in the host's MCP config) it may use.
        initial_prompt: A first message sent before the lead's task, or None.
        memory: Text the subagent always knows, as deputy's ``memory``: appended to its
            system prompt under a ``# Memory`` heading (several entries are joined by a
            blank line). Static text from the host; nothing is remembered between runs.

    Lists may be given as lists or tuples (a single string is a one-item list). Bad
    values raise :class:`~deputy_shiny.errors.AgentDefinitionError` naming the field.

    Examples:
        >>> d = AgentDefinition(name="researcher", description="Finds sources.",
        ...                     tools=["web_search", "web_fetch"], max_requests=10)
        >>> d.model, d.tools, d.permission_mode
        ('inherit', ('web_search', 'web_fetch'), None)
        >>> d.model_copy(update={"model": "openai/gpt-4.1-mini"}).model
        'openai/gpt-4.1-mini'
        >>> AgentDefinition(name="x", description="y", tools=["run_bash"],
        ...                 disallowed_tools=["RUN_BASH"])
        Traceback (most recent call last):
        ...
        deputy_shiny.errors.AgentDefinitionError: Invalid AgentDefinition: disallowed_tools: ...
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )
    _config_error: ClassVar[type[ConfigurationError]] = AgentDefinitionError

    name: StrictStr
    description: StrictStr
    prompt: StrictStr = ""
    tools: _ToolEntries = ()
    model: StrictStr = INHERIT
    skills: _SkillEntries = ()
    disallowed_tools: _ToolNames = ()
    max_requests: StrictInt | None = None
    permission_mode: PermissionMode | None = None
    mcp_servers: _ServerNames = ()
    initial_prompt: StrictStr | None = None
    memory: _Texts = ()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)  # FrozenConfig: a direct call raises AgentDefinitionError

    # Marked as pydantic's own __init__, so that ``model_validate`` (the file reader)
    # skips it and gets the ValidationError, with each problem's field, to report.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return _check_agent_name(value)

    @field_validator("description")
    @classmethod
    def _described(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(
                "it is blank; say what this subagent is for (the lead's model reads it to "
                "choose a subagent)"
            )
        return value

    @field_validator("model")
    @classmethod
    def _valid_model(cls, value: str) -> str:
        if value == INHERIT:
            return value
        try:
            return check_model_string(value)
        except InvalidModelError as exc:
            raise ValueError(f"{str(exc).rstrip('.')}; or 'inherit' for the lead's model") from None

    @field_validator("tools", "skills", "mcp_servers")
    @classmethod
    def _no_repeats(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _distinct(value)

    @field_validator("disallowed_tools")
    @classmethod
    def _not_also_allowed(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        _distinct(value)
        allowed = {name.lower(): name for name in entry_names(info.data.get("tools", ()))}
        for name in value:
            if name.lower() in allowed:
                raise ValueError(
                    f"{name!r} is also in tools (as {allowed[name.lower()]!r}); a tool is "
                    "either given or disallowed, not both"
                )
        return value

    @field_validator("max_requests")
    @classmethod
    def _positive(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"must be a positive whole number or left out, got {value}")
        return value

    @field_validator("permission_mode", mode="before")
    @classmethod
    def _known_mode(cls, value: Any) -> Any:
        if value is not None and value not in MODES:
            raise ValueError(
                f"{value!r:.60} is not a permission mode; use one of {', '.join(MODES)}, "
                "or leave it out to inherit the lead's mode"
            )
        return value

    @field_validator("initial_prompt")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("it is blank; leave it out instead")
        return value

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A revised copy; ``update`` is validated like the constructor's arguments.

        Examples:
            >>> d = AgentDefinition(name="a", description="b")
            >>> d.model_copy(update={"max_requests": 0})
            Traceback (most recent call last):
            ...
            deputy_shiny.errors.AgentDefinitionError: Invalid AgentDefinition: max_requests: ...
        """
        return type(self)(**{**dict(self), **(update or {})})

    def system_prompt(self) -> str:
        """The subagent's system prompt: ``prompt``, then ``memory`` under ``# Memory``.

        Examples:
            >>> memory = ["Use metric units.", "Cite sources."]
            >>> print(AgentDefinition(name="a", description="b", prompt="ROLE",
            ...                       memory=memory).system_prompt())
            ROLE
            <BLANKLINE>
            # Memory
            Use metric units.
            <BLANKLINE>
            Cite sources.
        """
        if not self.memory:
            return self.prompt
        memory = "# Memory\n" + "\n\n".join(self.memory)
        return f"{self.prompt}\n\n{memory}" if self.prompt else memory

    def granted_tool_names(self) -> frozenset[str]:
        """Names of the tools this definition gives as objects (its own and its skill
        objects'): the host's grant, which the subagent has whether or not its lead does.

        Examples:
            >>> from deputy_shiny.tools import tool_read_file
            >>> AgentDefinition(name="a", description="b",
            ...                 tools=[tool_read_file(), "write_file"]).granted_tool_names()
            frozenset({'read_file'})
        """
        own = {t.name for t in self.tools if isinstance(t, Tool)}
        own.update(t.name for s in self.skills if isinstance(s, Skill) for t in s.tools)
        return frozenset(own)


def agent_definition(
    name: str,
    description: str,
    prompt: str = "",
    *,
    tools: Iterable[str | Tool] | str | Tool = (),
    model: str = INHERIT,
    skills: Iterable[str | Skill] | str | Skill = (),
    disallowed_tools: Iterable[str] | str | None = None,
    memory: Iterable[str] | str | None = None,
    mcp_servers: Iterable[str] | str | None = None,
    initial_prompt: str | None = None,
    max_requests: int | None = None,
    permission_mode: PermissionMode | None = None,
) -> AgentDefinition:
    """deputy's ``agent_definition()``: an :class:`AgentDefinition`, as a function.

    Takes deputy's arguments (``name``, ``description`` and ``prompt`` by position; None
    for an empty list, as R's ``NULL``). ``tools`` and ``skills`` may be objects as well
    as names: a :class:`~deputy_shiny.tools.Tool` object (``tools=tools_file()``) is the
    host's own grant to this subagent, which gets it even when the lead does not have
    it; a name is looked up in the lead's tools when the subagent is built. Every call
    of the subagent still passes the lead's *current* permissions (mode, flags,
    denylist), so a lead narrowed to ``readonly`` narrows its subagents' own tools too. A
    definition file holds names only (:func:`agent_definition_write` writes an object's
    name), so a file never grants a tool. ``memory`` is appended to the system prompt
    under ``# Memory``.

    Raises:
        AgentDefinitionError: naming the field, for any bad value.

    Examples:
        >>> from deputy_shiny.tools import tools_file
        >>> reviewer = agent_definition(
        ...     "code_reviewer", "Reviews code for bugs and style.",
        ...     "You are an expert code reviewer.",
        ...     tools=tools_file(), memory="The team uses ruff.")
        >>> reviewer.tools[0].name, reviewer.memory
        ('read_file', ('The team uses ruff.',))
        >>> agent_definition("a", "b", tools=[print])
        Traceback (most recent call last):
        ...
        deputy_shiny.errors.AgentDefinitionError: Invalid AgentDefinition: tools.0: ...
    """
    fields: dict[str, Any] = {
        "name": name,
        "description": description,
        "prompt": prompt,
        "tools": _listed(tools),
        "model": model,
        "skills": _listed(skills),
        "disallowed_tools": _listed(disallowed_tools),
        "memory": _listed(memory),
        "mcp_servers": _listed(mcp_servers),
        "initial_prompt": initial_prompt,
        "max_requests": max_requests,
        "permission_mode": permission_mode,
    }
    return AgentDefinition(**fields)


def _listed(value: Any) -> Any:
    """deputy's NULL is an empty list; a single value (a name, a Tool) a one-item list; any
    other iterable (a bundle's list, a tuple, a generator) a tuple."""
    if value is None:
        return ()
    if isinstance(value, (str, Tool, Skill)) or not isinstance(value, Iterable):
        return (value,)
    return tuple(value)


# --------------------------------------------------------------------------- resolving


@dataclass(frozen=True)
class ResolvedAgentDefinition:
    """A definition with its tools and skills found in the host's registries.

    Attributes:
        definition: The :class:`AgentDefinition`.
        tools: The Tool objects, in the order of ``definition.tools`` (the very objects
            the registry holds, never copies).
        skills: The Skill objects, in the order of ``definition.skills``.

    Examples:
        >>> from deputy_shiny.tools import tool_read_file
        >>> d = AgentDefinition(name="reader", description="Reads.", tools=["read_file"])
        >>> [t.name for t in agent_definition_resolve(d, [tool_read_file()]).tools]
        ['read_file']
    """

    definition: AgentDefinition
    tools: tuple[Tool, ...]
    skills: tuple[Skill, ...]


_T = TypeVar("_T", Tool, Skill)


def agent_definition_resolve(
    definition: AgentDefinition,
    tool_registry: ToolRegistry,
    skill_registry: SkillRegistry | None = None,
) -> ResolvedAgentDefinition:
    """Look a definition's tools and skills up in the host's registries.

    Each name must be in its registry, and the object found must carry that very name
    (so a registry key cannot pass one tool off as another, e.g. around
    ``disallowed_tools``). Skills keep their own tools; ``disallowed_tools`` is for the
    lead to deny (a subagent's ``tool_denylist``), which covers a skill's or an MCP
    server's tools too. Nothing is imported or run: the registries hold what the host
    already built.

    Raises:
        AgentDefinitionError: naming the first unknown tool or skill, or the problem.

    Examples:
        >>> from deputy_shiny.tools import tool_read_file
        >>> d = AgentDefinition(name="writer", description="Writes.", tools=["write_file"])
        >>> agent_definition_resolve(d, {"read_file": tool_read_file()})
        Traceback (most recent call last):
        ...
        deputy_shiny.errors.AgentDefinitionError: Agent definition 'writer': field 'tools': ...
    """
    if not isinstance(definition, AgentDefinition):
        raise AgentDefinitionError(
            f"agent_definition_resolve() needs an AgentDefinition, got {type(definition).__name__}."
        )
    return resolve_named(
        definition, tool_registry, skill_registry, f"Agent definition {definition.name!r}"
    )


def resolve_named(
    definition: AgentDefinition,
    tool_registry: ToolRegistry,
    skill_registry: SkillRegistry | None,
    where: str,
) -> ResolvedAgentDefinition:
    tools = _look_up_all(definition.tools, tool_registry, Tool, "tool", where)
    named = [s for s in definition.skills if isinstance(s, str)]
    if named and skill_registry is None:
        raise AgentDefinitionError(
            f"{where}: field 'skills': names {', '.join(map(repr, named))}, but "
            "no skill registry was given; pass skill_registry= with the skills you allow."
        )
    skills = _look_up_all(definition.skills, skill_registry, Skill, "skill", where)
    return ResolvedAgentDefinition(definition=definition, tools=tools, skills=skills)


def _look_up_all(
    names: tuple[str | _T, ...], registry: Any, kind: type[_T], what: str, where: str
) -> tuple[_T, ...]:
    lookup = _lookup_function(registry, kind, what) if registry is not None else None
    found = []
    for name in names:
        if isinstance(name, kind):
            found.append(name)  # the host's own object: nothing to look up
            continue
        assert isinstance(name, str) and lookup is not None
        try:
            value = lookup(name)
        except KeyError:
            value = None
        except Exception as exc:
            raise AgentDefinitionError(
                f"{where}: field '{what}s': the {what} registry failed on {name!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if value is None:
            raise AgentDefinitionError(
                f"{where}: field '{what}s': unknown {what} {name!r}; the host's {what} "
                f"registry has no {what} of that name."
            )
        if not isinstance(value, kind):
            raise AgentDefinitionError(
                f"{where}: field '{what}s': the {what} registry gave a "
                f"{type(value).__name__} for {name!r}, not a {kind.__name__}."
            )
        if value.name != name:
            raise AgentDefinitionError(
                f"{where}: field '{what}s': the {what} registry maps {name!r} to a {what} "
                f"named {value.name!r}; registry keys must be the {what}s' own names."
            )
        found.append(value)
    return tuple(found)


def _lookup_function(registry: Any, kind: type[_T], what: str) -> Callable[[str], Any]:
    if isinstance(registry, Mapping):
        return registry.__getitem__
    if callable(registry):
        return registry
    if isinstance(registry, Iterable) and not isinstance(registry, (str, bytes)):
        by_name: dict[str, Any] = {}
        for item in registry:
            if not isinstance(item, kind):
                raise AgentDefinitionError(
                    f"The {what} registry must hold {kind.__name__} objects, got a "
                    f"{type(item).__name__}."
                )
            by_name.setdefault(item.name, item)
        return by_name.__getitem__
    raise AgentDefinitionError(
        f"A {what} registry must be a mapping of name to {kind.__name__}, a lookup function "
        f"or a list of {kind.__name__} objects, got {type(registry).__name__}."
    )
