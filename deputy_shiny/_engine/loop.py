"""The governed run loop: request -> tool calls -> limits -> events.

Every public run method of :class:`~deputy_shiny.agent.Agent` is an adapter over
:meth:`Engine.run`, an async generator of events. The engine reads what a run may use
from a :class:`~deputy_shiny._engine.deps.RunDeps` and writes turns to a
:class:`~deputy_shiny.conversation.Conversation`; it never reads the Agent. One run:

1. ``start``; the user's turn joins the conversation.
2. Before each request the limits are checked; the request streams through
   ``litellm.acompletion``; text and tool calls are assembled chunk by chunk (no
   ``stream_chunk_builder``, which would cost as much as litellm itself per chunk).
   Every attempt counts as a request. A transient failure before the attempt's first
   chunk is retried on the same model (``ChatModel.retries``, a ``retry`` event each);
   then, before any chunk or tool call of the run, it moves the agent to its next
   fallback model.
3. After the response: token and cost limits; then its tool calls are handled
   (unknown tool, bad arguments, callbacks, execution, loop detection), and their
   results form the next user turn.
4. Until the model answers without tool calls; then optional structured output.
5. ``usage`` and ``stop``, always last, whatever happened; the conversation is left
   consistent (no tool request without a result), even if the consumer walks away.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from functools import partial
from typing import Any

from .._util import log_context
from .._util.interrupt import Interrupted, Interrupter
from ..context import CompactionRecord
from ..conversation import Conversation
from ..errors import (
    AgentBusyError,
    AgentRunError,
    CompactionError,
    ContextPolicyError,
    DeputyError,
    ProviderError,
    StructuredOutputError,
    UsageLimitExceeded,
)
from ..events import (
    LIMIT_STOP_REASONS,
    AgentEvent,
    AgentResult,
    CompactionErrorEvent,
    CompactionEvent,
    CostSummary,
    FileCheckpointEvent,
    RunErrorEvent,
    StartEvent,
    StopEvent,
    StructuredAttemptEvent,
    TextEvent,
    UsageEvent,
)
from ..hooks import HookContext
from ..messages import (
    ContentText,
    Turn,
)
from ..models._provider import (
    ProviderFailed,
    Response,
)
from ..persistence.checkpoints import USER_TURN_KEY
from ..usage import UsageLimits
from .budget import Meter, SharedBudget, _RequestRefused
from .compaction import CompactionServices, Compactor
from .deps import RunDeps, RunReport
from .gate import ToolGate
from .journal import end_journal, open_journal
from .notices import cost_nearing, limit_notice, warn
from .observer import observer_factory
from .options import RunOptions
from .request import Requests, _LimitStop
from .request import _messages_for as _messages_for  # re-exported: defined here before
from .request import _sleep as _sleep
from .request import _wake as _wake
from .state import (
    TEXT_FIELDS,
    RunState,
)
from .structured import (
    check_structured,
    correction_prompt,
    json_format,
    structured_prompt,
)
from .tool_calls import ToolCalls

logger = logging.getLogger(__name__)


class Engine(Requests, ToolCalls):
    """Runs one task at a time for its owner. Private: use :class:`~deputy_shiny.agent.Agent`.

    It holds only what outlives a run: the interrupter, whether a run is active, and
    the last result and error.
    """

    def __init__(self) -> None:
        self.interrupter = Interrupter()
        self.running = False
        self.last_result: AgentResult | None = None
        self._last_error: BaseException | None = None

    # ---------------------------------------------------------------- events

    @staticmethod
    def _emit_after_run(
        deps: RunDeps, run_id: str, run_context: Any, cls: type[Any], **fields: Any
    ) -> Any:
        """An event of a run that has ended (nobody records it any more)."""
        return cls.model_construct(
            agent_id=deps.agent_id,
            session_id=deps.session_id,
            run_id=run_id,
            run_context=run_context,
            timestamp=time.time(),
            **deps.event_lineage,
            **fields,
        )

    def _emit(self, st: RunState, cls: type[Any], **fields: Any) -> Any:
        # model_construct: these values come from the engine itself, and validating
        # every streamed chunk's event would cost more than the rest of the chunk path.
        event = cls.model_construct(
            agent_id=st.deps.agent_id,
            session_id=st.deps.session_id,
            run_id=st.run_id,
            run_context=st.options.run_context,
            timestamp=time.time(),
            **st.deps.event_lineage,
            **fields,
        )
        st.events.append(event)
        if st.observer is not None:
            st.observer.on_event(event)
        return event

    def _text_event(self, st: RunState, text: str) -> TextEvent:
        """A ``text`` event, built directly: the hot path runs once per streamed chunk.

        Equivalent to ``TextEvent.model_construct(...)`` at a third of its cost (it
        skips pydantic's per-call class lookups); the fields are the engine's own.
        """
        event = object.__new__(TextEvent)
        object.__setattr__(
            event,
            "__dict__",
            {
                "agent_id": st.deps.agent_id,
                "session_id": st.deps.session_id,
                "run_id": st.run_id,
                "run_context": st.options.run_context,
                "timestamp": time.time(),
                **st.deps.event_lineage,
                "type": "text",
                "text": text,
            },
        )
        object.__setattr__(event, "__pydantic_fields_set__", set(TEXT_FIELDS))
        object.__setattr__(event, "__pydantic_extra__", None)
        object.__setattr__(event, "__pydantic_private__", None)
        st.events.append(event)
        return event

    # ---------------------------------------------------------------- the run

    async def run(
        self, deps: RunDeps, conversation: Conversation, options: RunOptions
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run one task, yielding events; ``self.last_result`` holds the result after.

        ``deps.report`` gets the run's usage and final model when it ends.
        """
        if self.running:
            raise AgentBusyError(
                "This agent is already running a task; wait for it to finish or interrupt() it."
            )
        self.running = True
        self.interrupter.arm()
        replay = options.replay
        st = RunState(
            run_id=f"run_{uuid.uuid4().hex}" if replay is None else replay.run_id,
            options=options,
            deps=deps,
            conversation=conversation,
            model=deps.model,
        )
        st.meter = Meter(options.limits, _run_budget(deps, options.limits))
        st.gate = ToolGate(
            deps,
            conversation,
            run_id=st.run_id,
            run_context=options.run_context,
            emit=partial(self._emit, st),
            guard=self.interrupter.guard,
            usage=st.meter.usage,
            limits=options.limits,
        )
        factory = observer_factory()
        if factory is not None:  # tracing on (instrument()): nests under the current span
            st.observer = factory(deps, st.run_id)
        # Every log record of the run can carry its ids (log_context.RunLogFilter).
        ids = log_context.run_ids.set(log_context.RunIds(st.run_id, deps.session_id, deps.agent_id))
        finished = False
        try:
            yield self._emit(st, StartEvent, task=options.prompt.text)
            st.journal, journal_failed = await open_journal(
                deps.journal,
                replay,
                delegated=deps.lineage is not None or deps.parent_budget is not None,
                run_id=st.run_id,
                conversation=conversation,
                run_context=options.run_context,
                limits=options.limits,
            )
            if options.resume is None and replay is None:
                self._add_turn(st, options.prompt)
            try:
                if journal_failed is not None:  # it runs, but could not be resumed
                    for event in await self._unjournaled(st, journal_failed):
                        yield event
                if deps.file_journal is not None:  # rewind_files() goes back to here
                    yield await self._file_checkpoint(st, deps.file_journal)
                # As in deputy: SessionStart as each run starts, SessionEnd as it ends.
                for event in await self._observe_hooks(st, "SessionStart"):
                    yield event
                async for event in self._begin(st):
                    yield event
                if st.stop_reason is None:
                    async for event in self._loop(st):
                        yield event
            except Interrupted as stop:
                st.stop(stop.reason, "The run was interrupted.")
            except _LimitStop:
                pass  # the run's stop reason is the limit's
            except _RequestRefused as refused:  # the host's budget: nothing was sent
                st.stop("budget_limit", str(refused))
            except ProviderFailed as failed:
                st.error = failed.error
                st.stop("provider_error", str(failed.error))
            except Exception as exc:  # an engine-level failure must still end the run cleanly
                st.error = exc
                message = (
                    str(exc) if isinstance(exc, DeputyError) else f"{type(exc).__name__}: {exc}"
                )
                if not isinstance(exc, DeputyError):
                    logger.exception("deputy_shiny run %s failed", st.run_id)
                yield self._emit(st, RunErrorEvent, error=message)
                st.stop("error", message)
            self._make_consistent(st)
            st.stop("complete")
            for event in await limit_notice(st):  # a limit or provider ended it: Notification
                yield event
            for event in await self._observe_hooks(st, "Stop", reason=st.stop_reason):
                yield event
            for event in await self._observe_hooks(st, "SessionEnd", reason=st.stop_reason):
                yield event
            await end_journal(st.journal, st.stop_reason)
            yield self._emit(st, UsageEvent, usage=st.usage())
            yield self._emit(st, StopEvent, stop_reason=st.stop_reason, message=st.stop_message)
            finished = True
        finally:
            # Also reached when the consumer closes or cancels us mid-run: no awaits here.
            if not finished:
                st.stop(self.interrupter.reason or "interrupted", "The run was abandoned.")
                self._make_consistent(st)
                if st.journal is not None:
                    st.journal.abandon(st.stop_reason or "interrupted")
            self.interrupter.disarm()
            self.last_result = self._result(st)
            self._last_error = st.error
            self.running = False
            deps.report(RunReport(st.usage(), st.model, st.fallbacks_used))
            if st.observer is not None:
                st.observer.finish(self.last_result, st.error)
            _reset(log_context.run_ids, ids)
            # The gate's emit held the run's state, which holds the gate: a cycle only a
            # full garbage collection frees, keeping the agent (through deps) with it. A
            # late emit (a tool's thread still finishing) gets its event, unrecorded.
            st.gate.emit = partial(self._emit_after_run, st.deps, st.run_id, options.run_context)
        if st.stop_reason in LIMIT_STOP_REASONS and options.limits.on_exceed == "error":
            raise UsageLimitExceeded(
                f"Usage limit reached ({st.stop_reason}): {st.stop_message}",
                stop_reason=st.stop_reason,
                result=self.last_result,
            )

    async def _begin(self, st: RunState) -> AsyncIterator[AgentEvent]:
        """The run's first step: a durable approval's decision applied, a journaled run
        replayed, or the user's prompt submitted (its hooks)."""
        options = st.options
        if options.resume is not None:
            async for event in self._resume(st, options.resume):
                yield event
        elif options.replay is not None:
            async for event in self._replay(st, options.replay):
                yield event
        else:
            for event in await self._observe_hooks(
                st, "UserPromptSubmit", prompt=options.prompt.text
            ):
                yield event

    async def _unjournaled(self, st: RunState, error: Exception) -> list[AgentEvent]:
        """The warning of a run whose journal could not be opened."""
        return await warn(
            st,
            partial(self._emit, st),
            "journal_unavailable",
            "This run is not journaled (the store is unavailable): if its process stops, "
            "the run cannot be resumed.",
            details=str(error),
        )

    async def _file_checkpoint(self, st: RunState, journal: Any) -> AgentEvent:
        """The checkpoint every run makes as it starts (file checkpointing on). A run
        with a new prompt names the prompt's turn (``metadata["user_turn"]``, its index in
        the conversation): editing that message later rewinds the files to here."""
        metadata = None
        if st.options.resume is None:
            metadata = {USER_TURN_KEY: len(st.conversation.turns) - 1}
        made = await asyncio.to_thread(journal.checkpoint, metadata=metadata, run_id=st.run_id)
        event: AgentEvent = self._emit(
            st, FileCheckpointEvent, checkpoint_id=made.id, name=made.name
        )
        return event

    async def _observe_hooks(self, st: RunState, event: str, **extra: Any) -> list[AgentEvent]:
        """Run hooks that only observe (their failures are recorded, never fatal)."""
        hooks = st.deps.hooks
        if not hooks.matchers(event):
            return []
        run = await hooks.run(
            event,
            context=st.gate.hook_context(event, **extra),
        )
        if run.failure is not None:
            logger.warning("%s hook failed: %s", event, run.failure)
        return st.gate.hook_events(event, run)

    async def _loop(self, st: RunState) -> AsyncIterator[AgentEvent]:
        while True:
            if st.journal is not None:  # tools' results are in the store before it goes on
                await st.journal.flush()
            async for event in self._compact_if_needed(st):
                yield event
            if self._limit_before_request(st):
                return
            response = Response()
            async for event in self._request(st, response, tools=list(st.deps.tool_schemas)):
                yield event
            turn = self._finish_response(st, response)
            async for event in self._after_request_events(st, turn):
                yield event
            if self._limit_after_request(st):
                return
            for event in await cost_nearing(st, partial(self._emit, st)):
                yield event
            if not turn.tool_requests:
                if st.options.output_type is not None:
                    async for event in self._structured(st):
                        yield event
                return
            async for event in self._run_tools(st, turn.tool_requests):
                yield event
            if st.stop_reason is not None:
                return

    async def _compact_if_needed(self, st: RunState) -> AsyncIterator[AgentEvent]:
        """Automatic compaction before a request (the policy decides, in _compaction.py);
        a summary request counts toward the run's usage and limits."""
        runtime = st.deps.context
        if runtime is None:
            return
        async for event in runtime.compact_if_needed(
            st.conversation,
            st.model,
            st.deps.hooks,
            st.deps.tool_schemas,
            CompactionServices(
                hook_context=st.gate.hook_context,
                charge=st.meter.charge_summary,
                may_request=st.meter.may_request,
                admit=st.meter.admit,
                emit=partial(self._emit, st),
                hook_events=st.gate.hook_events,
                guard=self.interrupter.guard,
            ),
        ):
            yield event
            if isinstance(event, CompactionEvent | CompactionErrorEvent):
                st.record("compaction", st.conversation.view_state())
            if isinstance(event, CompactionErrorEvent) and event.fallback == "text":
                # Survived: the run goes on with a plain digest of what was removed.
                for warning in await warn(
                    st,
                    partial(self._emit, st),
                    "compact_fallback",
                    "The conversation was compacted to a plain digest: the summary failed.",
                    details=event.error,
                    error=event.error,
                ):
                    yield warning

    async def compact(
        self,
        deps: RunDeps,
        conversation: Conversation,
        *,
        limits: UsageLimits,
        run_context: dict[str, Any],
        keep_last: int | None,
        summary: str | None,
        fallback: str | None,
    ) -> CompactionRecord | None:
        """A compaction outside a run (``agent.compact()``): its summary requests are
        charged, limited by ``limits`` (the agent's, as for a run) and reported through
        ``deps.report``, as an automatic compaction's are within a run. No events.

        It holds the agent as a run does: a run started meanwhile is refused
        (:class:`~deputy_shiny.errors.AgentBusyError`) rather than racing it for the
        conversation.
        """
        runtime = deps.context
        if runtime is None:
            raise ContextPolicyError("There is no context policy to compact with.")
        if self.running:
            raise AgentBusyError("Cannot compact the conversation while the agent is running.")
        meter = Meter(limits, _run_budget(deps, limits))

        def hook_context(event: str, **extra: Any) -> HookContext:
            return HookContext(
                event=event,
                run_context=run_context,
                total_turns=len(conversation.turns),
                **{**deps.hook_fields(), **extra},
            )

        compactor = Compactor(
            conversation,
            runtime.policy,
            deps.model,
            deps.hooks,
            CompactionServices(
                hook_context=hook_context,
                charge=meter.charge_summary,
                may_request=meter.may_request,
                admit=meter.admit,
            ),
            tool_schemas=deps.tool_schemas,
        )
        self.running = True
        try:
            async for _ in compactor.run(keep_last=keep_last, summary=summary, fallback=fallback):
                pass
        except _RequestRefused as refused:
            raise CompactionError(
                f"The summary was not requested: {refused} The conversation is unchanged."
            ) from None
        finally:
            self.running = False
            deps.report(RunReport(meter.usage(), deps.model, 0))
        return compactor.record

    def _add_turn(self, st: RunState, turn: Turn) -> None:
        st.conversation.append(turn)
        st.turns.append(turn)
        st.record("turn", {"turn": turn.model_dump(mode="json")})

    # ---------------------------------------------------------------- limits

    def _limit_before_request(self, st: RunState) -> bool:
        # The run's budget also counts the runs it delegated to: they spend its limits
        # (and a delegated run's lead budgets stop it too).
        spent = st.meter.stop_before_request()
        if spent is not None:
            st.stop(*spent)
        return spent is not None

    def _limit_after_request(self, st: RunState) -> bool:
        reached = st.meter.stop_after_request()
        if reached is not None:
            st.stop(*reached)
        return reached is not None

    # ---------------------------------------------------------------- structured output

    async def _structured(self, st: RunState) -> AsyncIterator[AgentEvent]:
        options = st.options
        adapter = options.output_type
        assert adapter is not None
        schema = adapter.json_schema()
        prompt = structured_prompt(schema)
        attempt = 0
        while True:
            attempt += 1
            self._add_turn(st, Turn(role="user", contents=[ContentText(text=prompt)]))
            if self._limit_before_request(st):
                return
            response = Response()
            async for event in self._request(st, response, tools=[], extra=json_format(schema)):
                yield event
            turn = self._finish_response(st, response)
            async for event in self._after_request_events(st, turn):
                yield event
            if turn.tool_requests:
                st.pending_calls = list(turn.tool_requests)
                self._add_results_turn(st, "tools are not available now; reply with the JSON only")
            if self._limit_after_request(st):
                return
            accepted, value, message = check_structured(adapter, turn, options.validate)
            yield self._emit(
                st, StructuredAttemptEvent, attempt=attempt, accepted=accepted, message=message
            )
            if accepted:
                st.structured_output = value
                return
            if attempt > options.max_corrections:
                raise StructuredOutputError(
                    f"Structured output was rejected after {attempt} attempt(s): {message}"
                )
            prompt = correction_prompt(message)

    # ---------------------------------------------------------------- result

    def _result(self, st: RunState) -> AgentResult:
        usage = st.usage()
        lineage = st.deps.lineage  # a delegated run's result names who delegated it
        return AgentResult.model_construct(
            response=st.response_text,
            turns=list(st.turns),
            events=list(st.events),
            usage=usage,
            cost=CostSummary.of(usage),
            duration=time.monotonic() - st.started,
            stop_reason=st.stop_reason or "interrupted",
            stop_message=st.stop_message,
            structured_output=st.structured_output,
            agent_id=st.deps.agent_id,
            agent_name=st.deps.agent_name,
            session_id=st.deps.session_id,
            run_id=st.run_id,
            run_context=st.options.run_context,
            parent_agent_id=lineage.parent_agent_id if lineage else None,
            parent_run_id=lineage.parent_run_id if lineage else None,
            delegation_id=lineage.delegation_id if lineage else None,
        )

    def finished_result(self) -> AgentResult:
        """The last result, raising the error that ended the run, if any."""
        result = self.last_result
        if result is None:  # pragma: no cover - a run always records one
            raise AgentRunError("The run ended without a result")
        error = self._last_error
        if error is None:
            return result
        if isinstance(error, ProviderError | StructuredOutputError | AgentRunError):
            error.result = result
            raise error
        raise AgentRunError(f"The run failed: {error}", result=result, cause=error) from error

    @property
    def last_error(self) -> BaseException | None:
        """The error that ended the last run (provider or engine failure), if any."""
        return self._last_error


def _reset(var: contextvars.ContextVar[Any], token: contextvars.Token[Any]) -> None:
    """Reset a context variable the run set as it started, if it still can: a run that
    is closed by the event loop's generator finalizer ends in another context."""
    with contextlib.suppress(ValueError):
        var.reset(token)


def _run_budget(deps: RunDeps, limits: UsageLimits) -> SharedBudget:
    """A run's budget: its limits, drawing on the budget of the run that delegated it."""
    return SharedBudget(limits, parent=deps.parent_budget, label=deps.agent_name or "lead agent")
