"""Skills: reusable bundles of instructions, tools and declared requirements.

A :class:`Skill` is a frozen value: a name, a version, a description, a prompt (text
appended to an agent's system prompt), tools, and :class:`SkillRequirements` (Python
distributions and litellm providers it expects). Build one in code with
:func:`skill_create` (or ``Skill(...)``), or read one from a directory with
:func:`skill_load`. :func:`skill_check_requirements` says what is missing without
importing or installing anything, and ``agent.load_skill(skill_or_path)`` adds a skill
to an agent.

Only :func:`skill_load` executes code, and only the tool files the skill declares.
Building a Skill, revising it, checking its requirements, or passing it to an agent
never runs anything. Tools are shared, never copied: a Skill holds the very Tool
objects it was given, with their closures, clients and state.

Examples:
    >>> concise = skill_create("concise", prompt="Answer in one short paragraph.",
    ...                        requires={"packages": ["pydantic>=2"]})
    >>> skill_check_requirements(concise).ok
    True
    >>> shorter = concise.model_copy(update={"prompt": "Answer in one sentence."})
    >>> shorter.prompt, concise.prompt
    ('Answer in one sentence.', 'Answer in one short paragraph.')
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, NoReturn, Self

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    StrictStr,
    ValidationError,
    field_validator,
)

from .._util.config import FrozenConfig
from .._util.yaml import yaml_error_text, yaml_kind
from ..errors import ConfigurationError, SkillError, SkillLoadError
from ..tools._tool import Tool
from ._tool_files import _import_tools, _tool_specs

# packaging and yaml are imported where they are used, keeping `import deputy_shiny` lean.

logger = logging.getLogger(__name__)

__all__ = [
    "SKILL_MD",
    "SKILL_YAML",
    "Skill",
    "SkillCheck",
    "SkillError",
    "SkillInfo",
    "SkillLoadError",
    "SkillRequirements",
    "prepare_skill",
    "skill_check_requirements",
    "skill_create",
    "skill_load",
    "skill_prompt_section",
    "skills_list",
]

SKILL_MD = "SKILL.md"
SKILL_YAML = "SKILL.yaml"

SKILL_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_PROVIDER_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


# --------------------------------------------------------------------------- values


class _SkillValue(FrozenConfig):
    """A frozen value whose ``model_copy(update=...)`` is validated like the constructor."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )
    _config_error: ClassVar[type[ConfigurationError]] = SkillError

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)  # FrozenConfig: a direct call raises SkillError

    # Marked as pydantic's own __init__, so that validating a nested value (a dict given
    # for ``requires``) or ``model_validate`` skips it: the outer error then names the
    # full location, e.g. ``requires.packages.0``, instead of nesting two messages.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A revised copy; ``update`` is validated like the constructor's arguments.

        Every field is immutable and tools are shared by design, so ``deep`` changes
        nothing: Tool objects are never copied.

        Examples:
            >>> SkillRequirements(providers=["openai"]).model_copy(
            ...     update={"packages": ["pydantic"]}).packages
            ('pydantic',)
        """
        data = dict(self)
        if update:
            data.update(update)
        return type(self)(**data)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        return self  # immutable; copying would copy the (shared, stateful) tools


def _one_or_many(value: Any) -> Any:
    return (value,) if isinstance(value, str) else value


def _check_requirement(value: str) -> str:
    from packaging.requirements import InvalidRequirement, Requirement

    text = value.strip()
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        reason = str(exc).splitlines()[0] if str(exc) else "cannot be parsed"
        raise ValueError(
            f"{value!r} is not a package requirement such as 'pandas' or 'pandas>=2' ({reason})"
        ) from None
    return text


def _check_provider(value: str) -> str:
    text = value.strip().lower()
    if not _PROVIDER_PATTERN.match(text):
        raise ValueError(
            f"{value!r} is not a provider name such as 'openai' or 'anthropic' "
            "(a litellm provider prefix)"
        )
    return text


_Packages = Annotated[
    tuple[Annotated[StrictStr, AfterValidator(_check_requirement)], ...],
    BeforeValidator(_one_or_many),
]
_Providers = Annotated[
    tuple[Annotated[StrictStr, AfterValidator(_check_provider)], ...],
    BeforeValidator(_one_or_many),
]


class SkillRequirements(_SkillValue):
    """What a skill expects: installed Python distributions and litellm providers.

    ``packages`` are requirement strings (``"pandas"``, ``"pandas>=2"``,
    ``"pywin32; sys_platform == 'win32'"``); ``providers`` are litellm provider
    prefixes (``"openai"``, ``"anthropic"``), stored lower-case. A single string is
    taken as a one-item list. Declaring requirements never installs anything.

    Examples:
        >>> SkillRequirements(packages="pandas>=2", providers=["OpenAI"]).providers
        ('openai',)
    """

    packages: _Packages = ()
    providers: _Providers = ()


def _check_tool(value: Any) -> Tool:
    if isinstance(value, Tool):
        return value
    hint = "; wrap functions with tool()" if callable(value) else ""
    raise ValueError(f"expected a Tool (made with tool()), got {type(value).__name__}{hint}")


class Skill(_SkillValue):
    """A reusable bundle: instructions, tools and declared requirements (frozen).

    Fields: ``name`` (1-64 characters of lowercase letters, digits, ``_`` and ``-``,
    starting with a letter or digit), ``version`` (a PEP 440 version, default
    ``"0.0.0"``), ``description``, ``prompt`` (appended to the agent's system prompt),
    ``tools`` (a tuple of :class:`~deputy_shiny.tools.Tool`; names must differ) and
    ``requires`` (:class:`SkillRequirements` or a dict of its fields). Bad values raise
    :class:`SkillError` naming the field. The tools are kept as the very same objects,
    also by ``model_copy(update=...)``, which validates the update.

    Examples:
        >>> s = Skill(name="concise", prompt="Be brief.")
        >>> s.version, s.tools, s.requires.packages
        ('0.0.0', (), ())
        >>> s.model_copy(update={"version": "1.1"}).version
        '1.1'
    """

    name: StrictStr
    version: StrictStr = "0.0.0"
    description: StrictStr = ""
    prompt: StrictStr = ""
    tools: tuple[Annotated[Tool, PlainValidator(_check_tool)], ...] = ()
    requires: SkillRequirements = Field(default_factory=SkillRequirements)

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not SKILL_NAME_PATTERN.match(value):
            problem = "it is empty" if not value else f"{value!r} is not allowed"
            raise ValueError(
                f"{problem}: a skill name has 1 to 64 characters, lowercase letters, digits, "
                "'_' and '-', and starts with a letter or digit (e.g. 'data-analysis')"
            )
        return value

    @field_validator("version")
    @classmethod
    def _valid_version(cls, value: str) -> str:
        from packaging.version import InvalidVersion, Version

        try:
            Version(value)
        except InvalidVersion:
            raise ValueError(
                f"{value!r} is not a version string such as '1.0.0' (PEP 440)"
            ) from None
        return value

    @field_validator("tools")
    @classmethod
    def _distinct_tool_names(cls, value: tuple[Tool, ...]) -> tuple[Tool, ...]:
        first: dict[str, int] = {}
        for index, t in enumerate(value):
            if t.name in first:
                raise ValueError(
                    f"tools {first[t.name]} and {index} are both named {t.name!r}; "
                    "tool names in a skill must differ"
                )
            first[t.name] = index
        return value


def skill_create(
    name: str,
    *,
    prompt: str = "",
    description: str = "",
    tools: Sequence[Tool] = (),
    requires: SkillRequirements | Mapping[str, Any] | None = None,
    version: str = "1.0.0",
) -> Skill:
    """Create a skill in code; like ``Skill(...)`` but the version defaults to ``"1.0.0"``.

    Examples:
        >>> from deputy_shiny.tools import tool
        >>> def word_count(text: str) -> int:
        ...     '''Count the words in a text.'''
        ...     return len(text.split())
        >>> s = skill_create("counting", prompt="Count words with word_count.",
        ...                  tools=[tool(word_count)])
        >>> s.version, [t.name for t in s.tools]
        ('1.0.0', ['word_count'])
    """
    return Skill(
        name=name,
        version=version,
        description=description,
        prompt=prompt,
        tools=tools,
        requires=SkillRequirements() if requires is None else requires,
    )


# --------------------------------------------------------------------------- requirements


class SkillCheck(_SkillValue):
    """What :func:`skill_check_requirements` found.

    Attributes:
        ok: True when nothing is missing and the provider fits.
        missing_packages: Requirement strings not installed, or installed at a version
            that does not satisfy them (as declared).
        provider_mismatch: True when the skill names providers and the given one is
            not among them.
        messages: One readable sentence per problem (empty when ``ok``).

    Examples:
        >>> SkillCheck(ok=True).missing_packages
        ()
    """

    ok: bool
    missing_packages: tuple[str, ...] = ()
    provider_mismatch: bool = False
    messages: tuple[str, ...] = ()


def _provider_prefix(provider: str) -> str:
    return provider.strip().lower().split("/", 1)[0]


def skill_check_requirements(skill: Skill, provider: str | None = None) -> SkillCheck:
    """Check a skill's declared packages (and, given one, the provider) without running anything.

    Packages are looked up with :mod:`importlib.metadata`: never imported, never
    installed. A requirement whose environment marker does not apply here is skipped;
    extras are not checked. ``provider`` is a litellm provider prefix such as
    ``"openai"``, or a model string such as ``"openai/gpt-4o"`` (its prefix is used);
    with None, or when the skill names no providers, there is no provider check.

    Examples:
        >>> s = skill_create("demo", requires={"packages": ["pydantic", "surely-absent-pkg"],
        ...                                    "providers": ["anthropic"]})
        >>> check = skill_check_requirements(s, provider="openai")
        >>> check.ok, check.missing_packages, check.provider_mismatch
        (False, ('surely-absent-pkg',), True)
    """
    if not isinstance(skill, Skill):
        raise SkillError(f"skill_check_requirements() needs a Skill, got {type(skill).__name__}.")
    if provider is not None and (not isinstance(provider, str) or not provider.strip()):
        raise SkillError(
            f"provider= must be a provider name such as 'openai', or None; got {provider!r:.60}."
        )
    # importlib.metadata costs ~50 ms to import: only a requirements check needs it.
    import importlib.metadata

    from packaging.requirements import Requirement
    from packaging.version import InvalidVersion

    missing: list[str] = []
    messages: list[str] = []
    for spec in skill.requires.packages:
        req = Requirement(spec)
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            installed = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(spec)
            messages.append(f"Skill {skill.name!r} needs package {spec!r}, which is not installed.")
            continue
        if not req.specifier:
            continue
        try:
            satisfied = req.specifier.contains(installed, prereleases=True)
        except InvalidVersion:
            satisfied = False
        if not satisfied:
            missing.append(spec)
            messages.append(
                f"Skill {skill.name!r} needs package {spec!r}, but {req.name} {installed} "
                "is installed."
            )
    mismatch = False
    wanted = skill.requires.providers
    if provider is not None and wanted and _provider_prefix(provider) not in wanted:
        mismatch = True
        messages.append(
            f"Skill {skill.name!r} is meant for provider {' or '.join(wanted)}, but the "
            f"agent uses {_provider_prefix(provider)!r}; it may not work as intended."
        )
    return SkillCheck(
        ok=not missing and not mismatch,
        missing_packages=tuple(missing),
        provider_mismatch=mismatch,
        messages=tuple(messages),
    )


# --------------------------------------------------------------------------- loading

_YAML_KEYS = ("name", "version", "description", "prompt", "requires", "tools")
_MD_KEYS = ("name", "version", "description", "requires", "tools")


def skill_load(path: str | os.PathLike[str]) -> Skill:
    """Load a skill from a directory holding ``SKILL.md`` and/or ``SKILL.yaml``.

    ``SKILL.md`` follows the Agent Skills format: YAML front matter between ``---``
    lines with ``name`` and ``description`` (also read: ``version``, ``requires``,
    ``tools``; other keys, such as ``license`` or ``allowed-tools``, are ignored), then
    a markdown body, which becomes the prompt.

    ``SKILL.yaml`` holds ``name``, ``version``, ``description``, ``prompt``,
    ``requires: {packages: [...], providers: [...]}`` and
    ``tools: [{name, file, function, description, annotations}]``; any other key is an
    error (this file is deputy_shiny's own, so a typo should not pass silently).

    With both files, SKILL.yaml's fields win and SKILL.md's front matter (optional
    then) fills in the rest; the prompt is SKILL.md's body, and giving a non-empty
    ``prompt`` in SKILL.yaml as well is an error.

    Each tool entry names a Python ``file`` inside the skill directory (``..`` or
    symlinks leading out, absolute paths and non-``.py`` files are refused) and a
    ``function``: an attribute of that file that is a Tool (used as is; ``name``,
    ``description`` and ``annotations`` given here override its own) or a plain
    function (wrapped with ``tool()``; ``name`` defaults to ``function`` and the
    description to its docstring). Every entry and every other field is checked before
    any file runs; then each declared file is executed once, as its own module (no
    ``__pycache__`` is written, and the skill directory is not put on ``sys.path``, so
    a tool file cannot import sibling files). This is the only place a skill's code
    runs: load only skills you trust.

    Raises :class:`SkillLoadError`, naming the file and field, for a missing
    directory, no SKILL.md or SKILL.yaml, invalid YAML (with its line), missing or
    malformed front matter, a missing name, and a tool file that is missing, escapes
    the directory, fails to import (with the exception) or lacks the function.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "SKILL.md").write_text(
        ...     "---\\nname: concise\\ndescription: Short answers.\\n---\\nBe brief.\\n")
        >>> s = skill_load(folder)
        >>> s.name, s.description, s.prompt
        ('concise', 'Short answers.', 'Be brief.')
    """
    root = _skill_root(path)
    fields, origin = _read_fields(root)
    tool_specs = fields.pop("tools", None)
    # Validate every field, and every tool entry, before any tool file runs.
    skill = _validated_skill(fields, origin)
    if tool_specs is None:
        return skill
    specs = _tool_specs(tool_specs, root, origin["tools"])
    tools = _import_tools(specs, skill.name)
    return _validated_skill({**fields, "tools": tools}, origin)


def _read_fields(root: Path) -> tuple[dict[str, Any], dict[str, Path]]:
    """A skill directory's fields (``tools`` still unchecked) and the file each came from."""
    md_path, yaml_path = root / SKILL_MD, root / SKILL_YAML
    has_md, has_yaml = md_path.is_file(), yaml_path.is_file()
    if not has_md and not has_yaml:
        _no_skill_files(root)
    fields: dict[str, Any] = {}
    origin: dict[str, Path] = {}
    # SKILL.md first, so that SKILL.yaml's fields overwrite its front matter's.
    body = _read_skill_md(md_path, fields, origin, has_yaml=has_yaml) if has_md else ""
    if has_yaml:
        _read_skill_yaml(yaml_path, fields, origin)
    body = body.strip()
    if body:
        given_prompt = fields.get("prompt")
        if isinstance(given_prompt, str) and given_prompt.strip():
            raise SkillLoadError(
                f"{yaml_path}: field 'prompt' is given, and {SKILL_MD} has a body too; "
                f"keep the prompt in one place (the body of {SKILL_MD}, or 'prompt')."
            )
        fields["prompt"], origin["prompt"] = body, md_path
    if "version" in fields:
        fields["version"] = _version_text(fields["version"], origin["version"])
    return fields, origin


class SkillInfo(_SkillValue):
    """One skill :func:`skills_list` found: what it says about itself (frozen).

    Attributes:
        name / version / description: From its SKILL.md front matter or SKILL.yaml.
        path: Its directory (absolute), ready for :func:`skill_load`.
        tools: The names of the tools it declares (their files are not run).
        error: Why :func:`skill_load` would refuse it (None: it reads cleanly); then
            ``name`` is the directory's name.
    """

    name: StrictStr
    path: StrictStr
    version: StrictStr = "0.0.0"
    description: StrictStr = ""
    tools: tuple[StrictStr, ...] = ()
    error: StrictStr | None = None


def skills_list(path: str | os.PathLike[str] = "skills") -> list[SkillInfo]:
    """The skills in the folders under ``path``, by folder name, read but never run.

    Each subfolder holding ``SKILL.md`` and/or ``SKILL.yaml`` is a skill, checked as
    :func:`skill_load` checks it, but no tool file runs. One that :func:`skill_load`
    would refuse (bad YAML, no front matter, a tool file outside its folder, a near
    miss such as ``skill.md``) is listed with ``error`` saying why and logged at
    WARNING: one broken skill neither hides the others nor passes silently. Other
    folders, and hidden ones, are skipped. It only reads local files, like
    :func:`skill_load`; on an event loop, call it through ``asyncio.to_thread``.

    Raises :class:`SkillLoadError` when ``path`` does not exist, is not a folder, or
    is a skill folder itself (pass its parent, or use :func:`skill_load`).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> root = Path(tempfile.mkdtemp())
        >>> (root / "concise").mkdir()
        >>> _ = (root / "concise" / "SKILL.md").write_text(
        ...     "---\\nname: concise\\ndescription: Short answers.\\n---\\nBe brief.\\n")
        >>> [(s.name, s.description, s.error) for s in skills_list(root)]
        [('concise', 'Short answers.', None)]
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise SkillLoadError(f"skills_list() needs the path of a folder, got {path!r:.60}.")
    given = Path(path)
    if not given.is_dir():
        what = "is not a folder" if given.exists() else "does not exist"
        raise SkillLoadError(f"Skills folder {str(given)!r} {what}.")
    root = given.resolve()
    if (root / SKILL_MD).is_file() or (root / SKILL_YAML).is_file():
        raise SkillLoadError(
            f"{str(root)!r} is a skill folder itself; pass the folder that holds skill "
            "folders, or load this one with skill_load()."
        )
    found = []
    for folder in sorted(root.iterdir(), key=lambda p: p.name):
        if folder.name.startswith(".") or not folder.is_dir():
            continue
        names = {p.name.lower() for p in folder.iterdir()}
        if not names & {"skill.md", "skill.yaml", "skill.yml"}:
            continue
        found.append(_skill_info(folder.resolve()))
    return found


def _skill_info(folder: Path) -> SkillInfo:
    """One folder's SkillInfo; a SkillLoadError becomes its ``error``."""
    try:
        fields, origin = _read_fields(folder)
        specs = fields.pop("tools", None)
        skill = _validated_skill(fields, origin)
        tools = [] if specs is None else _tool_specs(specs, folder, origin["tools"])
    except SkillLoadError as exc:
        logger.warning("skills_list: %s cannot be loaded: %s", folder, exc)
        return SkillInfo(name=folder.name, path=str(folder), error=str(exc))
    return SkillInfo(
        name=skill.name,
        path=str(folder),
        version=skill.version,
        description=skill.description,
        tools=tuple(spec.name or spec.function for spec in tools),
    )


def _skill_root(path: str | os.PathLike[str]) -> Path:
    """The resolved skill directory ``path`` names, or SkillLoadError saying what is wrong."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise SkillLoadError(f"skill_load() needs the path of a skill directory, got {path!r:.60}.")
    given = Path(path)
    if not given.exists():
        raise SkillLoadError(f"Skill directory {str(given)!r} does not exist.")
    if not given.is_dir():
        raise SkillLoadError(
            f"{str(given)!r} is not a directory; pass the skill's folder, which holds "
            f"{SKILL_MD} and/or {SKILL_YAML}."
        )
    return given.resolve()


def _no_skill_files(root: Path) -> NoReturn:
    """Raise for a directory with neither file, naming near misses such as ``skill.md``."""
    near = sorted(
        p.name for p in root.iterdir() if p.name.lower() in ("skill.md", "skill.yaml", "skill.yml")
    )
    hint = f" (found {', '.join(near)}; the names must be exactly these)" if near else ""
    raise SkillLoadError(
        f"Skill directory {str(root)!r} has neither {SKILL_MD} nor {SKILL_YAML}{hint}."
    )


def _read_skill_md(
    md_path: Path, fields: dict[str, Any], origin: dict[str, Path], *, has_yaml: bool
) -> str:
    """Record SKILL.md's front matter fields in ``fields`` (and ``origin``); its body.

    Without a SKILL.yaml beside it, the front matter is required and must give a name
    and a description.
    """
    front, body, offset = _split_front_matter(_read_text(md_path), md_path, has_yaml)
    if front is None:
        return body
    meta = _parse_yaml(front, md_path, offset)
    if not isinstance(meta, dict):
        raise SkillLoadError(
            f"{md_path}: the front matter must be a YAML mapping of 'key: value' "
            f"lines, got {yaml_kind(meta)}."
        )
    for key in _MD_KEYS:
        if meta.get(key) is not None:
            fields[key], origin[key] = meta[key], md_path
    if not has_yaml:
        for key in ("name", "description"):
            value = meta.get(key)
            if value is None or (isinstance(value, str) and not value.strip()):
                raise SkillLoadError(
                    f"{md_path}: the front matter lacks the required field {key!r}."
                )
    return body


def _read_skill_yaml(yaml_path: Path, fields: dict[str, Any], origin: dict[str, Path]) -> None:
    """Record SKILL.yaml's fields in ``fields`` (and ``origin``); an unknown key is an error."""
    meta = _parse_yaml(_read_text(yaml_path), yaml_path, 0)
    if not isinstance(meta, dict):
        raise SkillLoadError(
            f"{yaml_path}: must be a YAML mapping of 'key: value' lines, got {yaml_kind(meta)}."
        )
    unknown = [str(k) for k in meta if k not in _YAML_KEYS]
    if unknown:
        raise SkillLoadError(
            f"{yaml_path}: unknown field {unknown[0]!r}; the fields are {', '.join(_YAML_KEYS)}."
        )
    for key in _YAML_KEYS:
        if meta.get(key) is not None:
            fields[key], origin[key] = meta[key], yaml_path
    if "name" not in fields:
        raise SkillLoadError(f"{yaml_path}: missing the required field 'name'.")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise SkillLoadError(f"{path}: not UTF-8 text ({exc.reason}).") from None
    except OSError as exc:
        raise SkillLoadError(f"{path}: cannot be read ({exc.strerror or exc}).") from None


def _split_front_matter(text: str, path: Path, optional: bool) -> tuple[str | None, str, int]:
    """(front matter or None, body, line offset of the front matter in the file)."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        if optional:
            return None, text, 0
        raise SkillLoadError(
            f"{path}: no YAML front matter: the file must start with a '---' line, then "
            "'name:' and 'description:' lines, then another '---' line, then the prompt."
        )
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            return "".join(lines[1:index]), "".join(lines[index + 1 :]), 1
    raise SkillLoadError(f"{path}: the front matter opened on line 1 has no closing '---' line.")


def _parse_yaml(text: str, path: Path, line_offset: int) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SkillLoadError(f"{path}: {yaml_error_text(exc, line_offset)}.") from None


def _version_text(value: Any, path: Path) -> Any:
    if isinstance(value, bool):
        return value  # let validation report it
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        raise SkillLoadError(
            f"{path}: field 'version' is the number {value!r}; quote it (version: "
            '"1.10"), since YAML reads 1.10 as 1.1.'
        )
    return value


def _validated_skill(fields: dict[str, Any], origin: dict[str, Path]) -> Skill:
    try:
        return Skill.model_validate(fields)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False, include_input=False):
            loc = err["loc"]
            where = ".".join(str(part) for part in loc) or "value"
            source = origin.get(str(loc[0])) if loc else None
            message = err["msg"].removeprefix("Value error, ")
            problems.append(f"{source or 'skill'}: field {where}: {message}")
        raise SkillLoadError("; ".join(problems) + ".") from None


# --------------------------------------------------------------------------- agent helpers


def prepare_skill(skill_or_path: Skill | str | os.PathLike[str]) -> Skill:
    """The Skill for ``agent.load_skill()``: a Skill as is, a path loaded with :func:`skill_load`.

    Examples:
        >>> s = skill_create("concise", prompt="Be brief.")
        >>> prepare_skill(s) is s
        True
    """
    if isinstance(skill_or_path, Skill):
        return skill_or_path
    if isinstance(skill_or_path, (str, os.PathLike)):
        return skill_load(skill_or_path)
    raise SkillError(
        "load_skill() needs a Skill (see skill_create()) or the path of a skill directory, "
        f"got {type(skill_or_path).__name__}."
    )


def skill_prompt_section(skill: Skill) -> str:
    """The text appended to the system prompt for a skill; ``""`` when its prompt is blank.

    Examples:
        >>> skill_prompt_section(skill_create("concise", prompt="Be brief."))
        '\\n\\n## Skill: concise\\nBe brief.'
        >>> skill_prompt_section(skill_create("tools-only"))
        ''
    """
    if not isinstance(skill, Skill):
        raise SkillError(f"skill_prompt_section() needs a Skill, got {type(skill).__name__}.")
    prompt = skill.prompt.strip()
    return f"\n\n## Skill: {skill.name}\n{prompt}" if prompt else ""
