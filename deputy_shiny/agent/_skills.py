"""Skills: the :class:`Skills` component (the loaded skills) and the Agent methods over it.

Loading a skill registers its tools (under the agent's permissions) and appends its
prompt section to the system prompt; the work is done in :mod:`deputy_shiny.skills`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Self

from ..conversation import Conversation
from ..errors import ConfigurationError, ToolNameConflictError
from ..skills import Skill, prepare_skill, skill_check_requirements, skill_prompt_section
from ._guard import Guard
from ._tool_registry import AgentTools

__all__ = ["SkillMethods", "Skills"]


class Skills:
    """One agent's loaded skills, by name.

    Args:
        tools / conversation / guard: The agent's.
        provider: Returns the provider the agent talks to now.
    """

    def __init__(
        self,
        *,
        tools: AgentTools,
        conversation: Conversation,
        guard: Guard,
        provider: Callable[[], str],
    ) -> None:
        self.loaded: dict[str, Skill] = {}
        self._tools = tools
        self._conversation = conversation
        self._guard = guard
        self._provider = provider

    def load(self, skill: Skill | str | os.PathLike[str], allow_conflicts: bool) -> None:
        """See :meth:`SkillMethods.load_skill` (warnings point at its caller)."""
        self._guard.ready("load a skill")
        loaded = prepare_skill(skill)
        if loaded.name in self.loaded and not allow_conflicts:
            raise ConfigurationError(f"A skill named {loaded.name!r} is already loaded.")
        check = skill_check_requirements(loaded, provider=self._provider())
        if not check.ok:
            warnings.warn(
                f"Skill {loaded.name!r}: " + "; ".join(check.messages), UserWarning, stacklevel=3
            )
        clashes = sorted(t.name for t in loaded.tools if t.name in self._tools.tools)
        if clashes and not allow_conflicts:
            raise ToolNameConflictError(
                f"Skill {loaded.name!r} brings tools already registered: {', '.join(clashes)}. "
                "Pass allow_conflicts=True to let the skill's tools replace them."
            )
        if clashes:
            warnings.warn(
                f"Skill {loaded.name!r} replaces registered tools: {', '.join(clashes)}",
                UserWarning,
                stacklevel=3,
            )
        self._tools.register(loaded.tools, replace=allow_conflicts)
        section = skill_prompt_section(loaded)
        if section:
            self._conversation.system_prompt = (self._conversation.system_prompt or "") + section
        self.loaded[loaded.name] = loaded


class SkillMethods:
    """An Agent's skill methods, façades over its :class:`Skills`."""

    _skills: Skills  # made by Agent.__init__

    def load_skill(
        self, skill: Skill | str | os.PathLike[str], allow_conflicts: bool = False
    ) -> Self:
        """Load a skill: register its tools (under this agent's permissions), append its prompt.

        Warns when packages the skill needs are missing or it expects another provider.
        A tool name clash is an error unless ``allow_conflicts=True``, when the skill's
        tools replace the registered ones (with a warning).

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.skills import skill_create
            >>> from deputy_shiny.testing import ScriptedModel
            >>> terse = skill_create("terse", prompt="Be terse.")
            >>> agent = Agent(ScriptedModel([])).load_skill(terse)
            >>> sorted(agent.skills()), "Be terse." in agent.get_system_prompt()
            (['terse'], True)
        """
        self._skills.load(skill, allow_conflicts)
        return self

    def skills(self) -> dict[str, Skill]:
        """The loaded skills by name."""
        return dict(self._skills.loaded)
