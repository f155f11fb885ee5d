"""An Agent's usage accessors by turn, as ellmer's: ``get_tokens`` and ``get_cost``
(over the public ``get_turns`` and ``cost``; ``usage``, ``cost`` and ``token_count``
live in ``_agent.py``, beside the state they read)."""

from __future__ import annotations

from typing import Literal, Protocol

from ..errors import ConfigurationError
from ..messages import Turn
from ..usage import ConversationCost, TurnTokens

__all__ = ["UsageMethods"]


class _Conversational(Protocol):
    def get_turns(self, include_system_prompt: bool = False) -> list[Turn]: ...
    def cost(self) -> ConversationCost: ...


class UsageMethods:
    """An Agent's usage-by-turn accessors (no state of their own)."""

    def get_tokens(self: _Conversational) -> list[TurnTokens]:
        """Token usage by turn, as ellmer's ``$get_tokens()``: one row per assistant turn
        of the whole conversation (turns compaction removed included).

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel, ScriptedReply
            >>> usage = {"prompt_tokens": 9, "completion_tokens": 2}
            >>> reply = ScriptedReply(text="Hi!", usage=usage)
            >>> agent = Agent(ScriptedModel([reply]))
            >>> _ = agent.chat("Hello")
            >>> [(t.turn, t.input_tokens, t.output_tokens) for t in agent.get_tokens()]
            [(1, 9, 2)]
        """
        return [
            TurnTokens(
                turn=index,
                input_tokens=turn.usage.input_tokens,
                output_tokens=turn.usage.output_tokens,
                cached_tokens=turn.usage.cached_tokens,
                cost=turn.usage.cost,
            )
            for index, turn in enumerate(self.get_turns())
            if turn.role == "assistant" and turn.usage is not None
        ]

    def get_cost(self: _Conversational, include: Literal["all", "last"] = "all") -> float | None:
        """The estimated cost in US dollars, as ellmer's ``$get_cost()``: of every request
        (``"all"``, as :meth:`cost` totals it) or of the latest response (``"last"``).
        None when a cost is unknown.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel, ScriptedReply
            >>> agent = Agent(ScriptedModel([ScriptedReply(text="a", cost=0.5),
            ...                              ScriptedReply(text="b", cost=0.25)]))
            >>> _ = agent.chat("1"); _ = agent.chat("2")
            >>> (agent.get_cost(), agent.get_cost("last"))
            (0.75, 0.25)
        """
        if include == "all":
            return self.cost().total
        if include != "last":
            raise ConfigurationError(f"include must be 'all' or 'last', not {include!r}")
        rows = UsageMethods.get_tokens(self)
        return rows[-1].cost if rows else 0.0
