"""A skill as a value: :class:`Skill`, its :class:`SkillRequirements`, and
:func:`skill_create`. Building or revising one never runs anything."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    StrictStr,
    field_validator,
)

from .._util.config import FrozenConfig
from ..errors import ConfigurationError, SkillError
from ..tools._tool import Tool

SKILL_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_PROVIDER_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


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
