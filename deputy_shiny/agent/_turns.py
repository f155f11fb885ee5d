"""The conversation as ellmer shows it: the :class:`Turns` component and the Agent's
turn methods over it (``get_turns``, ``set_turns``, ``add_turn``, ``last_turn``, the
system prompt).

``set_turns`` works during a run too, as deputy's does: the run takes the new turns at
its next safe point (before its next model request, or as it ends), never mid-response,
so the conversation it sends stays well formed; the usage the run counted so far still
counts. Until then :meth:`Turns.get` already returns them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, Self

from pydantic import ValidationError

from ..conversation import Conversation
from ..errors import ConfigurationError
from ..messages import ContentText, Turn, UserContent, user_turn
from ._guard import Guard

__all__ = ["TurnMethods", "Turns"]


class Turns:
    """One agent's conversation, read and replaced through the agent's guard.

    Examples:
        >>> from deputy_shiny._engine.loop import Engine
        >>> turns = Turns(Conversation("Be brief."), Guard(Engine()))
        >>> turns.set([{"role": "user", "contents": [{"type": "text", "text": "Hi"}]}])
        >>> [t.text for t in turns.get()], turns.conversation.system_prompt
        (['Hi'], 'Be brief.')
    """

    def __init__(self, conversation: Conversation, guard: Guard) -> None:
        self.conversation = conversation
        self._guard = guard

    def get(self, include_system_prompt: bool = False) -> list[Turn]:
        """See :meth:`TurnMethods.get_turns`."""
        conversation = self.conversation
        pending = conversation.pending_turns
        turns = list(conversation.turns if pending is None else pending)
        system = conversation.system_turn() if include_system_prompt else None
        return turns if system is None else [system, *turns]

    def set(self, turns: Iterable[Turn | Mapping[str, Any]]) -> None:
        """See :meth:`TurnMethods.set_turns`."""
        self._guard.free("replace the conversation")
        new_turns = [_as_turn(turn) for turn in turns]
        if self._guard.busy:
            self.conversation.reset_later(new_turns)
        else:
            self.conversation.reset(new_turns)  # drops the summary and removed turns too

    def add(self, user: Turn | UserContent, assistant: Turn | str) -> None:
        """See :meth:`TurnMethods.add_turn`."""
        self._guard.ready("add turns")
        user_t = user if isinstance(user, Turn) else user_turn(user)
        assistant_t = (
            assistant
            if isinstance(assistant, Turn)
            else Turn(role="assistant", contents=[ContentText(text=assistant)])
        )
        if user_t.role != "user" or assistant_t.role != "assistant":
            raise ConfigurationError("add_turn takes a user turn, then an assistant turn")
        self.conversation.turns.extend([user_t, assistant_t])

    def last(self, role: str) -> Turn | None:
        """See :meth:`TurnMethods.last_turn`."""
        if role == "system":
            return self.conversation.system_turn()
        return next((t for t in reversed(self.get()) if t.role == role), None)

    def set_system_prompt(self, value: str | None) -> None:
        """See :meth:`TurnMethods.set_system_prompt`."""
        self._guard.free("change the system prompt")
        if value is not None and not isinstance(value, str):
            raise ConfigurationError("system_prompt must be a string or None")
        self.conversation.system_prompt = value


def _as_turn(turn: object) -> Turn:
    """A Turn, or a turn as JSON (``Turn.model_dump(mode="json")``: what a chat history
    saves and gives back); anything else is a ConfigurationError."""
    if isinstance(turn, Turn):
        return turn
    if isinstance(turn, Mapping):
        try:
            return Turn.model_validate(dict(turn))
        except ValidationError as exc:
            raise ConfigurationError(f"set_turns got a turn it cannot read: {exc}") from None
    raise ConfigurationError(f"set_turns takes Turn objects, not {type(turn).__name__}")


class TurnMethods:
    """An Agent's conversation methods, façades over its :class:`Turns`."""

    _turns: Turns  # made by Agent.__init__

    def get_turns(self, include_system_prompt: bool = False) -> list[Turn]:
        """The whole conversation (optionally with the system prompt as the first turn).

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel(["Hi!"]))
            >>> _ = agent.chat("Hello")
            >>> [t.role for t in agent.get_turns()]
            ['user', 'assistant']
        """
        return self._turns.get(include_system_prompt)

    def get_context_turns(self, include_system_prompt: bool = False) -> list[Turn]:
        """The turns the model sees now: after compaction's cut, cleared results as markers
        (``include_system_prompt``: the prompt with any summary first)."""
        conversation = self._turns.conversation
        turns = conversation.context_turns()
        system = conversation.system_turn() if include_system_prompt else None
        return [system, *turns] if system is not None else turns

    def set_turns(self, turns: Iterable[Turn | Mapping[str, Any]]) -> Self:
        """Replace the conversation, as ellmer's ``set_turns``: also drops any compaction
        summary and the turns compaction removed.

        Takes :class:`~deputy_shiny.messages.Turn` objects or turns as JSON
        (``turn.model_dump(mode="json")``, as a chat history stores them). During a run
        (from a tool, a hook or the run's consumer) the run continues from the new turns
        at its next safe point: before its next model request, or as it ends, whichever
        comes first; its usage so far still counts. A retained agent refuses.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).set_turns([]).get_turns()
            []
        """
        self._turns.set(turns)
        return self

    def add_turn(self, user: Turn | UserContent, assistant: Turn | str) -> Self:
        """Append a user turn and an assistant turn, as ellmer's ``add_turn`` does.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([])).add_turn("2+2?", "4")
            >>> agent.last_turn().text
            '4'
        """
        self._turns.add(user, assistant)
        return self

    def last_turn(self, role: Literal["assistant", "user", "system"] = "assistant") -> Turn | None:
        """The last turn with ``role``, or None (``"system"``: the system prompt as a turn)."""
        return self._turns.last(role)

    def get_system_prompt(self) -> str | None:
        """The system prompt, or None."""
        return self._turns.conversation.system_prompt

    def set_system_prompt(self, value: str | None) -> Self:
        """Replace the system prompt (None removes it)."""
        self._turns.set_system_prompt(value)
        return self
