"""Agent definitions: a subagent described as data, read from and written to YAML safely.

An :class:`AgentDefinition` is a frozen value naming everything a lead needs to build
a subagent: its ``name`` and ``description`` (the lead's model reads the description to
choose a subagent), its system ``prompt``, the names of its ``tools`` and ``skills``,
tools it must never use (``disallowed_tools``), a ``model`` (a litellm model string, or
``"inherit"`` for the lead's), a request cap, a permission mode (None: the lead's), MCP
server names and an optional first message (``initial_prompt``).

A definition holds names, never objects: :func:`agent_definition_resolve` looks them up
in registries the host supplies (a mapping of name to Tool or Skill, a callable, or a
list of them). A file therefore cannot reach a tool or skill the host did not offer,
and reading one executes no code, imports no module and sources no file.

The file format (``version: 1``) is strict YAML: unknown fields, YAML tags, anchors and
aliases, duplicate or non-string keys, several documents, deep nesting, non-UTF-8 text
and files over 1 MiB are refused with an :class:`~deputy_shiny.errors.AgentDefinitionError`
that names the file, the problem and the field. :func:`agent_definition_write` writes
atomically and never through a symlink.

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from deputy_shiny.tools import tool_read_file
    >>> reviewer = AgentDefinition(name="reviewer", description="Reviews code.",
    ...                            prompt="Review the code you are given.",
    ...                            tools=["read_file"], permission_mode="readonly")
    >>> path = Path(tempfile.mkdtemp()) / "reviewer.yaml"
    >>> agent_definition_write(reviewer, path)
    >>> print(path.read_text(), end="")
    version: 1
    name: reviewer
    description: Reviews code.
    permission_mode: readonly
    tools:
    - read_file
    prompt: Review the code you are given.
    >>> agent_definition_read(path, [tool_read_file()]) == reviewer
    True
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Self, TypeVar

from pydantic import (
    AfterValidator,
    BeforeValidator,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from .._util.atomic import WriteRefused, atomic_write
from .._util.config import FrozenConfig
from .._util.yaml import strict_yaml_load, yaml_kind
from ..errors import AgentDefinitionError, ConfigurationError, InvalidModelError, StrictYamlError
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
    "agent_definition_read",
    "agent_definition_resolve",
    "agent_definition_write",
]

AGENT_DEFINITION_VERSION = 1
"""The file format version :func:`agent_definition_write` writes and the reader accepts."""

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
_SkillNames = Annotated[
    tuple[Annotated[StrictStr, AfterValidator(_check_skill_name)], ...], BeforeValidator(_names)
]
_ServerNames = Annotated[
    tuple[Annotated[StrictStr, AfterValidator(_check_server_name)], ...],
    BeforeValidator(_names),
]


def _distinct(values: tuple[str, ...]) -> tuple[str, ...]:
    seen: set[str] = set()
    for value in values:
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
        tools: Names of the tools it gets, looked up in the host's tool registry.
        model: A litellm model string, or ``"inherit"`` (the default) for the lead's.
        skills: Names of skills it loads, looked up in the host's skill registry.
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

    _config_error: ClassVar[type[ConfigurationError]] = AgentDefinitionError

    name: StrictStr
    description: StrictStr
    prompt: StrictStr = ""
    tools: _ToolNames = ()
    model: StrictStr = INHERIT
    skills: _SkillNames = ()
    disallowed_tools: _ToolNames = ()
    max_requests: StrictInt | None = None
    permission_mode: PermissionMode | None = None
    mcp_servers: _ServerNames = ()
    initial_prompt: StrictStr | None = None

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
        allowed = {name.lower(): name for name in info.data.get("tools", ())}
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
    return _resolve(
        definition, tool_registry, skill_registry, f"Agent definition {definition.name!r}"
    )


def _resolve(
    definition: AgentDefinition,
    tool_registry: ToolRegistry,
    skill_registry: SkillRegistry | None,
    where: str,
) -> ResolvedAgentDefinition:
    tools = _look_up_all(definition.tools, tool_registry, Tool, "tool", where)
    if definition.skills and skill_registry is None:
        raise AgentDefinitionError(
            f"{where}: field 'skills': names {', '.join(map(repr, definition.skills))}, but "
            "no skill registry was given; pass skill_registry= with the skills you allow."
        )
    skills = (
        _look_up_all(definition.skills, skill_registry, Skill, "skill", where)
        if skill_registry is not None
        else ()
    )
    return ResolvedAgentDefinition(definition=definition, tools=tools, skills=skills)


def _look_up_all(
    names: tuple[str, ...], registry: Any, kind: type[_T], what: str, where: str
) -> tuple[_T, ...]:
    lookup = _lookup_function(registry, kind, what)
    found = []
    for name in names:
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


# --------------------------------------------------------------------------- reading

_FIELDS = tuple(AgentDefinition.model_fields)
# The order fields are written in: short ones first, the long prompt last.
_WRITE_ORDER = (
    "name",
    "description",
    "model",
    "permission_mode",
    "max_requests",
    "tools",
    "disallowed_tools",
    "skills",
    "mcp_servers",
    "initial_prompt",
    "prompt",
)


def agent_definition_read(
    path: str | os.PathLike[str],
    tool_registry: ToolRegistry,
    skill_registry: SkillRegistry | None = None,
) -> AgentDefinition:
    """Read an agent definition file and check its tools and skills against the registries.

    The file is a YAML mapping with ``version: 1`` and the fields of
    :class:`AgentDefinition` (only ``name`` and ``description`` are required). It is
    parsed as plain data: no tag, anchor or alias, duplicate or non-string key, second
    document or deep nesting is accepted, and nothing is executed or imported. Use
    :func:`agent_definition_resolve` on the result to get the Tool and Skill objects.

    Raises:
        AgentDefinitionError: naming the file, the problem and the field, for a file
            that is missing, not a regular file, over 1 MiB or not UTF-8; YAML that is
            invalid or refused; a missing or unsupported ``version``; an unknown or
            invalid field; and a tool or skill the registries lack.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> path = Path(tempfile.mkdtemp()) / "helper.yaml"
        >>> _ = path.write_text("version: 1\\nname: helper\\ndescription: Helps.\\n"
        ...                     "tools: [read_file]\\nmodel: [1]\\n")
        >>> agent_definition_read(path, {})
        Traceback (most recent call last):
        ...
        deputy_shiny.errors.AgentDefinitionError: ...helper.yaml: field 'model': ...
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise AgentDefinitionError(
            f"agent_definition_read() needs the path of a YAML file, got {path!r:.60}."
        )
    where = os.fspath(path)
    text = _read_text(where)
    try:
        data = strict_yaml_load(text, max_depth=MAX_AGENT_DEFINITION_DEPTH)
    except StrictYamlError as exc:
        raise AgentDefinitionError(f"{where}: {exc}.") from None
    definition = _definition_from(data, where)
    _resolve(definition, tool_registry, skill_registry, where)
    return definition


