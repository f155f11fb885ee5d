"""Agent definition files: an :class:`~.definitions.AgentDefinition` read from and
written to strict YAML.

The file format (``version: 1``) is strict YAML: unknown fields, YAML tags, anchors and
aliases, duplicate or non-string keys, several documents, deep nesting, non-UTF-8 text
and files over 1 MiB are refused with an :class:`~deputy_shiny.errors.AgentDefinitionError`
that names the file, the problem and the field; reading one executes no code, imports
no module and sources no file. A file holds names only (a definition's Tool or Skill
object is written as its name). :func:`agent_definition_write` writes atomically and
never through a symlink.

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
import stat
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._util.atomic import WriteRefused, atomic_write
from .._util.yaml import strict_yaml_load, yaml_kind
from ..errors import AgentDefinitionError, StrictYamlError
from .definitions import (
    AGENT_DEFINITION_VERSION,
    MAX_AGENT_DEFINITION_BYTES,
    MAX_AGENT_DEFINITION_DEPTH,
    AgentDefinition,
    SkillRegistry,
    ToolRegistry,
    entry_names,
    resolve_named,
)

__all__ = ["agent_definition_read", "agent_definition_write"]


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
    "memory",
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
    resolve_named(definition, tool_registry, skill_registry, where)
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
            # A Tool or Skill object is written as its name: a file only names things.
            data[name] = list(entry_names(value)) if isinstance(value, tuple) else value
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
