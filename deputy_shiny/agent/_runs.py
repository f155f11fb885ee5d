"""Interrupted runs: the :class:`RunResumer` component and the Agent methods over it.

With ``Agent(store=...)`` every run is journaled step by step
(:mod:`deputy_shiny.persistence.run_journal`). When the process serving a run dies, the
run's lease lapses and the run reads ``interrupted``; an agent with the same ids and
store, in any process, finds it (:meth:`RunMethods.interrupted_run`) and resumes it from
its last journaled step (:meth:`RunMethods.resume_run`). The component belongs to the
agent's :class:`~deputy_shiny.agent._approvals.Approvals`: one state machine for a call
waiting for a person and for a run whose process died.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from .._engine.deps import RunDeps
from .._engine.journal import Replay
from .._engine.loop import Engine
from .._engine.options import build_run_options
from .._util import sync as _sync
from ..conversation import Conversation
from ..errors import RunResumeError
from ..events import AgentEvent, AgentResult
from ..persistence.run_journal import InterruptedRun, RunClaim, StoreRunJournals
from ..persistence.store import Store
from ..persistence.store_bridge import scope_for
from ..usage import UsageLimits
from ._guard import Guard

__all__ = ["RunMethods", "RunResumer"]


class RunResumer:
    """One agent's journaled runs: the journal each run writes, and resuming one.

    Args:
        store: The agent's store (None: runs are not journaled).
        agent_id / session_id / usage_limits: The agent's (fixed).
        run_context: Returns the agent's current run context.
        run_deps: Returns what the agent's next run may use.
        conversation / engine / guard: The agent's.
    """

    def __init__(
        self,
        store: Store | None,
        *,
        agent_id: str,
        session_id: str,
        usage_limits: UsageLimits,
        run_context: Callable[[], dict[str, Any]],
        run_deps: Callable[[], RunDeps],
        conversation: Conversation,
        engine: Engine,
        guard: Guard,
    ) -> None:
        self._journals = (
            None
            if store is None
            else StoreRunJournals(
                store, scope_for(session_id), agent_id=agent_id, session_id=session_id
            )
        )
        self._usage_limits = usage_limits
        self._run_context = run_context
        self._run_deps = run_deps
        self._conversation = conversation
        self._engine = engine
        self._guard = guard

    def opener(self) -> StoreRunJournals | None:
        """What opens each run's journal (None: no store)."""
        return self._journals

    async def interrupted(self, include_held: bool = False) -> InterruptedRun | None:
        """See :meth:`RunMethods.interrupted_run_async`."""
        if self._journals is None:
            return None
        runs = await self._journals.interrupted(include_held=include_held)
        return runs[-1] if runs else None

    async def resume(self, run_id: str | None, usage_limits: UsageLimits | None) -> AgentResult:
        """See :meth:`RunMethods.resume_run_async`."""
        async for _ in self.resume_events(run_id, usage_limits):
            pass
        return self._engine.finished_result()

    async def resume_events(
        self, run_id: str | None, usage_limits: UsageLimits | None
    ) -> AsyncIterator[AgentEvent]:
        """See :meth:`RunMethods.resume_run_events`."""
        self._guard.ready("resume a run")
        journals = self._journals
        if journals is None:
            raise RunResumeError("This agent has no store: its runs are not journaled.")
        if run_id is None:
            newest = await self.interrupted()
            if newest is None:
                raise RunResumeError("This agent has no interrupted run in its session.")
            run_id = newest.run_id
        claim = await journals.claim(run_id)
        try:
            self._check(claim)
            options = build_run_options(
                claim.task or "(resuming an interrupted run)",
                agent_limits=claim.limits.clamp_to(self._usage_limits),
                agent_run_context=self._run_context(),
                keywords={"usage_limits": usage_limits, "run_context": claim.run_context},
            )
            journal = await claim.continue_run()
        except BaseException:
            await claim.release()
            raise
        self._conversation.turns = list(claim.turns)
        self._conversation.restore_view_state(claim.compaction)
        options = dataclasses.replace(options, replay=_replay(claim, journal))
        async for event in self._engine.run(self._run_deps(), self._conversation, options):
            yield event

    def _check(self, claim: RunClaim) -> None:
        """Refuse to resume over a conversation that moved on since the run started."""
        turns = self._conversation.turns
        if turns and turns != claim.base_turns and turns != claim.turns:
            raise RunResumeError(
                f"run {claim.run_id}: this agent's conversation moved on since the run started."
            )


