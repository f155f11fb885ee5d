"""What a skill needs, checked without importing or installing anything:
:func:`skill_check_requirements`."""

from __future__ import annotations

import platform
import sys

from ..errors import SkillError
from ._values import Skill, _SkillValue


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
    extras are not checked. A module of Python's standard library (``json``, ``csv``:
    the analogue of R's ``base``) is always there, so it is never missing; with a
    version it is checked against Python's own. ``provider`` is a litellm provider prefix such as
    ``"openai"``, or a model string such as ``"openai/gpt-4o"`` (its prefix is used);
    with None, or when the skill names no providers, there is no provider check.

    Examples:
        >>> from deputy_shiny.skills import skill_create
        >>> skill_check_requirements(skill_create("stdlib", requires={"packages": ["json"]})).ok
        True
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
            if req.name in sys.stdlib_module_names:
                installed = platform.python_version()  # part of Python itself
            else:
                missing.append(spec)
                messages.append(
                    f"Skill {skill.name!r} needs package {spec!r}, which is not installed."
                )
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
