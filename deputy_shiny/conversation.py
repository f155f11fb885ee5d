"""Conversation: what an agent and its model have said, and the model's view of it.

An :class:`~deputy_shiny.agent.Agent` owns one Conversation; the engine appends the
turns of each run to it. It holds the turns, the system prompt, the compaction summary
and the tools approved for the rest of the conversation ("always allow").
:attr:`Conversation.turns` keeps everything; :meth:`Conversation.context_turns` is what
the model sees: compaction (:mod:`deputy_shiny.context`) moves its start past older
turns (whose summary joins the system prompt under "Previous Conversation Summary"),
and microcompaction replaces old tool results with a marker, in this view only.

Examples:
    >>> from deputy_shiny.conversation import Conversation
    >>> from deputy_shiny.messages import user_turn
    >>> conversation = Conversation(system_prompt="Be brief.")
    >>> conversation.append(user_turn("Hi"))
    >>> [m["role"] for m in conversation.messages()]
    ['system', 'user']
    >>> conversation.set_summary("We said hello.", context_start=1)
    >>> conversation.system_prompt.splitlines()[-1], conversation.context_turns()
    ('We said hello.', [])
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .messages import ContentText, ContentToolResult, Turn, to_openai_messages

if TYPE_CHECKING:
    from .context import CompactionRecord

__all__ = ["CONTINUATION_TEXT", "Conversation"]

SUMMARY_HEADING = "## Previous Conversation Summary"  # = context.SUMMARY_HEADING

CONTINUATION_TEXT = "[Earlier turns are summarised in the system prompt. Continue.]"
"""The user turn the model's view starts with when compaction kept an assistant turn
first (providers expect the conversation to open with a user message)."""


@functools.cache
def _continuation() -> Turn:
    # Made on first use: a Turn made at import would build the message models' schemas.
    return Turn(role="user", contents=[ContentText(text=CONTINUATION_TEXT)])


class Conversation:
    """The turns, system prompt, summary and conversation-wide approvals of one agent.

    Attributes:
        turns: Every turn, in order (never shortened by compaction).
        base_prompt: The system prompt without the compaction summary, or None.
        summary: The compaction summary, or None.
        context_start: Index of the first turn the model sees (0 before compaction).
        cleared: Tool results cleared from the model's view, by call id: the marker.
        last_compaction: The most recent compaction's record, or None.
        always_approved: Tool names a person approved for the rest of the conversation.
    """

    def __init__(self, system_prompt: str | None = None, turns: Iterable[Turn] = ()) -> None:
        self.base_prompt: str | None = system_prompt
        self.summary: str | None = None
        self.turns: list[Turn] = list(turns)
        self.context_start = 0
        self.cleared: dict[str, str] = {}
        self.last_compaction: CompactionRecord | None = None
        self.always_approved: set[str] = set()
        # Turns set_turns() gave during a run: the run takes them at its next safe point.
        self.pending_turns: list[Turn] | None = None
        # id(turn) -> (turn, tokens): token counts of turns, kept while the turn lives.
        self._tokens: dict[int, tuple[Turn, int]] = {}
        # id(turn) -> (turn, bound): cheap upper bounds on those counts (None: no bound).
        self._bounds: dict[int, tuple[Turn, int | None]] = {}
        # The tool schemas last counted (the same objects, run after run) and their count.
        self._schemas: tuple[tuple[dict[str, Any], ...], int] | None = None
        # id(turn) -> (turn, its view with cleared results): one view object per turn.
        self._views: dict[int, tuple[Turn, Turn]] = {}

    # ------------------------------------------------------------ system prompt

    @property
    def system_prompt(self) -> str | None:
        """The system prompt the model sees: the base prompt, then any summary."""
        if self.summary is None:
            return self.base_prompt
        block = _summary_block(self.summary)
        return f"{self.base_prompt}\n\n{block}" if self.base_prompt else block

    @system_prompt.setter
    def system_prompt(self, value: str | None) -> None:
        # As in deputy: replacing the prompt drops the summary unless the new value
        # still contains it.
        if self.summary is not None and value is not None:
            block = _summary_block(self.summary)
            if block in value:
                base = value.replace(f"\n\n{block}", "", 1).replace(block, "", 1)
                self.base_prompt = base or None
                return
        self.summary = None
        self.base_prompt = value

    def set_summary(self, summary: str | None, *, context_start: int | None = None) -> None:
        """Set the compaction summary (and where the model's view starts)."""
        self.summary = summary
        if context_start is not None:
            self.context_start = max(0, min(context_start, len(self.turns)))

    def reset(self, turns: Iterable[Turn]) -> None:
        """Replace the conversation: drops the summary, removed turns and cleared results."""
        self.turns = list(turns)
        self.summary = None
        self.context_start = 0
        self.cleared = {}
        self._tokens = {}
        self._bounds = {}
        self._views = {}

    def reset_later(self, turns: Iterable[Turn]) -> None:
        """Replace the conversation at the running run's next safe point
        (:meth:`apply_pending`): set during a run, never in the middle of a response."""
        self.pending_turns = list(turns)

    def apply_pending(self) -> bool:
        """Take the turns :meth:`reset_later` left, if any (True when it did)."""
        pending, self.pending_turns = self.pending_turns, None
        if pending is None:
            return False
        self.reset(pending)
        return True

    def view_state(self) -> dict[str, Any]:
        """What a compaction changes (the turns are never shortened), as JSON: the
        summary, where the model's view starts, and the results cleared from it.

        Examples:
            >>> Conversation("Be brief.").view_state()
            {'summary': None, 'context_start': 0, 'cleared': {}}
        """
        return {
            "summary": self.summary,
            "context_start": self.context_start,
            "cleared": dict(self.cleared),
        }

    def restore_view_state(self, state: Mapping[str, Any]) -> None:
        """Put a :meth:`view_state` back (read as untrusted JSON: odd values are dropped).

        Examples:
            >>> conversation = Conversation()
            >>> conversation.restore_view_state({"summary": "So far: hi."})
            >>> conversation.summary
            'So far: hi.'
        """
        summary = state.get("summary")
        start = state.get("context_start")
        self.set_summary(
            summary if isinstance(summary, str) else None,
            context_start=start if isinstance(start, int) else 0,
        )
        cleared = state.get("cleared")
        self.cleared = (
            {str(k): str(v) for k, v in cleared.items()} if isinstance(cleared, dict) else {}
        )
        self._views = {}

    def clear_results(self, markers: Mapping[str, str]) -> None:
        """Show ``markers`` (by call id) in place of those tool results, in the model's view."""
        self.cleared.update(markers)
        self._views = {}

    # ------------------------------------------------------------ views

    def append(self, turn: Turn) -> None:
        """Add one turn at the end."""
        self.turns.append(turn)

    def context_turns(self) -> list[Turn]:
        """The turns the model sees now: after the compaction point, cleared results
        replaced by their marker."""
        start = min(self.context_start, len(self.turns))
        turns = self.turns[start:] if start else list(self.turns)
        if self.cleared:
            turns = [self._view(turn) for turn in turns]
        if turns and turns[0].role == "assistant":
            turns.insert(0, _continuation())
        return turns

    def _view(self, turn: Turn) -> Turn:
        hit = self._views.get(id(turn))
        if hit is not None and hit[0] is turn:
            return hit[1]
        view = _with_cleared(turn, self.cleared)
        if view is not turn:
            self._views[id(turn)] = (turn, view)
        return view

    def system_turn(self) -> Turn | None:
        """The system prompt (with any summary) as a turn, or None without one."""
        prompt = self.system_prompt
        if not prompt:
            return None
        return Turn(role="system", contents=[ContentText(text=prompt)])

    def holds_tool_images(self) -> bool:
        """True when a tool result the model sees carries images."""
        return any(r.images for turn in self.context_turns() for r in turn.tool_results)

    def holds_tool_audio(self) -> bool:
        """True when a tool result the model sees carries audio."""
        return any(r.audio for turn in self.context_turns() for r in turn.tool_results)

    def messages(self, *, images: bool = True, audio: bool = True) -> list[dict[str, Any]]:
        """The model's view in OpenAI chat format: system prompt, then context turns
        (``images=False`` / ``audio=False``: for a model that takes no images / no audio
        input, see :func:`~deputy_shiny.messages.to_openai_messages`)."""
        return to_openai_messages(
            self.system_prompt, self.context_turns(), images=images, audio=audio
        )

    def open_tool_requests(self) -> Turn | None:
        """The last turn when it is an assistant turn whose tool calls have no results yet."""
        last = self.turns[-1] if self.turns else None
        if last is not None and last.role == "assistant" and last.tool_requests:
            return last
        return None

    # ------------------------------------------------------------ token counts

    def turn_tokens(self, turn: Turn, count: Callable[[Turn], int]) -> int:
        """``count(turn)``, remembered for as long as the turn is in the conversation."""
        key = id(turn)
        hit = self._tokens.get(key)
        if hit is not None and hit[0] is turn:
            return hit[1]
        if len(self._tokens) > 2 * len(self.turns) + 64:
            live = {id(t) for t in self.turns}
            self._tokens = {k: v for k, v in self._tokens.items() if k in live}
        tokens = count(turn)
        self._tokens[key] = (turn, tokens)
        return tokens

    def known_tokens(self, turn: Turn) -> int | None:
        """The token count :meth:`turn_tokens` remembers for ``turn``, or None (not counted)."""
        hit = self._tokens.get(id(turn))
        return hit[1] if hit is not None and hit[0] is turn else None

    def turn_bound(self, turn: Turn, bound: Callable[[Turn], int | None]) -> int | None:
        """``bound(turn)`` (an upper bound on its count, or None), remembered as counts are."""
        key = id(turn)
        hit = self._bounds.get(key)
        if hit is not None and hit[0] is turn:
            return hit[1]
        if len(self._bounds) > 2 * len(self.turns) + 64:
            live = {id(t) for t in self.turns}
            self._bounds = {k: v for k, v in self._bounds.items() if k in live}
        value = bound(turn)
        self._bounds[key] = (turn, value)
        return value

    def schema_tokens(
        self,
        schemas: Sequence[dict[str, Any]],
        count: Callable[[Sequence[dict[str, Any]]], int],
    ) -> int:
        """``count(schemas)``, remembered while the next request sends the same schema
        objects (an agent makes its tool schemas once and sends them, unchanged, with
        every request; serialising them to count costs ~200 µs for eight tools)."""
        key = tuple(schemas)
        held = self._schemas
        if (
            held is not None
            and len(held[0]) == len(key)
            and all(a is b for a, b in zip(held[0], key, strict=True))
        ):
            return held[1]
        tokens = count(key)
        self._schemas = (key, tokens)
        return tokens


def _summary_block(summary: str) -> str:
    return f"{SUMMARY_HEADING}\n\n{summary}"


def _with_cleared(turn: Turn, cleared: Mapping[str, str]) -> Turn:
    if turn.role != "user" or not any(
        isinstance(c, ContentToolResult) and c.call_id in cleared for c in turn.contents
    ):
        return turn
    contents = [
        c.model_copy(update={"output": cleared[c.call_id]})
        if isinstance(c, ContentToolResult) and c.call_id in cleared
        else c
        for c in turn.contents
    ]
    return turn.model_copy(update={"contents": contents})
