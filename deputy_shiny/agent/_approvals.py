"""Durable approvals: the :class:`Approvals` component and the Agent methods over it.

With ``Agent(approval_dir=...)`` and no live ``approval_handler``, a call that needs
approval is saved (:mod:`deputy_shiny.persistence.approvals`) and the run stops with
``approval_pending``; :meth:`ApprovalMethods.pending_approval` and
:meth:`ApprovalMethods.resume_approval` find and decide it, in this process or in a new
one after a restart (an agent with the same ids, working dir, approval dir, tool
definitions and permission callback). :class:`Approvals` owns that state (the handler,
the directory, the pending record, the pauses already counted); the Agent holds one and
its methods are thin façades over it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from .._engine.deps import Authority, RunDeps, RunReport
from .._engine.loop import Engine
from .._engine.options import RunOptions, build_run_options
from .._util import sync as _sync
from ..approvals import ApprovalDecision, ApprovalHandler
from ..context import ContextPolicy
from ..conversation import Conversation
from ..errors import (
    ApprovalMismatchError,
    ApprovalResumeError,
    ConfigurationError,
    InvalidLimitError,
    PersistenceError,
)
from ..events import AgentEvent, AgentResult, AgentUsage
from ..permissions import Permissions
from ..persistence.approval_records import (
    StoreApprovals,
    approval_read_async,
    approval_ref_id,
)
from ..persistence.approvals import (
    ApprovalContinuation,
    ApprovalStore,
    ResumeClaim,
    approval_read,
    continues_conversation,
    find_pending,
)
from ..persistence.store import Store
from ..persistence.store_bridge import bridge_for, scope_for
from ..usage import UsageLimits
from ._guard import Guard
from ._runs import RunMethods, RunResumer
from ._tool_registry import ToolRegistry

__all__ = ["ApprovalMethods", "Approvals", "check_store"]

DecisionLike = Literal["approve", "deny"] | ApprovalDecision


class Approvals:
    """One agent's approvals: who answers an ASK live, and the calls waiting on disk.

    Args:
        handler: The live approval handler, or None.
        approval_dir: Where a paused call is saved when no handler can answer (None:
            it is not, and an ASK without a handler denies).
        store: Or the :class:`~deputy_shiny.persistence.store.Store` it is saved in
            (:mod:`deputy_shiny.persistence.approval_records`), scoped to the session.
        agent_id / session_id / working_dir / usage_limits: The agent's (fixed).
        permissions / run_context: Return the agent's current ones.
        run_deps: Returns what the agent's next run may use.
        conversation / tools / engine / guard: The agent's.
    """

    def __init__(
        self,
        handler: ApprovalHandler | None,
        approval_dir: Path | None,
        *,
        agent_id: str,
        session_id: str,
        working_dir: Path,
        usage_limits: UsageLimits,
        permissions: Callable[[], Permissions],
        run_context: Callable[[], dict[str, Any]],
        run_deps: Callable[[], RunDeps],
        conversation: Conversation,
        tools: ToolRegistry,
        engine: Engine,
        guard: Guard,
        store: Store | None = None,
    ) -> None:
        self.handler = handler
        self.approval_dir = approval_dir
        self.approval_store = store
        self._agent_id = agent_id
        self._session_id = session_id
        self._working_dir = working_dir
        self._usage_limits = usage_limits
        self._permissions = permissions
        self._run_context = run_context
        self._run_deps = run_deps
        self._conversation = conversation
        self._tools = tools
        self._engine = engine
        self._guard = guard
        self._pending_path: str | None = None  # the record the last run here saved
        # Runs whose process died: the same state machine, for a whole run.
        self.runs = RunResumer(
            store,
            agent_id=agent_id,
            session_id=session_id,
            usage_limits=usage_limits,
            run_context=run_context,
            run_deps=run_deps,
            conversation=conversation,
            engine=engine,
            guard=guard,
        )
        self._counted: set[str] = set()  # paused here: their earlier usage is counted

    @property
    def durable(self) -> bool:
        """True when calls waiting for approval are saved (in a dir or a store)."""
        return self.approval_dir is not None or self.approval_store is not None

    def store(self) -> ApprovalStore | StoreApprovals | None:
        """The store a run saves its paused call to (None without ``approval_dir`` or
        a store)."""
        if self.approval_store is not None:
            return StoreApprovals(
                store=self.approval_store,
                scope=scope_for(self._session_id),
                working_dir=self._working_dir,
                agent_id=self._agent_id,
                session_id=self._session_id,
                permissions=self._permissions(),
                budget_ceiling=self._usage_limits,
                tools=dict(self._tools.tools),
                on_suspend=self._suspended,
            )
        if self.approval_dir is None:
            return None
        return ApprovalStore(
            approval_dir=self.approval_dir,
            working_dir=self._working_dir,
            agent_id=self._agent_id,
            session_id=self._session_id,
            permissions=self._permissions(),
            budget_ceiling=self._usage_limits,
            tools=dict(self._tools.tools),
            on_suspend=self._suspended,
        )

    def _suspended(self, path: str) -> None:
        self._pending_path = path
        self._counted.add(_counted_key(path))

    def pending(self) -> ApprovalContinuation | None:
        """See :meth:`ApprovalMethods.pending_approval`."""
        store = self.approval_store
        if store is not None:
            return bridge_for(store).call_sync(self.pending_async)
        if self.approval_dir is None:
            return None
        if self._pending_path is not None:
            try:
                record = approval_read(self._pending_path)
            except PersistenceError:
                record = None
            if record is not None and record.status == "pending":
                return record
        return find_pending(self.approval_dir, self._agent_id, self._session_id)

    async def pending_async(self) -> ApprovalContinuation | None:
        """See :meth:`ApprovalMethods.pending_approval_async`."""
        backend = self.store()
        if not isinstance(backend, StoreApprovals):
            return self.pending()  # files: quick local reads, as before
        if self._pending_path is not None:
            try:
                record = await approval_read_async(self._pending_path, store=backend.store)
            except PersistenceError:
                record = None
            if record is not None and record.status == "pending":
                return record
        return await backend.find_pending()

    async def resume(
        self,
        path: str | os.PathLike[str],
        decision: DecisionLike,
        tool_input: Mapping[str, Any] | None,
        usage_limits: UsageLimits | None,
    ) -> AgentResult:
        """See :meth:`ApprovalMethods.resume_approval_async`."""
        async for _ in self.resume_events(path, decision, tool_input, usage_limits):
            pass
        return self._engine.finished_result()

    def resume_events(
        self,
        path: str | os.PathLike[str],
        decision: DecisionLike,
        tool_input: Mapping[str, Any] | None,
        usage_limits: UsageLimits | None,
    ) -> AsyncIterator[AgentEvent]:
        """See :meth:`ApprovalMethods.resume_approval_events`."""
        self._guard.ready("resume an approval")
        if not self.durable:
            raise ApprovalResumeError(
                "This agent has no approval_dir or store; create it with the approval_dir "
                "(or store) the approval was saved in."
            )
        if (approval_ref_id(path) is None) != (self.approval_store is None):
            where = "a store" if self.approval_store is not None else "an approval_dir"
            raise ApprovalResumeError(
                f"{path}: is not an approval of this agent's {where} (a store keeps "
                "deputy://approval/<id> references, an approval_dir files)."
            )
        answer = _decision(decision, tool_input)
        if usage_limits is not None and not isinstance(usage_limits, UsageLimits):
            raise InvalidLimitError(
                f"usage_limits must be a UsageLimits, not {type(usage_limits).__name__}"
            )
        return self._resumed(path, answer, usage_limits)

    async def _resumed(
        self,
        path: str | os.PathLike[str],
        answer: ApprovalDecision,
        usage_limits: UsageLimits | None,
    ) -> AsyncIterator[AgentEvent]:
        store = self.store()
        assert store is not None
        prepared: list[RunOptions] = []

        def check(record: ApprovalContinuation) -> None:
            self._check_record(record, store)
            prepared.append(self._resume_options(record, usage_limits))

        ref = str(path) if isinstance(store, StoreApprovals) else path
        claim = await store.claim(ref, answer, check)  # type: ignore[arg-type]
        try:
            options = dataclasses.replace(prepared[0], resume=claim)
            self._conversation.turns = list(claim.record.turns)
            self._pending_path = None
            saved = claim.record.permissions.permissions()
            ceiling = Authority(
                name="saved approval",
                agent_id=self._agent_id,
                permissions=lambda: saved,
                working_dir=self._working_dir,
            )
            base = self._run_deps()
            deps = dataclasses.replace(
                base,
                ancestors=(*base.ancestors, ceiling),
                report=self._resume_report(claim, base.report),
            )
        except BaseException:
            await claim.finish(None)
            raise
        try:
            async for event in self._engine.run(deps, self._conversation, options):
                yield event
        finally:
            result = self._engine.last_result
            await claim.finish(
                None if result is None else result.stop_reason, self._engine.last_error
            )

    def _resume_report(
        self, claim: ResumeClaim, record_run: Callable[[RunReport], None]
    ) -> Callable[[RunReport], None]:
        """Count the resumed run's usage once: the part before the pause is already in
        this agent's usage when the pause happened here."""
        counted = _counted_key(str(claim.path)) in self._counted
        prior = claim.prior_usage

        def report(run: RunReport) -> None:
            usage = _minus(run.usage, prior) if counted else run.usage
            record_run(dataclasses.replace(run, usage=usage))

        return report

    def _check_record(
        self, record: ApprovalContinuation, store: ApprovalStore | StoreApprovals
    ) -> None:
        """Refuse a record this agent did not save (nothing is decided then)."""
        source = record.source
        problems: list[str] = []
        if (source.agent_id, source.session_id) != (self._agent_id, self._session_id):
            problems.append(
                f"it belongs to agent {source.agent_id!r} in session {source.session_id!r}"
            )
        if Path(source.working_dir) != self._working_dir:
            problems.append(f"it was saved with working_dir {source.working_dir!r}")
        if isinstance(store, StoreApprovals):
            if source.approval_dir:
                problems.append(f"it was saved with approval_dir {source.approval_dir!r}")
        elif self.approval_dir is None or Path(source.approval_dir).resolve() != (
            self.approval_dir.resolve()
        ):
            problems.append(f"it was saved with approval_dir {source.approval_dir!r}")
        fingerprints = store.fingerprints()
        if record.tools != fingerprints:
            changed = sorted(
                name
                for name in set(record.tools) | set(fingerprints)
                if record.tools.get(name) != fingerprints.get(name)
            )
            problems.append(f"the tool definitions differ ({', '.join(changed)})")
        if record.permissions.callback and self._permissions().can_use_tool is None:
            problems.append("it was saved with a can_use_tool callback, and this agent has none")
        if not continues_conversation(record, self._conversation.turns):
            problems.append("this agent's conversation moved on since it was saved")
        if record.request.call_id not in {c.id for c in record.calls}:
            problems.append("its paused call is not among its calls")
        if problems:
            raise ApprovalMismatchError(
                f"{source.path}: cannot resume this approval here: {'; '.join(problems)}."
            )

    def _resume_options(
        self, record: ApprovalContinuation, usage_limits: UsageLimits | None
    ) -> RunOptions:
        """The resumed run's options: the paused run's limits, never looser than the
        agent's then or now; its run context."""
        ceiling = record.usage_limits.clamp_to(record.budget_ceiling).clamp_to(self._usage_limits)
        return build_run_options(
            f"(resuming the approval of {record.request.tool_name})",
            agent_limits=ceiling,
            agent_run_context=self._run_context(),
            keywords={
                "usage_limits": usage_limits,
                "run_context": record.context,
                "tool_mode": "sequential",
            },
        )