def _read_text(where: str) -> str:
    """The file's text, refusing anything but a regular file of at most 1 MiB of UTF-8."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; regular files ignore it.
        fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        dangling = os.path.islink(where)
        raise AgentDefinitionError(
            f"{where}: does not exist"
            + (" (it is a symlink to a missing file)." if dangling else ".")
        ) from None
    except OSError as exc:
        raise AgentDefinitionError(f"{where}: cannot be opened ({exc.strerror or exc}).") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise AgentDefinitionError(f"{where}: is a directory, not a YAML file.")
        if not stat.S_ISREG(info.st_mode):
            raise AgentDefinitionError(f"{where}: is not a regular file.")
        if info.st_size > MAX_AGENT_DEFINITION_BYTES:
            raise AgentDefinitionError(
                f"{where}: is {info.st_size:,} bytes; an agent definition may have at most "
                f"{MAX_AGENT_DEFINITION_BYTES:,} (1 MiB)."
            )
        data = _read_at_most(fd, MAX_AGENT_DEFINITION_BYTES + 1)  # the file may grow
    except OSError as exc:
        raise AgentDefinitionError(f"{where}: cannot be read ({exc.strerror or exc}).") from None
    finally:
        os.close(fd)
    if len(data) > MAX_AGENT_DEFINITION_BYTES:
        raise AgentDefinitionError(
            f"{where}: is over {MAX_AGENT_DEFINITION_BYTES:,} bytes (1 MiB), the most an agent "
            "definition may have."
        )
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise AgentDefinitionError(
            f"{where}: is not UTF-8 text ({exc.reason} at byte {exc.start})."
        ) from None


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _definition_from(data: Any, where: str) -> AgentDefinition:
    if not isinstance(data, dict):
        raise AgentDefinitionError(
            f"{where}: must be a YAML mapping of 'field: value' lines starting with "
            f"'version: {AGENT_DEFINITION_VERSION}', got {yaml_kind(data)}."
        )
    if "version" not in data:
        raise AgentDefinitionError(
            f"{where}: field 'version': missing; start the file with "
            f"'version: {AGENT_DEFINITION_VERSION}'."
        )
    version = data.pop("version")
    if type(version) is not int or version != AGENT_DEFINITION_VERSION:
        raise AgentDefinitionError(
            f"{where}: field 'version': {version!r:.40} is not a supported version; this "
            f"release reads version {AGENT_DEFINITION_VERSION}."
        )
    unknown = [key for key in data if key not in _FIELDS]
    if unknown:
        raise AgentDefinitionError(
            f"{where}: unknown field {unknown[0]!r:.60}; the fields are version, "
            f"{', '.join(_WRITE_ORDER)}."
        )
    for key in ("name", "description"):
        if key not in data:
            raise AgentDefinitionError(f"{where}: field {key!r}: missing; it is required.")
    try:
        return AgentDefinition.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False, include_input=False):
            loc = [str(part) for part in err["loc"]]
            field = ".".join(loc) or "value"
            message = err["msg"].removeprefix("Value error, ").rstrip(".")
            problems.append(f"field {field!r}: {message}")
        raise AgentDefinitionError(f"{where}: " + "; ".join(problems) + ".") from None


# --------------------------------------------------------------------------- writing


def _yaml_text(definition: AgentDefinition) -> str:
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True  # never write anchors: the reader refuses them

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)

    defaults = {name: field.default for name, field in AgentDefinition.model_fields.items()}
    data: dict[str, Any] = {"version": AGENT_DEFINITION_VERSION}
    for name in _WRITE_ORDER:
        value = getattr(definition, name)
        if name in ("name", "description") or value != defaults[name]:
            data[name] = list(value) if isinstance(value, tuple) else value
    return yaml.dump(
        data,
        Dumper=Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )


def agent_definition_write(
    definition: AgentDefinition, path: str | os.PathLike[str], *, overwrite: bool = False
) -> None:
    """Write a definition as YAML (``version: 1`` first), atomically.

    Fields at their defaults are left out; the rest follow in a fixed order, the prompt
    last, so :func:`agent_definition_read` gives back an equal definition. The text goes
    to a temporary file in the same directory, is flushed to disk, then renamed over
    ``path``: a crash leaves the old file or the new one, never a mix. An existing file
    is replaced only with ``overwrite=True``; a symlink or directory at ``path`` is
    never written through or replaced.

    Raises:
        AgentDefinitionError: for a missing directory, an existing file (without
            ``overwrite``), a symlink or directory at ``path``, a text over 1 MiB, or an
            OS error while writing.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> path = Path(tempfile.mkdtemp()) / "a.yaml"
        >>> d = AgentDefinition(name="a", description="Does a.")
        >>> agent_definition_write(d, path)
        >>> agent_definition_write(d, path)
        Traceback (most recent call last):
        ...
        deputy_shiny.errors.AgentDefinitionError: ...a.yaml: already exists; pass overwrite=True to replace it.
    """  # noqa: E501
    if not isinstance(definition, AgentDefinition):
        raise AgentDefinitionError(
            f"agent_definition_write() needs an AgentDefinition, got {type(definition).__name__}."
        )
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise AgentDefinitionError(
            f"agent_definition_write() needs the path of a YAML file, got {path!r:.60}."
        )
    target = Path(path)
    where = str(target)
    try:
        data = _yaml_text(definition).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise AgentDefinitionError(
            f"{where}: the definition is not valid text ({exc.reason})."
        ) from None
    if len(data) > MAX_AGENT_DEFINITION_BYTES:
        raise AgentDefinitionError(
            f"{where}: the definition is {len(data):,} bytes as YAML; at most "
            f"{MAX_AGENT_DEFINITION_BYTES:,} (1 MiB) can be read back."
        )
    directory = target.parent
    if not directory.is_dir():
        raise AgentDefinitionError(f"{where}: the directory {str(directory)!r} does not exist.")
    try:
        atomic_write(target, data, overwrite=overwrite)
    except WriteRefused as exc:
        hint = "; pass overwrite=True to replace it" if str(exc) == "already exists" else ""
        if str(exc).startswith("is a symlink"):
            hint = ". Write to the real path, or remove the link first"
        raise AgentDefinitionError(f"{where}: {exc}{hint}.") from None
    except OSError as exc:
        raise AgentDefinitionError(f"{where}: cannot be written ({exc.strerror or exc}).") from None
