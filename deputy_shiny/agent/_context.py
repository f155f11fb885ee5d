"""The conversation's context: the :class:`ConversationContext` component and the Agent
methods over it.

The context policy (``set_context_policy``), compaction (``compact``, ``last_compaction``,
``microcompact``), offloaded tool results (``resolve_tool_result``) and saved sessions
(``save_session``, ``load_session``). :class:`ConversationContext` owns the policy and
the tool-result store; the work is done in :mod:`deputy_shiny._engine.compaction`,
:mod:`deputy_shiny._engine.offload` and :mod:`deputy_shiny.persistence.sessions`. It also
reads and applies the sessions' built-in sections (``conversation``, ``run_context``,
``tool_results``), which the Agent registers.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from .._engine.compaction import ContextRuntime
from .._engine.offload import ToolResultStore
from .._util import sync as _sync
from .._util.metadata import is_id_key, validate_run_context
from .._util.version import package_version
from ..context import (
    DEFAULT_MICROCOMPACT_MARKER,
    CompactionRecord,
    ContextPolicy,
    parse_tool_result_reference,
)
from ..conversation import Conversation
from ..errors import (
    ConfigurationError,
    ContextPolicyError,
    PersistenceCorruptError,
    PersistenceError,
    SessionError,
    ToolResultReferenceError,
)
from ..events import AgentUsage
from ..messages import Turn
from ..models import ChatModel
from ..persistence.sessions import Commit, read_session, write_session
from ._guard import Guard

if TYPE_CHECKING:
    from .._engine.deps import RunDeps
    from .._engine.loop import Engine
    from ..usage import UsageLimits

__all__ = ["ContextMethods", "ConversationContext"]

_MAX_TURNS = 1_000_000


class ConversationContext:
    """What one agent's model sees of its conversation, and how it is kept and saved.

    Args:
        policy: The :class:`~deputy_shiny.context.ContextPolicy` (checked by the Agent).
        tool_results: Where large tool results are offloaded.
        conversation / guard / engine: The agent's.
        agent_id / agent_name / session_id / usage_limits: The agent's (fixed).
        model: Returns the model requests go to now.
        run_deps: Returns what a run of the agent may use now (a manual compaction is
            charged through the engine with it, as a run's compaction is).
        usage / set_usage: Read and replace the agent's conversation usage.
        run_context / set_run_context: Read and replace the agent's run context.
    """

    def __init__(
        self,
        policy: ContextPolicy,
        tool_results: ToolResultStore,
        *,
        conversation: Conversation,
        guard: Guard,
        engine: Engine,
        agent_id: str,
        agent_name: str | None,
        session_id: str,
        usage_limits: UsageLimits,
        model: Callable[[], ChatModel],
        run_deps: Callable[[], RunDeps],
        usage: Callable[[], AgentUsage],
        set_usage: Callable[[AgentUsage], None],
        run_context: Callable[[], dict[str, Any]],
        set_run_context: Callable[[dict[str, Any]], None],
    ) -> None:
        self.policy = policy
        self.tool_results = tool_results
        self._conversation = conversation
        self._guard = guard
        self._engine = engine
        self._agent_id = agent_id
        self._agent_name = agent_name
        self._session_id = session_id
        self._usage_limits = usage_limits
        self._model = model
        self._run_deps = run_deps
        self._usage = usage
        self._set_usage = set_usage
        self._run_context = run_context
        self._set_run_context = set_run_context

    # ------------------------------------------------------------ policy

    def set_policy(self, policy: ContextPolicy) -> None:
        """See :meth:`ContextMethods.set_context_policy`."""
        self._guard.free("change its context policy")
        if not isinstance(policy, ContextPolicy):
            raise ContextPolicyError(
                f"set_context_policy takes a ContextPolicy, not {type(policy).__name__}"
            )
        if policy.offload_dir != self.policy.offload_dir:
            raise ContextPolicyError(
                "The new ContextPolicy must keep offload_dir "
                f"({self.policy.offload_dir}): saved tool results are read back from "
                "there. Start a new Agent to use another directory."
            )
        self.policy = policy

    def runtime(self) -> ContextRuntime:
        """What a run uses of the context: the policy and the tool-result store."""
        return ContextRuntime(self.policy, self.tool_results)

    # ------------------------------------------------------------ compaction

    async def compact(
        self, keep_last: int | None, summary: str | None, fallback: str | None
    ) -> CompactionRecord | None:
        """See :meth:`ContextMethods.compact`."""
        self._guard.ready("compact the conversation")
        if keep_last is not None and (
            isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0
        ):
            raise ConfigurationError("keep_last must be a non-negative integer or None")
        if summary is not None and not isinstance(summary, str):
            raise ConfigurationError("summary must be a string or None")
        if fallback not in (None, "error", "text"):
            raise ConfigurationError('fallback must be "error", "text" or None')
        # Charged through the engine: the same rule, limits and report as a run's.
        return await self._engine.compact(
            self._run_deps(),
            self._conversation,
            limits=self._usage_limits,
            run_context=self._run_context(),
            keep_last=keep_last,
            summary=summary,
            fallback=fallback,
        )

    def microcompact(self, keep_last: int | float, keep_tools: Iterable[str], marker: str) -> int:
        """See :meth:`ContextMethods.microcompact`."""
        self._guard.ready("clear tool results")
        if isinstance(keep_last, bool) or not (isinstance(keep_last, int) or keep_last == math.inf):
            raise ConfigurationError("keep_last must be a non-negative integer or math.inf")
        if keep_last < 0:
            raise ConfigurationError("keep_last must be a non-negative integer or math.inf")
        if isinstance(keep_tools, str) or not isinstance(marker, str):
            raise ConfigurationError("keep_tools must be a list of tool names; marker a string")
        kept = {name.lower() for name in keep_tools}
        conversation = self._conversation
        turns = conversation.turns
        end = 0 if keep_last == math.inf else max(0, len(turns) - int(keep_last))
        markers = {
            result.call_id: marker
            for turn in turns[conversation.context_start : end]
            for result in turn.tool_results
            if result.name.lower() not in kept and result.call_id not in conversation.cleared
        }
        conversation.clear_results(markers)
        return len(markers)

    def last_compaction(self) -> CompactionRecord | None:
        """The record of the most recent compaction, or None."""
        return self._conversation.last_compaction

    def count_usage(self, usage: AgentUsage) -> None:
        """Add ``usage`` to the conversation's; see :meth:`ContextMethods.count_usage`."""
        # Added to the value now: a run ending meanwhile adds its own the same way.
        self._set_usage(self._usage() + usage)

    # ------------------------------------------------------------ sessions

    def save_session(self, owner: Any, path: str | os.PathLike[str]) -> Path:
        """Save ``owner`` (this context's agent) to ``path``; see
        :meth:`ContextMethods.save_session`."""
        self._guard.idle("save the session")

        model = self._model()
        metadata = {
            "deputy_shiny_version": package_version(),
            "provider": model.provider,
            "model": model.model,
            "agent_id": self._agent_id,
            "agent_name": self._agent_name,
            "session_id": self._session_id,
        }
        return write_session(owner, path, metadata)

    async def save_session_async(self, owner: Any, path: str | os.PathLike[str]) -> Path:
        """:meth:`save_session` with the file work in a worker thread."""
        self._guard.idle("save the session")
        return await asyncio.to_thread(self.save_session, owner, path)

    def load_session(self, owner: Any, path: str | os.PathLike[str]) -> None:
        """Load the session at ``path`` into ``owner``; see :meth:`ContextMethods.load_session`."""
        self._guard.ready("load a session")
        commit = read_session(owner, path)
        self._guard.idle("load a session")
        commit()

    async def load_session_async(self, owner: Any, path: str | os.PathLike[str]) -> None:
        """:meth:`load_session` with the file read in a worker thread."""
        self._guard.ready("load a session")
        commit = await asyncio.to_thread(read_session, owner, path)
        self._guard.idle("load a session")
        commit()

    # ------------------------------------------------------------ session sections

    def save_conversation(self) -> dict[str, Any]:
        """The ``conversation`` section: every turn, the prompt and summary, the usage."""
        conversation = self._conversation
        record = conversation.last_compaction
        return {
            "turns": [turn.model_dump(mode="json") for turn in conversation.turns],
            "system_prompt": conversation.base_prompt,
            "summary": conversation.summary,
            "context_start": conversation.context_start,
            "cleared": dict(conversation.cleared),
            "last_compaction": None if record is None else record.model_dump(mode="json"),
            "usage": self._usage().model_dump(mode="json"),
        }

    def load_conversation(self, data: Any) -> Commit:
        """Check a ``conversation`` section; the commit applies it."""
        if not isinstance(data, dict):
            raise TypeError("not an object")
        raw_turns = data["turns"]
        if not isinstance(raw_turns, list) or len(raw_turns) > _MAX_TURNS:
            raise TypeError("turns is not a list of turns")
        turns = [Turn.model_validate(item) for item in raw_turns]
        prompt, summary = data["system_prompt"], data["summary"]
        if not (prompt is None or isinstance(prompt, str)):
            raise TypeError("system_prompt is not a string")
        if not (summary is None or isinstance(summary, str)):
            raise TypeError("summary is not a string")
        start = data["context_start"]
        if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start <= len(turns):
            raise ValueError("context_start is out of range")
        cleared = data["cleared"]
        if not isinstance(cleared, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in cleared.items()
        ):
            raise TypeError("cleared is not a map of call ids to markers")
        raw_record = data["last_compaction"]
        record = None if raw_record is None else CompactionRecord.model_validate(raw_record)
        usage = AgentUsage.model_validate(data["usage"])

        def commit() -> None:
            conversation = self._conversation
            conversation.reset(turns)
            conversation.base_prompt = prompt
            conversation.set_summary(summary, context_start=start)
            conversation.clear_results(cleared)
            conversation.last_compaction = record
            self._set_usage(usage)

        return commit

    def save_run_context(self) -> dict[str, Any]:
        """The ``run_context`` section."""
        return dict(self._run_context())

    def load_run_context(self, data: Any) -> Commit:
        """Check a ``run_context`` section (an ID field must match); the commit merges it."""
        try:
            saved = validate_run_context(data, where="saved run_context")
        except ConfigurationError as exc:
            raise PersistenceCorruptError(
                f"The session's run_context is not valid: {exc}"
            ) from None
        current = self._run_context()
        for key, value in saved.items():
            if is_id_key(key) and key in current and current[key] != value:
                raise SessionError(
                    f"The session's run_context has {key!r} = {value!r}, but this agent's is "
                    f"{current[key]!r}; an ID field must match to load it."
                )

        def commit() -> None:
            self._set_run_context({**self._run_context(), **saved})

        return commit

    def save_tool_results(self) -> dict[str, Any] | None:
        """The ``tool_results`` section: copies of the offloaded results (None: none)."""
        try:
            exported = self.tool_results.export()
        except ToolResultReferenceError as exc:
            raise PersistenceError(f"The session cannot be saved: {exc}") from None
        return exported or None

    def load_tool_results(self, data: Any) -> Commit:
        """Check a ``tool_results`` section; the commit writes the results."""
        if not isinstance(data, dict):
            raise TypeError("not an object")
        records: dict[str, dict[str, str]] = {}
        for result_id, item in data.items():
            try:
                parsed = parse_tool_result_reference(f"deputy://tool-result/{result_id}")
            except ToolResultReferenceError:
                parsed = None
            if parsed != result_id:
                raise ValueError("a tool result id is malformed")
            if not isinstance(item, dict) or not all(
                isinstance(item.get(k), str) for k in ("tool_name", "call_id", "output")
            ):
                raise TypeError("a tool result is malformed")
            records[result_id] = {k: item[k] for k in ("tool_name", "call_id", "output")}

        def commit() -> None:
            # Writes files (may raise): runs before the in-memory commits (order 0).
            self.tool_results.prepare_import(records)()

        return commit


class ContextMethods:
    """An Agent's context and session methods, façades over its :class:`ConversationContext`."""

    _context: ConversationContext  # made by Agent.__init__

    # ------------------------------------------------------------ policy

    @property
    def context_policy(self) -> ContextPolicy:
        """The agent's :class:`~deputy_shiny.context.ContextPolicy` (read-only; replace it
        with :meth:`set_context_policy`)."""
        return self._context.policy

    def set_context_policy(self, policy: ContextPolicy) -> Self:
        """Replace the context policy (from the next run); ``offload_dir`` must stay the same.

        Examples:
            >>> from deputy_shiny import Agent, ContextPolicy
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([]))
            >>> agent.set_context_policy(ContextPolicy(max_tokens=64000)).context_policy.max_tokens
            64000
        """
        self._context.set_policy(policy)
        return self

    # ------------------------------------------------------------ compaction

    def last_compaction(self) -> CompactionRecord | None:
        """The record of the most recent compaction, or None if there has been none."""
        return self._context.last_compaction()

    def compact(
        self,
        keep_last: int | None = None,
        summary: str | None = None,
        fallback: str | None = None,
    ) -> CompactionRecord | None:
        """Replace older turns in the model's context with a summary (not during a run).

        Args:
            keep_last: Recent turns to keep; None keeps the newest that fit in
                ``compact_to * max_tokens`` (the last 4 when ``max_tokens`` is None).
            summary: Use this summary; None lets a PreCompact hook supply one, else the
                model writes it (a request that counts toward :meth:`usage`).
            fallback: ``"error"`` or ``"text"`` when no model can write it (default: the
                policy's).

        Returns the :class:`~deputy_shiny.context.CompactionRecord`, or None when there
        was nothing to remove. The removed turns stay in :meth:`get_turns`.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([]), system_prompt="Be brief.")
            >>> agent = agent.add_turn("Hi", "Hello!").add_turn("Bye", "Goodbye!")
            >>> agent.compact(keep_last=2, summary="We greeted.").turns_removed
            2
            >>> len(agent.get_turns()), len(agent.get_context_turns())
            (4, 2)
            >>> "We greeted." in agent.get_system_prompt()
            True
        """
        return _sync.run_sync(self.compact_async(keep_last, summary, fallback), "compact")

    async def compact_async(
        self,
        keep_last: int | None = None,
        summary: str | None = None,
        fallback: str | None = None,
    ) -> CompactionRecord | None:
        """:meth:`compact` from async code."""
        return await self._context.compact(keep_last, summary, fallback)

    def microcompact(
        self,
        keep_last: int | float = 2,
        keep_tools: Iterable[str] = (),
        marker: str = DEFAULT_MICROCOMPACT_MARKER,
    ) -> int:
        """Clear old tool results from the model's context; returns how many were cleared.

        Every tool result before the last ``keep_last`` turns (``math.inf``: none) shows
        ``marker`` to the model instead, unless its tool is in ``keep_tools``. No model
        call; the summary stays; :meth:`get_turns` and saved sessions keep the originals.

        Examples:
            >>> from deputy_shiny import Agent, ContentToolRequest, ContentToolResult, Turn
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([])).set_turns([
            ...     Turn(role="user", contents=[{"type": "text", "text": "ls"}]),
            ...     Turn(role="assistant", contents=[ContentToolRequest(id="c1", name="ls")]),
            ...     Turn(role="user", contents=[ContentToolResult(call_id="c1", name="ls",
            ...                                                   output="a.txt b.txt")]),
            ...     Turn(role="assistant", contents=[{"type": "text", "text": "Two files."}]),
            ... ])
            >>> agent.microcompact(keep_last=1)
            1
            >>> agent.get_context_turns()[2].tool_results[0].output
            '[Old tool result cleared to save context.]'
            >>> agent.get_turns()[2].tool_results[0].output
            'a.txt b.txt'
        """
        return self._context.microcompact(keep_last, keep_tools, marker)

    # ------------------------------------------------------------ usage

    def count_usage(self, usage: AgentUsage) -> Self:
        """Count ``usage`` in the conversation's :meth:`usage` (and so in its saved
        session): requests a host made for this conversation outside its runs, such as
        the chat kit's model-made title. A run in progress keeps its own count.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.events import AgentUsage
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([]))
            >>> title = AgentUsage(requests=1, input_tokens=30, output_tokens=5, cost=0.001)
            >>> agent.count_usage(title).usage().requests, agent.usage().cost
            (1, 0.001)
        """
        self._context.count_usage(usage)
        return self

    # ------------------------------------------------------------ offloaded results

    def resolve_tool_result(self, reference: str) -> str:
        """The full output of a large tool result saved outside the context.

        ``reference`` is a ``deputy://tool-result/...`` reference or text containing one
        (the placeholder the model saw). Raises
        :class:`~deputy_shiny.errors.ToolResultReferenceError` for anything else: a
        malformed or forged reference, a path, another session's result.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).resolve_tool_result("deputy://tool-result/../x")
            Traceback (most recent call last):
            ...
            deputy_shiny.errors.ToolResultReferenceError: No tool result reference found: ...
        """
        return self._context.tool_results.resolve(reference)

    # ------------------------------------------------------------ sessions

    def save_session(self, path: str | os.PathLike[str]) -> Path:
        """Save the conversation to ``path`` (a JSON session file) for :meth:`load_session`.

        The file holds every turn (those compaction removed and the results
        microcompact cleared included), the system prompt and summary, copies of the
        offloaded tool results, the run context, usage, and metadata (time,
        deputy_shiny version, provider, model). Never tools, permissions, hooks,
        approvals or credentials.

        Examples:
            >>> import tempfile
            >>> from pathlib import Path
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> path = Path(tempfile.mkdtemp()) / "chat.json"
            >>> _ = Agent(ScriptedModel([])).add_turn("2+2?", "4").save_session(path)
            >>> Agent(ScriptedModel([])).load_session(path).last_turn().text
            '4'
        """
        return self._context.save_session(self, path)

    async def save_session_async(self, path: str | os.PathLike[str]) -> Path:
        """:meth:`save_session` with the file work in a worker thread."""
        return await self._context.save_session_async(self, path)

    def load_session(self, path: str | os.PathLike[str]) -> Self:
        """Load a conversation saved by :meth:`save_session` into this agent (not during a run).

        Tools, permissions, hooks and the working directory stay this agent's. The saved
        run_context is merged into the agent's (an ID field that differs is a
        :class:`~deputy_shiny.errors.SessionError`); offloaded results are restored
        under this agent's session id and ``offload_dir`` (in memory without one). A
        damaged, truncated or edited file raises
        :class:`~deputy_shiny.errors.PersistenceCorruptError`. On any error the agent
        is left exactly as it was.
        """
        self._context.load_session(self, path)
        return self

    async def load_session_async(self, path: str | os.PathLike[str]) -> Self:
        """:meth:`load_session` with the file read in a worker thread."""
        await self._context.load_session_async(self, path)
        return self
