"""Conversation: what an agent and its model have said, and the model's view of it.

An :class:`~deputy_shiny.agent.Agent` owns one Conversation; the engine appends the
turns of each run to it. It holds the turns, the system prompt and the tools approved
for the rest of the conversation ("always allow"). :meth:`Conversation.context_turns`
is what the model sees; today that is every turn, and compaction (a summary in the
system prompt, old tool results cleared) will narrow it here, in one place, while
:attr:`Conversation.turns` keeps everything.

Example:
    >>> from deputy_shiny.conversation import Conversation
    >>> from deputy_shiny.messages import user_turn
    >>> conversation = Conversation(system_prompt="Be brief.")
    >>> conversation.append(user_turn("Hi"))
    >>> [m["role"] for m in conversation.messages()]
    ['system', 'user']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .messages import ContentText, Turn, to_openai_messages

__all__ = ["Conversation"]


class Conversation:
    """The turns, system prompt and conversation-wide approvals of one agent.

    Attributes:
        turns: Every turn, in order (never shortened by compaction).
        system_prompt: The system prompt, or None.
        always_approved: Tool names a person approved for the rest of the conversation.
    """

    def __init__(self, system_prompt: str | None = None, turns: Iterable[Turn] = ()) -> None:
        self.system_prompt = system_prompt
        self.turns: list[Turn] = list(turns)
        self.always_approved: set[str] = set()

    def append(self, turn: Turn) -> None:
        """Add one turn at the end."""
        self.turns.append(turn)

    def context_turns(self) -> list[Turn]:
        """The turns the model sees now (every turn, until compaction narrows it)."""
        return list(self.turns)

    def system_turn(self) -> Turn | None:
        """The system prompt as a turn, or None without one."""
        if not self.system_prompt:
            return None
        return Turn(role="system", contents=[ContentText(text=self.system_prompt)])

    def messages(self) -> list[dict[str, Any]]:
        """The model's view in OpenAI chat format: system prompt, then context turns."""
        return to_openai_messages(self.system_prompt, self.context_turns())

    def open_tool_requests(self) -> Turn | None:
        """The last turn when it is an assistant turn whose tool calls have no results yet."""
        last = self.turns[-1] if self.turns else None
        if last is not None and last.role == "assistant" and last.tool_requests:
            return last
        return None
