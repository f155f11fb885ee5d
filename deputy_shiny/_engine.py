"""The governed run loop: request -> tool calls -> limits -> events.

Every public run method of :class:`~deputy_shiny.agent.Agent` is an adapter over
:meth:`Engine.run`, an async generator of events. The engine reads what a run may use
from a :class:`~deputy_shiny._run_deps.RunDeps` and writes turns to a
:class:`~deputy_shiny.conversation.Conversation`; it never reads the Agent. One run:

1. ``start``; the user's turn joins the conversation.
2. Before each request the limits are checked; the request streams through
   ``litellm.acompletion``; text and tool calls are assembled chunk by chunk (no
   ``stream_chunk_builder``, which would cost as much as litellm itself per chunk).
   A transient failure before any chunk or tool call of the run moves the agent to
   its next fallback model.
3. After the response: token and cost limits; then its tool calls are handled
   (unknown tool, bad arguments, callbacks, execution, loop detection), and their
   results form the next user turn.
4. Until the model answers without tool calls; then optional structured output.
5. ``usage`` and ``stop``, always last, whatever happened; the conversation is left
   consistent (no tool request without a result), even if the consumer walks away.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pydantic_core import to_jsonable_python

from ._budget import SharedBudget, current_budget
from ._durable import NOT_EXECUTED, Resumption, Suspension
from ._interrupt import Interrupted, Interrupter
from ._provider import (
    ProviderFailed,
    Response,
    estimate_prompt_tokens,
    known_cost,
    stream_response,
)
from ._run_deps import RunDeps, RunReport
from ._run_options import RunOptions
from ._structured import (
    check_structured,
    correction_prompt,
    json_format,
    structured_prompt,
)
from ._tool_gate import ToolGate, Verdict
from .approvals import ApprovalRequest
from .conversation import Conversation
from .errors import (
    AgentBusyError,
    AgentRunError,
    DeputyError,
    ProviderError,
    StructuredOutputError,
    ToolArgumentsError,
    ToolInvocationError,
    ToolRejectedError,
    UsageLimitExceeded,
)
from .events import (
    LIMIT_STOP_REASONS,
    AgentEvent,
    AgentResult,
    AgentUsage,
    ApprovalEvent,
    CostSummary,
    FallbackEvent,
    FileCheckpointEvent,
    RequestEndEvent,
    RequestErrorEvent,
    RequestStartEvent,
    RequestUsage,
    RunErrorEvent,
    StartEvent,
    StopEvent,
    StructuredAttemptEvent,
    TextCompleteEvent,
    TextEvent,
    ToolEndEvent,
    ToolStartEvent,
    TrustedResultEvent,
    UsageEvent,
)
from .hooks import HookRun
from .messages import (
    Content,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    Turn,
    TurnUsage,
)
from .models import ChatModel
from .tools import Tool, format_tool_output, tool_context
from .usage import limit_reached

logger = logging.getLogger(__name__)


_NOT_RUN = "Tool call not run: {why}."
_TEXT_FIELDS = frozenset(
    {"agent_id", "session_id", "run_id", "run_context", "timestamp", "type", "text"}
)
_LOOP_REPEATS = 3


@dataclass
class _Outcome:
    """A finished tool call: its result and what the after-call hooks did."""

    result: ContentToolResult
    duration: float = 0.0
    hook_run: HookRun | None = None
    hook_event: str = "PostToolUse"
    stop: str | None = None
    events: list[AgentEvent] = field(default_factory=list)  # e.g. a trusted_result


_Ready = tuple[ContentToolRequest, Tool, dict[str, Any], "Verdict"]


@dataclass
class _RunState:
    run_id: str
    options: RunOptions
    deps: RunDeps
    conversation: Conversation
    model: ChatModel
    gate: ToolGate = field(init=False)
    budget: SharedBudget = field(init=False)  # shared with the runs it delegates to
    fallbacks_used: int = 0
    started: float = field(default_factory=time.monotonic)
    events: list[AgentEvent] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    requests: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cost_missing: int = 0
    progressed: bool = False  # a chunk arrived or a tool ran: fallbacks no longer apply
    stop_reason: str | None = None
    stop_message: str = ""
    error: BaseException | None = None
    response_text: str = ""
    structured_output: Any = None
    partial: Response | None = None
    pending_calls: list[ContentToolRequest] = field(default_factory=list)
    results: dict[str, ContentToolResult] = field(default_factory=dict)
    loop_counts: Counter[str] = field(default_factory=Counter)
    hook_stop: str | None = None

    def usage(self) -> AgentUsage:
        return AgentUsage(
            requests=self.requests,
            tool_calls=self.tool_calls,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost=None if self.cost_missing else self.cost,
            cost_missing=self.cost_missing,
        )

    def stop(self, reason: str, message: str = "") -> None:
        if self.stop_reason is None:
            self.stop_reason, self.stop_message = reason, message


class Engine:
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

    def _emit(self, st: _RunState, cls: type[Any], **fields: Any) -> Any:
        # model_construct: these values come from the engine itself, and validating
        # every streamed chunk's event would cost more than the rest of the chunk path.
        event = cls.model_construct(
            agent_id=st.deps.agent_id,
            session_id=st.deps.session_id,
            run_id=st.run_id,
            run_context=st.options.run_context,
            timestamp=time.time(),
            **fields,
        )
        st.events.append(event)
        return event

    def _text_event(self, st: _RunState, text: str) -> TextEvent:
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
                "type": "text",
                "text": text,
            },
        )
        object.__setattr__(event, "__pydantic_fields_set__", set(_TEXT_FIELDS))
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
        st = _RunState(
            run_id=f"run_{uuid.uuid4().hex}",
            options=options,
            deps=deps,
            conversation=conversation,
            model=deps.model,
        )
        st.budget = SharedBudget(
            options.limits, parent=deps.parent_budget, label=deps.agent_name or "lead agent"
        )
        st.gate = ToolGate(
            deps,
            conversation,
            run_id=st.run_id,
            run_context=options.run_context,
            emit=partial(self._emit, st),
            guard=self.interrupter.guard,
        )
        finished = False
        try:
            yield self._emit(st, StartEvent, task=options.prompt.text)
            if options.resume is None:
                self._add_turn(st, options.prompt)
            try:
                if deps.file_journal is not None:  # rewind_files() goes back to here
                    yield await self._file_checkpoint(st, deps.file_journal)
                # As in deputy: SessionStart as each run starts, SessionEnd as it ends.
                for event in await self._observe_hooks(st, "SessionStart"):
                    yield event
                if options.resume is None:
                    for event in await self._observe_hooks(
                        st, "UserPromptSubmit", prompt=options.prompt.text
                    ):
                        yield event
                else:
                    async for event in self._resume(st, options.resume):
                        yield event
                if st.stop_reason is None:
                    async for event in self._loop(st):
                        yield event
            except Interrupted as stop:
                st.stop(stop.reason, "The run was interrupted.")
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
            for event in await self._observe_hooks(st, "Stop", reason=st.stop_reason):
                yield event
            for event in await self._observe_hooks(st, "SessionEnd", reason=st.stop_reason):
                yield event
            yield self._emit(st, UsageEvent, usage=st.usage())
            yield self._emit(st, StopEvent, stop_reason=st.stop_reason, message=st.stop_message)
            finished = True
        finally:
            # Also reached when the consumer closes or cancels us mid-run: no awaits here.
            if not finished:
                st.stop(self.interrupter.reason or "interrupted", "The run was abandoned.")
                self._make_consistent(st)
            self.interrupter.disarm()
            self.last_result = self._result(st)
            self._last_error = st.error
            self.running = False
            deps.report(RunReport(st.usage(), st.model, st.fallbacks_used))
        if st.stop_reason in LIMIT_STOP_REASONS and options.limits.on_exceed == "error":
            raise UsageLimitExceeded(
                f"Usage limit reached ({st.stop_reason}): {st.stop_message}",
                stop_reason=st.stop_reason,
                result=self.last_result,
            )

    async def _file_checkpoint(self, st: _RunState, journal: Any) -> AgentEvent:
        """The checkpoint every run makes as it starts (file checkpointing on)."""
        made = await asyncio.to_thread(journal.checkpoint, run_id=st.run_id)
        event: AgentEvent = self._emit(
            st, FileCheckpointEvent, checkpoint_id=made.id, name=made.name
        )
        return event

    async def _observe_hooks(self, st: _RunState, event: str, **extra: Any) -> list[AgentEvent]:
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

    async def _loop(self, st: _RunState) -> AsyncIterator[AgentEvent]:
        while True:
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
            if not turn.tool_requests:
                if st.options.output_type is not None:
                    async for event in self._structured(st):
                        yield event
                return
            async for event in self._run_tools(st, turn.tool_requests):
                yield event
            if st.stop_reason is not None:
                return

    async def _compact_if_needed(self, st: _RunState) -> AsyncIterator[AgentEvent]:
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
            hook_context=st.gate.hook_context,
            hook_events=st.gate.hook_events,
            emit=partial(self._emit, st),
            charge=partial(self._charge_summary, st),
            may_request=partial(self._may_request, st),
            guard=self.interrupter.guard,
        ):
            yield event

    def _may_request(self, st: _RunState) -> bool:
        limit = st.options.limits.max_requests
        if limit is not None and st.budget.usage().requests >= limit:
            return False
        return st.budget.ancestor_stop_before_request() is None

    def _charge_summary(
        self, st: _RunState, model: ChatModel, response: Response, messages: list[dict[str, Any]]
    ) -> None:
        st.budget.charge_request()
        input_tokens = response.input_tokens
        if input_tokens is None:
            input_tokens = estimate_prompt_tokens(messages)
        output_tokens = response.output_tokens
        if output_tokens is None:
            output_tokens = max(1, len("".join(response.text)) // 4)
        cost = response.cost
        if cost is None:
            cost = known_cost(model, input_tokens, output_tokens)
        self._count_request(st, input_tokens, output_tokens, cost)

    def _count_request(
        self, st: _RunState, input_tokens: int, output_tokens: int, cost: float | None
    ) -> None:
        st.requests += 1
        st.budget.charge_tokens(input_tokens, output_tokens, cost)
        st.input_tokens += input_tokens
        st.output_tokens += output_tokens
        if cost is None:
            st.cost_missing += 1
        else:
            st.cost += cost

    def _add_turn(self, st: _RunState, turn: Turn) -> None:
        st.conversation.append(turn)
        st.turns.append(turn)

    # ---------------------------------------------------------------- limits

    def _limit_before_request(self, st: _RunState) -> bool:
        # The run's budget also counts the runs it delegated to: they spend its limits.
        limit = st.options.limits.max_requests
        if limit is not None and st.budget.usage().requests >= limit:
            st.stop("request_limit", f"The run reached its limit of {limit} model requests.")
            return True
        spent = st.budget.ancestor_stop_before_request()  # a delegated run's lead budgets
        if spent is not None:
            st.stop(*spent)
        return spent is not None

    def _limit_after_request(self, st: _RunState) -> bool:
        reached = limit_reached(st.options.limits, st.budget.usage())
        if reached is None:
            reached = st.budget.ancestor_stop_after_request()
        if reached is not None:
            st.stop(*reached)
        return reached is not None

    # ---------------------------------------------------------------- requests

    async def _request(
        self,
        st: _RunState,
        response: Response,
        *,
        tools: list[dict[str, Any]],
        extra: dict[str, Any] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """One model request, with fallbacks; fills ``response``."""
        # Counted toward the shared budgets as it starts, so that concurrent delegated
        # runs cannot all pass the same last-request check.
        st.budget.charge_request()
        messages = st.conversation.messages()
        fallbacks = st.deps.fallbacks
        while True:
            model = st.model
            yield self._emit(
                st, RequestStartEvent, request_index=st.requests + 1, model=model.model
            )
            try:
                async for event in self._stream(st, model, messages, tools, response, extra):
                    yield event
                return
            except ProviderFailed as failed:
                error = failed.error
                yield self._emit(st, RequestErrorEvent, error=str(error), transient=error.transient)
                can_fall_back = error.transient and not st.progressed
                if not can_fall_back or st.fallbacks_used >= len(fallbacks):
                    raise
                # The agent moves to the fallback for good (deps.report tells it).
                fallback = st.model = fallbacks[st.fallbacks_used]
                st.fallbacks_used += 1
                yield self._emit(
                    st,
                    FallbackEvent,
                    from_model=model.model,
                    to_model=fallback.model,
                    error=str(error),
                )
                response.reset()

    async def _stream(
        self,
        st: _RunState,
        model: ChatModel,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        response: Response,
        extra: dict[str, Any] | None,
    ) -> AsyncIterator[AgentEvent]:
        params = {**st.deps.request_extras, **(extra or {})}
        include_partial = st.options.include_partial_messages
        st.partial = response
        try:
            async for text in stream_response(
                model, messages, tools, params, response, self.interrupter.guard
            ):
                event = self._text_event(st, text)
                if include_partial:
                    yield event
        finally:
            if response.chunks:
                st.progressed = True

    def _finish_response(self, st: _RunState, response: Response) -> Turn:
        st.partial = None
        input_tokens = response.input_tokens
        output_tokens = response.output_tokens
        if input_tokens is None or output_tokens is None:
            # The provider reported no usage: estimate (about four characters a token)
            # so that token limits still hold.
            input_tokens = estimate_prompt_tokens(st.conversation.messages())
            output_tokens = max(1, len("".join(response.text)) // 4)
        cost = response.cost
        if cost is None:
            cost = known_cost(st.model, input_tokens, output_tokens)
        self._count_request(st, input_tokens, output_tokens, cost)
        turn = response.turn(
            TurnUsage(input_tokens=input_tokens, output_tokens=output_tokens, cost=cost)
        )
        self._add_turn(st, turn)
        st.response_text = turn.text
        return turn

    async def _after_request_events(self, st: _RunState, turn: Turn) -> AsyncIterator[AgentEvent]:
        if turn.text:
            yield self._emit(st, TextCompleteEvent, text=turn.text)
        usage = turn.usage or TurnUsage()
        yield self._emit(
            st,
            RequestEndEvent,
            usage=RequestUsage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens),
            cost=usage.cost,
        )
        yield self._emit(st, UsageEvent, usage=st.usage())

    # ---------------------------------------------------------------- tools

    async def _run_tools(
        self, st: _RunState, requests: Sequence[ContentToolRequest]
    ) -> AsyncIterator[AgentEvent]:
        st.pending_calls = list(requests)
        st.results = {}
        ready: list[_Ready] = []
        limit = st.options.limits.max_tool_calls
        for index, request in enumerate(requests):
            self.interrupter.check()
            if limit is not None and st.budget.usage().tool_calls >= limit:
                st.stop("tool_call_limit", f"The run reached its limit of {limit} tool calls.")
                break
            spent = st.budget.ancestor_stop_before_tool_call()
            if spent is not None:
                st.stop(*spent)
                break
            st.tool_calls += 1
            st.budget.charge_tool_call()
            st.progressed = True
            yield self._emit(
                st,
                ToolStartEvent,
                call_id=request.id,
                tool_name=request.name,
                arguments=request.arguments,
            )
            prepared = self._prepare_call(st, request)
            if isinstance(prepared, ContentToolResult):
                yield self._finish_call(st, _Outcome(prepared))
                continue
            tool, arguments = prepared
            verdict = Verdict()
            async for event in st.gate.decide(
                request, tool, arguments, verdict, calls_after=len(requests) - index - 1
            ):
                yield event
            if verdict.stop_reason is not None:
                st.hook_stop = verdict.stop_reason
            if verdict.suspend is not None:
                # Nobody can answer now: the call is saved and the run pauses on it; the
                # calls after it do not run (the model hears "Not executed").
                yield self._suspend(st, requests[index + 1 :], verdict.suspend)
                break
            if not verdict.allowed:
                yield self._finish_call(
                    st, _Outcome(_error_result(request, f"Denied: {verdict.reason}"))
                )
                if verdict.stop_run is not None:
                    # The person stopped the run from an approval: nothing of this
                    # response runs, not even calls approved before this one.
                    ready.clear()
                    st.stop("interrupted", verdict.stop_run)
                    break
                if verdict.interrupt is not None:
                    # PermissionResultDeny(interrupt=True): the calls before this one still
                    # run; the later ones get "not run" results; no further request.
                    st.stop("interrupted", verdict.interrupt)
                    break
                continue
            ready.append((request, tool, verdict.arguments or arguments, verdict))
            if st.deps.durable is not None:
                # With durable approvals, each call runs before the next is decided, so a
                # pause never leaves an approved call unrun behind it.
                for item in ready:
                    outcome = await self.interrupter.guard(self._execute(st, *item))
                    for event in self._finish_call_events(st, outcome):
                        yield event
                ready.clear()
        if st.options.tool_mode == "sequential":
            for item in ready:
                outcome = await self.interrupter.guard(self._execute(st, *item))
                for event in self._finish_call_events(st, outcome):
                    yield event
        else:
            async for event in self._run_concurrently(st, ready):
                yield event
        self._add_results_turn(st, "the run stopped before it")
        if st.hook_stop is not None:
            st.stop("hook_requested_stop", st.hook_stop)
        if st.stop_reason is None and any(n >= _LOOP_REPEATS for n in st.loop_counts.values()):
            st.stop(
                "tool_loop",
                f"The model made the same tool call with the same result {_LOOP_REPEATS} times.",
            )

    def _suspend(
        self, st: _RunState, later: Sequence[ContentToolRequest], approval: ApprovalRequest
    ) -> AgentEvent:
        """Save the paused call (with the results so far) and stop with ``approval_pending``."""
        store = st.deps.durable
        assert store is not None
        for request in later:
            st.results[request.id] = _error_result(request, NOT_EXECUTED)
        open_turn = st.conversation.open_tool_requests()
        path = store.suspend(
            Suspension(
                request=approval,
                calls=tuple(st.pending_calls),
                results=tuple(st.results[r.id] for r in st.pending_calls if r.id in st.results),
                turns=tuple(st.conversation.turns if open_turn is not None else ()),
                usage=st.usage(),
                limits=st.options.limits,
                run_id=st.run_id,
                run_context=st.options.run_context,
            )
        )
        st.results[approval.call_id] = ContentToolResult(
            call_id=approval.call_id,
            name=approval.tool_name,
            output="Waiting for a person's approval; the run paused here.",
            is_error=True,
        )
        st.stop("approval_pending", f"The call {approval.tool_name!r} waits for approval: {path}")
        return self._emit(
            st,
            ApprovalEvent,
            call_id=approval.call_id,
            request_id=approval.request_id,
            status="pending_durable",
            path=path,
        )

    async def _resume(self, st: _RunState, resume: Resumption) -> AsyncIterator[AgentEvent]:
        """Apply a durable approval's decision to its saved call, then answer the paused
        response (earlier results as saved, later calls "Not executed")."""
        st.budget.charge_usage(resume.prior_usage)
        prior = resume.prior_usage
        st.requests, st.tool_calls = prior.requests, prior.tool_calls
        st.input_tokens, st.output_tokens = prior.input_tokens, prior.output_tokens
        st.cost, st.cost_missing = prior.cost or 0.0, prior.cost_missing
        st.progressed = True
        st.pending_calls = list(resume.calls)
        st.results = {r.call_id: r for r in resume.results}
        approval = resume.approval
        request = next(r for r in resume.calls if r.id == approval.call_id)
        tool = st.deps.tools[approval.tool_name]
        verdict = Verdict()
        async for event in st.gate.resume(approval, request, tool, resume.decision, verdict):
            yield event
        if verdict.allowed:
            resume.executing()
            arguments = verdict.arguments if verdict.arguments is not None else approval.arguments
            outcome = await self.interrupter.guard(
                self._execute(st, request, tool, arguments, verdict)
            )
            resume.executed(outcome.result)
            for event in self._finish_call_events(st, outcome):
                yield event
        else:
            result = _error_result(request, f"Denied: {verdict.reason}")
            resume.executed(result)
            yield self._finish_call(st, _Outcome(result))
            if verdict.stop_run is not None:
                st.stop("interrupted", verdict.stop_run)
        self._add_results_turn(st, "the run paused before it")
        if st.hook_stop is not None:
            st.stop("hook_requested_stop", st.hook_stop)

    async def _run_concurrently(
        self, st: _RunState, ready: list[_Ready]
    ) -> AsyncIterator[AgentEvent]:
        tasks = {asyncio.ensure_future(self._execute(st, *item)) for item in ready}
        try:
            while tasks:
                done, tasks = await self.interrupter.guard(
                    asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                )
                for task in done:
                    for event in self._finish_call_events(st, task.result()):
                        yield event
        finally:
            for task in tasks:
                task.cancel()

    def _prepare_call(
        self, st: _RunState, request: ContentToolRequest
    ) -> ContentToolResult | tuple[Tool, dict[str, Any]]:
        tool = st.deps.tools.get(request.name)
        if tool is None:
            known = ", ".join(sorted(st.deps.tools)) or "none"
            return _error_result(
                request, f"Unknown tool {request.name!r}. Available tools: {known}."
            )
        try:
            raw = request.raw_arguments if request.raw_arguments is not None else request.arguments
            arguments = tool.parse_arguments(raw)
        except ToolArgumentsError as exc:
            return _error_result(request, str(exc))
        for callback in st.deps.on_tool_request:
            try:
                callback(request)
            except ToolRejectedError as exc:
                return _error_result(request, f"Tool call rejected: {exc}")
            except Exception as exc:
                logger.warning("on_tool_request callback failed; rejecting the call", exc_info=True)
                return _error_result(
                    request,
                    f"Tool call rejected: a tool-request callback failed ({type(exc).__name__}).",
                )
        return tool, arguments

    async def _execute(
        self,
        st: _RunState,
        request: ContentToolRequest,
        tool: Tool,
        arguments: dict[str, Any],
        verdict: Verdict,
    ) -> _Outcome:
        started = time.monotonic()
        failed = False
        extra: list[AgentEvent] = []
        try:
            context = st.deps.tool_context(st.run_id, st.options.run_context, request)
            budget = current_budget.set(st.budget)  # a delegation tool draws on it
            try:
                with tool_context(context):
                    value = await tool.invoke(arguments)
            finally:
                current_budget.reset(budget)
            output = format_tool_output(value)
            if st.deps.trusted_results is not None:
                output = self._trusted_result(st, request, arguments, value, output, extra)
            result = ContentToolResult(call_id=request.id, name=request.name, output=output)
        except ToolInvocationError as exc:
            failed, result = True, _error_result(request, str(exc))
        except Exception as exc:
            failed, result = True, _error_result(request, f"Error: {type(exc).__name__}: {exc}")
        duration = time.monotonic() - started
        if verdict.additional_context:
            result = result.model_copy(
                update={"output": f"{result.output}\n\n{verdict.additional_context}"}
            )
        result, hook_run, stop = await st.gate.after_call(tool, arguments, result, failed)
        runtime = st.deps.context
        if runtime is not None and runtime.is_large(result):  # offload (a file write)
            result = await asyncio.to_thread(runtime.shape_result, result)
        return _Outcome(
            result,
            duration,
            hook_run,
            "PostToolUseFailure" if failed else "PostToolUse",
            stop,
            extra,
        )

    def _trusted_result(
        self,
        st: _RunState,
        request: ContentToolRequest,
        arguments: dict[str, Any],
        value: Any,
        output: str,
        events: list[AgentEvent],
    ) -> str:
        """A trusted tool returned: record its value for the app; return what the model sees.

        Raises:
            ToolInvocationError: the policy's ``on_result`` failed (the event is kept).
        """
        policy = st.deps.trusted_results
        result_type = policy.result_type(request.name) if policy is not None else None
        if policy is None or result_type is None:
            return output
        event = self._emit(
            st,
            TrustedResultEvent,
            result_id=f"trusted_{uuid.uuid4().hex}",
            result_type=result_type,
            tool_name=request.name,
            call_id=request.id,
            arguments=to_jsonable_python(arguments, fallback=str),
            value=value,
        )
        events.append(event)
        if policy.on_result is not None:
            try:
                policy.on_result(event)
            except Exception as exc:
                logger.warning("TrustedResults on_result failed", exc_info=True)
                raise ToolInvocationError(
                    f"The trusted result could not be delivered ({type(exc).__name__})."
                ) from None
        return policy.receipt(event.result_id, result_type) if policy.model_receipt else output

    def _finish_call_events(self, st: _RunState, outcome: _Outcome) -> list[AgentEvent]:
        events: list[AgentEvent] = list(outcome.events)
        if outcome.hook_run is not None:
            events.extend(st.gate.hook_events(outcome.hook_event, outcome.hook_run))
        if outcome.stop is not None:
            st.hook_stop = outcome.stop
        events.append(self._finish_call(st, outcome))
        return events

    def _finish_call(self, st: _RunState, outcome: _Outcome) -> AgentEvent:
        result, duration = outcome.result, outcome.duration
        st.results[result.call_id] = result
        request = next((r for r in st.pending_calls if r.id == result.call_id), None)
        if request is not None:
            signature = json.dumps(
                [
                    request.name,
                    request.arguments,
                    request.raw_arguments,
                    result.output,
                    result.is_error,
                ],
                sort_keys=True,
                default=str,
            )
            st.loop_counts[signature] += 1
        for callback in st.deps.on_tool_result:
            try:
                callback(result)
            except Exception:
                logger.warning("on_tool_result callback failed", exc_info=True)
        event: AgentEvent = self._emit(
            st,
            ToolEndEvent,
            call_id=result.call_id,
            tool_name=result.name,
            output=result.output,
            is_error=result.is_error,
            duration=duration,
        )
        return event

    def _add_results_turn(self, st: _RunState, why: str) -> None:
        """Answer every pending tool request, in request order, then clear them."""
        if not st.pending_calls:
            return
        contents: list[Content] = [
            st.results.get(r.id) or _error_result(r, _NOT_RUN.format(why=why))
            for r in st.pending_calls
        ]
        st.pending_calls = []
        st.results = {}
        self._add_turn(st, Turn(role="user", contents=contents))

    def _make_consistent(self, st: _RunState) -> None:
        """After an interruption or failure: keep partial text, answer open tool requests."""
        partial = st.partial
        if partial is not None:
            st.partial = None
            text = "".join(partial.text)
            if text:
                self._add_turn(st, Turn(role="assistant", contents=[ContentText(text=text)]))
                st.response_text = text
        why = f"the run stopped ({st.stop_reason or 'interrupted'})"
        if st.pending_calls:
            self._add_results_turn(st, why)
            return
        unanswered = st.conversation.open_tool_requests()
        if unanswered is not None:
            # A response with tool calls that a limit stopped before they ran.
            st.pending_calls = list(unanswered.tool_requests)
            self._add_results_turn(st, why)

    # ---------------------------------------------------------------- structured output

    async def _structured(self, st: _RunState) -> AsyncIterator[AgentEvent]:
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

    def _result(self, st: _RunState) -> AgentResult:
        usage = st.usage()
        return AgentResult.model_construct(
            response=st.response_text,
            turns=list(st.turns),
            events=list(st.events),
            usage=usage,
            cost=CostSummary(
                total=usage.cost, complete=st.cost_missing == 0, missing=st.cost_missing
            ),
            duration=time.monotonic() - st.started,
            stop_reason=st.stop_reason or "interrupted",
            stop_message=st.stop_message,
            structured_output=st.structured_output,
            agent_id=st.deps.agent_id,
            agent_name=st.deps.agent_name,
            session_id=st.deps.session_id,
            run_id=st.run_id,
            run_context=st.options.run_context,
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


# -------------------------------------------------------------------- helpers


MAX_ERROR_CHARS = 4_000
"""The most characters an error result carries: a tool's error may quote a huge argument
(a 10 MB path), which would otherwise ride in the conversation, every later request and
the UI."""


def _error_result(request: ContentToolRequest, message: str) -> ContentToolResult:
    if len(message) > MAX_ERROR_CHARS:
        cut = len(message) - MAX_ERROR_CHARS
        message = (
            f"{message[: MAX_ERROR_CHARS * 3 // 4]}\n[... {cut:,} characters of this error cut ...]"
            f"\n{message[-MAX_ERROR_CHARS // 4 :]}"
        )
    return ContentToolResult(call_id=request.id, name=request.name, output=message, is_error=True)