def _replay(claim: RunClaim, journal: Any) -> Replay:
    return Replay(
        run_id=claim.run_id,
        journal=journal,
        prior_usage=claim.prior_usage,
        turn_number=claim.turn_number,
        results=claim.results,
        started=claim.started,
        allowed=claim.allowed,
    )


class _HoldsRuns(Protocol):
    runs: RunResumer


class RunMethods:
    """An Agent's interrupted-run methods, façades over its :class:`RunResumer`."""

    _approvals: _HoldsRuns  # the agent's Approvals (made by Agent.__init__)

    def interrupted_run(self, *, include_held: bool = False) -> InterruptedRun | None:
        """The newest run of this agent and session whose process died before it ended, or
        None (blocking; see :meth:`interrupted_run_async`).

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).interrupted_run() is None
            True
        """
        return _sync.run_sync(
            self.interrupted_run_async(include_held=include_held), "interrupted_run"
        )

    async def interrupted_run_async(self, *, include_held: bool = False) -> InterruptedRun | None:
        """The newest interrupted run of this agent and session in its ``store``, or None.

        A run is interrupted when its process died (its lease lapsed) before it ended; a
        run a person stopped, one that failed, or one waiting for an approval is not.
        ``include_held=True`` also returns a run whose lease is still held (``held``):
        just after a crash its lease has not lapsed yet, so a UI can show the run and
        ask again until ``held`` is False (then resume it), or until it is gone (its
        process was alive and ended it).

        Examples:
            >>> import asyncio
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> asyncio.run(Agent(ScriptedModel([])).interrupted_run_async()) is None
            True
        """
        return await self._approvals.runs.interrupted(include_held)

    def resume_run(
        self, run_id: str | None = None, usage_limits: UsageLimits | None = None
    ) -> AgentResult:
        """Resume an interrupted run (blocking; see :meth:`resume_run_async`)."""
        return _sync.run_sync(self.resume_run_async(run_id, usage_limits), "resume_run")

    async def resume_run_async(
        self, run_id: str | None = None, usage_limits: UsageLimits | None = None
    ) -> AgentResult:
        """Resume an interrupted run from its last journaled step; its result.

        Completed tool calls are replayed from the journal, never run again. A call that
        was running when the process died gets the result "Interrupted: ... may or may
        not have taken effect", which the model sees, unless its tool is idempotent
        (``tool_annotations(idempotent_hint=True)``): then it runs again. A response cut
        off mid-stream is asked for again. The run keeps its id, usage and limits.

        Args:
            run_id: Which run (None: the newest interrupted one).
            usage_limits: Limits for the rest of the run, clamped to the run's and the
                agent's; its usage before the crash counts toward them.

        Raises:
            RunResumeError: no store, no such interrupted run, another process holds it,
                it waits for an approval, or the conversation moved on; nothing resumed.

        Examples:
            >>> import tempfile
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.errors import RunResumeError
            >>> from deputy_shiny.persistence import FileStore
            >>> from deputy_shiny.testing import ScriptedModel
            >>> store = FileStore(tempfile.mkdtemp(), key=b"a key only this server holds")
            >>> agent = Agent(ScriptedModel(["Done."]), store=store, session_id="conv1")
            >>> agent.run_sync("Go").response
            'Done.'
            >>> try:
            ...     agent.resume_run()
            ... except RunResumeError as exc:
            ...     print(exc)
            This agent has no interrupted run in its session.
        """
        return await self._approvals.runs.resume(run_id, usage_limits)

    def resume_run_events(
        self, run_id: str | None = None, usage_limits: UsageLimits | None = None
    ) -> AsyncIterator[AgentEvent]:
        """:meth:`resume_run_async` as events (for a UI): iterate to the end."""
        return self._approvals.runs.resume_events(run_id, usage_limits)