class ApprovalMethods(RunMethods):
    """An Agent's durable-approval methods, façades over its :class:`Approvals` (and its
    interrupted-run methods, :class:`~deputy_shiny.agent._runs.RunMethods`)."""

    _approvals: Approvals  # made by Agent.__init__

    @property
    def approval_dir(self) -> Path | None:
        """Where calls waiting for approval are saved (None: they are not)."""
        return self._approvals.approval_dir

    @property
    def approval_handler(self) -> Any:
        """The live approval handler, or None (then calls wait in ``approval_dir``, or
        are denied without one); read-only."""
        return self._approvals.handler

    def pending_approval(self) -> ApprovalContinuation | None:
        """The tool approval this agent is waiting on, or None.

        The one its last run saved, if still pending; else (e.g. in a new process) the
        newest pending record of this agent and session in ``approval_dir``. Its
        ``source.path`` is the path to pass to :meth:`resume_approval`.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).pending_approval() is None
            True
        """
        return self._approvals.pending()

    async def pending_approval_async(self) -> ApprovalContinuation | None:
        """:meth:`pending_approval` as a coroutine: with a ``store`` in a database, the
        event loop stays free while it is read (use this one on an event loop).

        Examples:
            >>> import asyncio
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> asyncio.run(Agent(ScriptedModel([])).pending_approval_async()) is None
            True
        """
        return await self._approvals.pending_async()

    def resume_approval(
        self,
        path: str | os.PathLike[str],
        decision: DecisionLike = "approve",
        tool_input: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
    ) -> AgentResult:
        """Decide a saved approval, then continue the run (blocking; see
        :meth:`resume_approval_async`)."""
        return _sync.run_sync(
            self.resume_approval_async(path, decision, tool_input, usage_limits),
            "resume_approval",
        )

    async def resume_approval_async(
        self,
        path: str | os.PathLike[str],
        decision: DecisionLike = "approve",
        tool_input: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
    ) -> AgentResult:
        """Approve or deny a call waiting for approval, then continue its run.

        Each approval is decided once. An approved call passes the policy again (the
        saved permission ceiling and this agent's permissions now both apply; edited
        input too) and runs once; a denial is told to the model. The paused response's
        earlier calls are not run again, and its later calls are reported "Not executed".
        The run then goes on from the saved conversation.

        Args:
            path: The record's path (the ``approval`` event's ``path``, or
                ``pending_approval().source.path``).
            decision: ``"approve"``, ``"deny"`` or an
                :class:`~deputy_shiny.approvals.ApprovalDecision`.
            tool_input: Edited arguments to run the call with (only with approve).
            usage_limits: Limits for the resumed run, clamped to the paused run's and the
                agent's (then and now); None keeps the paused run's. Usage from before
                the pause counts toward them.

        Returns:
            The resumed run's :class:`~deputy_shiny.events.AgentResult`; its usage
            includes the work before the pause.

        Raises:
            ApprovalDecidedError: decided already (or being resumed elsewhere).
            ApprovalMismatchError: this is not the agent that saved it (ids, dirs, tools,
                permission callback, or its conversation moved on); nothing is decided.
            ApprovalResumeError: no ``approval_dir``, or a bad path or decision.
            PersistenceError / PersistenceCorruptError: the record cannot be read, or was
                tampered with.
        """
        return await self._approvals.resume(path, decision, tool_input, usage_limits)

    def resume_approval_events(
        self,
        path: str | os.PathLike[str],
        decision: DecisionLike = "approve",
        tool_input: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """:meth:`resume_approval_async` as events (for a UI). The arguments are checked
        at once; the approval is decided when you start iterating: iterate to the end."""
        return self._approvals.resume_events(path, decision, tool_input, usage_limits)


def check_store(
    store: object,
    approval_dir: object,
    checkpoint_dir: object,
    policy: ContextPolicy,
) -> None:
    """A store is a Store, and takes the place of the directories (never beside them)."""
    if store is None:
        return
    if not isinstance(store, Store):
        raise ConfigurationError(
            f"store must be a deputy_shiny.persistence.Store, not {type(store).__name__}"
        )
    given = [
        name
        for name, value in (
            ("approval_dir", approval_dir),
            ("checkpoint_dir", checkpoint_dir),
            ("offload_dir", policy.offload_dir),
        )
        if value is not None
    ]
    if given:
        raise ConfigurationError(
            f"store keeps what {', '.join(given)} would: give the store or the directories"
        )


def _counted_key(path: str) -> str:
    """What identifies a pause this agent counted: a store reference, or the resolved path."""
    return path if approval_ref_id(path) is not None else str(Path(path).resolve())


def _decision(decision: DecisionLike, tool_input: Mapping[str, Any] | None) -> ApprovalDecision:
    if tool_input is not None and not isinstance(tool_input, Mapping):
        raise ApprovalResumeError("tool_input must be a dict of the tool's arguments")
    if isinstance(decision, ApprovalDecision):
        if tool_input is not None:
            if not decision.approved:
                raise ApprovalResumeError("tool_input is only allowed with an approval")
            return decision.model_copy(update={"updated_input": dict(tool_input)})
        return decision
    if decision == "approve":
        return ApprovalDecision.approve(None if tool_input is None else dict(tool_input))
    if decision == "deny":
        if tool_input is not None:
            raise ApprovalResumeError("tool_input is only allowed with an approval")
        return ApprovalDecision.deny()
    raise ApprovalResumeError(
        f'decision must be "approve", "deny" or an ApprovalDecision, not {decision!r}'
    )


def _minus(total: AgentUsage, part: AgentUsage) -> AgentUsage:
    missing = max(0, total.cost_missing - part.cost_missing)
    cost = None if missing or total.cost is None else total.cost - (part.cost or 0.0)
    return AgentUsage(
        requests=max(0, total.requests - part.requests),
        tool_calls=max(0, total.tool_calls - part.tool_calls),
        input_tokens=max(0, total.input_tokens - part.input_tokens),
        output_tokens=max(0, total.output_tokens - part.output_tokens),
        cost=cost,
        cost_missing=missing,
    )
