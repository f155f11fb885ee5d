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

import os
from pathlib import Path

from ..errors import SkillError, SkillLoadError
from ._loading import SKILL_MD, SKILL_YAML, SkillInfo, skill_load, skills_list
from ._requirements import SkillCheck, skill_check_requirements
from ._values import Skill, SkillRequirements, skill_create

__all__ = [
    "BUNDLED_SKILLS",
    "SKILL_MD",
    "SKILL_YAML",
    "Skill",
    "SkillCheck",
    "SkillError",
    "SkillInfo",
    "SkillLoadError",
    "SkillRequirements",
    "bundled_skill",
    "prepare_skill",
    "skill_check_requirements",
    "skill_create",
    "skill_load",
    "skill_prompt_section",
    "skills_list",
]

BUNDLED_SKILLS = Path(__file__).parent / "bundled"
"""The folder of the skills that ship with deputy_shiny (``skills_list(BUNDLED_SKILLS)``)."""


def bundled_skill(name: str) -> Path:
    """The folder of a skill shipped with deputy_shiny, for :func:`skill_load` or
    ``agent.load_skill()``: deputy's ``system.file("skills", name, package = "deputy")``.

    ``data_analysis`` summarises a CSV dataset (``eda_summary``) and describes one of its
    columns (``describe_column``), reading files under the agent's read permissions.

    Raises:
        SkillLoadError: no bundled skill has that name (the message lists them).

    Examples:
        >>> skill = skill_load(bundled_skill("data_analysis"))
        >>> skill.name, [t.name for t in skill.tools]
        ('data_analysis', ['eda_summary', 'describe_column'])
    """
    names = sorted(p.name for p in BUNDLED_SKILLS.iterdir() if (p / SKILL_YAML).is_file())
    if name not in names:
        raise SkillLoadError(f"No bundled skill is named {name!r}; they are: {', '.join(names)}.")
    return BUNDLED_SKILLS / name


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
        # load_skill() checks the requirements itself, with the agent's provider.
        return skill_load(skill_or_path, check_requirements=False)
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
