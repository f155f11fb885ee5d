"""The engine's tool calls: decide each call at the gate, run the allowed ones (in
order, or concurrently), pause for a durable approval and resume after one, and answer
every request in the conversation (a mixin of :class:`~deputy_shiny._engine.loop.Engine`)."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from .._util import log_context
from .._util.interrupt import Interrupter
from ..approvals import ApprovalRequest, Suspension
from ..errors import (
    ToolArgumentsError,
    ToolInvocationError,
    ToolRejectedError,
)
from ..events import (
    AgentEvent,
    ApprovalEvent,
    ToolEndEvent,
    ToolProgressEvent,
    ToolStartEvent,
    TrustedResultEvent,
)
from ..messages import (
    Content,
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    Turn,
)
from ..tools import Tool, tool_context
from ..tools._content import tool_content
from ..tools._context import ProgressSink
from .budget import current_budget
from .durable import NOT_EXECUTED, Resumption
from .gate import Verdict
from .journal import INTERRUPTED, Replay
from .notices import notify
from .progress import ProgressBoard
from .state import (
    LOOP_REPEATS,
    NOT_RUN,
    Outcome,
    Ready,
    RunState,
    error_result,
)

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from .._util.interrupt import Interrupter


class ToolCalls:
    """The tool-call half of the engine (mixed into Engine; private)."""

    if TYPE_CHECKING:
        interrupter: Interrupter

        def _emit(self, st: RunState, cls: type[Any], **fields: Any) -> Any: ...

        def _add_turn(self, st: RunState, turn: Turn) -> None: ...

    # ---------------------------------------------------------------- tools

    async def _run_tools(
        self, st: RunState, requests: Sequence[ContentToolRequest], replay: Replay | None = None
    ) -> AsyncIterator[AgentEvent]:
        st.pending_calls = list(requests)
        st.results = {}
        ready: list[Ready] = []
        for index, request in enumerate(requests):
            self.interrupter.check()
            replayed = self._replayed(st, request, replay) if replay is not None else None
            if replayed is not None:
                # A resumed run: this call was decided (and counted) before the crash.
                yield self._tool_start(st, request)
                if isinstance(replayed, ContentToolResult):
                    yield self._finish_call(st, Outcome(replayed))
                    continue
                ready.append(replayed)
                if st.deps.durable is not None:
                    async for event in self._run_calls(st, ready):
                        yield event
                    ready.clear()
                continue
            spent = st.meter.stop_before_tool_call()
            if spent is not None:
                st.stop(*spent)
                break
            st.meter.count_tool_call()
            st.progressed = True
            yield self._tool_start(st, request)
            prepared = self._prepare_call(st, request)
            if isinstance(prepared, ContentToolResult):
                yield self._finish_call(st, Outcome(prepared))
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
                yield await self._suspend(st, requests[index + 1 :], verdict.suspend)
                break
            if not verdict.allowed:
                for event in await _denied(st, request, arguments, verdict):
                    yield event
                yield self._finish_call(
                    st, Outcome(error_result(request, f"Denied: {verdict.reason}"))
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
            st.record(
                "decision",
                {
                    "call_id": request.id,
                    "arguments": to_jsonable_python(verdict.arguments or arguments, fallback=str),
                },
            )
            if st.deps.durable is not None:
                # With durable approvals, each call runs before the next is decided, so a
                # pause never leaves an approved call unrun behind it.
                for item in ready:
                    async for event in self._run_calls(st, [item]):
                        yield event
                ready.clear()
        if st.options.tool_mode == "sequential":
            for item in ready:
                async for event in self._run_calls(st, [item]):
                    yield event
        else:
            async for event in self._run_calls(st, ready):
                yield event
        self._add_results_turn(st, "the run stopped before it")
        if st.hook_stop is not None:
            st.stop("hook_requested_stop", st.hook_stop)
        if st.stop_reason is None and any(n >= LOOP_REPEATS for n in st.loop_counts.values()):
            st.stop(
                "tool_loop",
                f"The model made the same tool call with the same result {LOOP_REPEATS} times "
                "(a polling tool should return something that changes, such as the time).",
            )

    def _tool_start(self, st: RunState, request: ContentToolRequest) -> AgentEvent:
        event: AgentEvent = self._emit(
            st,
            ToolStartEvent,
            call_id=request.id,
            tool_name=request.name,
            arguments=request.arguments,
        )
        return event

    async def _replay(self, st: RunState, replay: Replay) -> AsyncIterator[AgentEvent]:
        """Go on with a journaled run whose process died: its usage so far counts, and
        the calls of its last response are answered (replayed, interrupted, or run)."""
        st.meter.count_prior(replay.prior_usage)
        st.turn_number = replay.turn_number
        st.progressed = True
        open_turn = st.conversation.open_tool_requests()
        if open_turn is not None:
            async for event in self._run_tools(st, open_turn.tool_requests, replay):
                yield event
            return
        turns = st.conversation.turns
        if turns and turns[-1].role == "assistant" and st.options.output_type is None:
            # Its last response was journaled and had no calls: it had ended, and only
            # its end was not written.
            st.response_text = turns[-1].text
            st.stop("complete")

    def _replayed(
        self, st: RunState, request: ContentToolRequest, replay: Replay
    ) -> ContentToolResult | Ready | None:
        """What a resumed run does with a call of its open response: its journaled result;
        an interrupted result when it was running and may not run twice; the call to run
        (decided already: it is not asked again); None when it was never decided."""
        result = replay.results.get(request.id)
        if result is not None:
            return result
        started = replay.started.get(request.id)
        arguments = replay.allowed.get(request.id) if started is None else started
        if arguments is None:
            return None
        tool = st.deps.tools.get(request.name)
        if started is not None and not _repeatable(tool):
            return error_result(request, INTERRUPTED)
        if tool is None:
            return error_result(request, f"Tool {request.name!r} is no longer available.")
        try:
            parsed = tool.parse_arguments(arguments or request.arguments)
        except ToolArgumentsError as exc:
            return error_result(request, str(exc))
        return (request, tool, parsed, Verdict(allowed=True))

    async def _suspend(
        self, st: RunState, later: Sequence[ContentToolRequest], approval: ApprovalRequest
    ) -> AgentEvent:
        """Save the paused call (with the results so far) and stop with ``approval_pending``."""
        store = st.deps.durable
        assert store is not None
        for request in later:
            st.results[request.id] = error_result(request, NOT_EXECUTED)
        open_turn = st.conversation.open_tool_requests()
        path = await store.suspend(
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
        st.record("approval", {"call_id": approval.call_id, "ref": path})
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

    async def _resume(self, st: RunState, resume: Resumption) -> AsyncIterator[AgentEvent]:
        """Apply a durable approval's decision to its saved call, then answer the paused
        response (earlier results as saved, later calls "Not executed")."""
        st.meter.count_prior(resume.prior_usage)
        st.progressed = True
        st.pending_calls = list(resume.calls)
        st.results = {r.call_id: r for r in resume.results}
        for result in resume.results:  # a crash from here on replays them
            st.record("tool_end", {"result": result.model_dump(mode="json")})
        approval = resume.approval
        request = next(r for r in resume.calls if r.id == approval.call_id)
        tool = st.deps.tools[approval.tool_name]
        verdict = Verdict()
        async for event in st.gate.resume(approval, request, tool, resume.decision, verdict):
            yield event
        if verdict.allowed:
            await resume.executing()
            arguments = verdict.arguments if verdict.arguments is not None else approval.arguments
            item: Ready = (request, tool, arguments, verdict)
            async for event in self._run_calls(st, [item], on_outcome=resume.executed):
                yield event
        else:
            for event in await _denied(st, request, approval.arguments, verdict):
                yield event
            result = error_result(request, f"Denied: {verdict.reason}")
            await resume.executed(result)
            yield self._finish_call(st, Outcome(result))
            if verdict.stop_run is not None:
                st.stop("interrupted", verdict.stop_run)
        self._add_results_turn(st, "the run paused before it")
        if st.hook_stop is not None:
            st.stop("hook_requested_stop", st.hook_stop)

    async def _run_calls(
        self,
        st: RunState,
        ready: list[Ready],
        on_outcome: Callable[[ContentToolResult], Awaitable[None]] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Run ``ready`` concurrently (one item: alone), yielding each call's progress
        while it runs and its end events as it finishes (``on_outcome`` sees each
        result first). Stopped, it cancels the calls still running and waits for them."""
        board = ProgressBoard()
        tasks: dict[asyncio.Task[Outcome], str] = {}
        for item in ready:
            request = item[0]
            sink = board.sink(request.id, request.name)
            task = asyncio.ensure_future(self._execute(st, *item, progress=sink))
            task.add_done_callback(board.wake, context=contextvars.Context())
            tasks[task] = request.id
        try:
            while tasks:
                await self.interrupter.guard(board.wait())
                for task in [t for t in tasks if t.done()]:
                    board.close(tasks.pop(task))
                    outcome = task.result()
                    if on_outcome is not None:
                        await on_outcome(outcome.result)
                    for event in self._finish_call_events(st, outcome):
                        yield event
                for call_id, tool_name, message, fraction in board.take_due():
                    yield self._emit(
                        st,
                        ToolProgressEvent,
                        call_id=call_id,
                        tool_name=tool_name,
                        message=message,
                        fraction=fraction,
                    )
        finally:
            board.close_all()
            for task in tasks:
                task.cancel()
            if tasks:
                # As an awaited call did: a tool's clean-up runs before the run goes on.
                await asyncio.wait(tasks)

    def _prepare_call(
        self, st: RunState, request: ContentToolRequest
    ) -> ContentToolResult | tuple[Tool, dict[str, Any]]:
        tool = st.deps.tools.get(request.name)
        if tool is None:
            known = ", ".join(sorted(st.deps.tools)) or "none"
            return error_result(
                request, f"Unknown tool {request.name!r}. Available tools: {known}."
            )
        try:
            raw = request.raw_arguments if request.raw_arguments is not None else request.arguments
            arguments = tool.parse_arguments(raw)
        except ToolArgumentsError as exc:
            return error_result(request, str(exc))
        for callback in st.deps.on_tool_request:
            try:
                callback(request)
            except ToolRejectedError as exc:
                return error_result(request, f"Tool call rejected: {exc}")
            except Exception as exc:
                logger.warning("on_tool_request callback failed; rejecting the call", exc_info=True)
                return error_result(
                    request,
                    f"Tool call rejected: a tool-request callback failed ({type(exc).__name__}).",
                )
        return tool, arguments

    async def _execute(
        self,
        st: RunState,
        request: ContentToolRequest,
        tool: Tool,
        arguments: dict[str, Any],
        verdict: Verdict,
        progress: ProgressSink | None = None,
    ) -> Outcome:
        started = time.monotonic()
        failed = False
        extra: list[AgentEvent] = []
        try:
            context = st.deps.tool_context(st.run_id, st.options.run_context, request)
            if progress is not None:
                context = dataclasses.replace(context, progress_sink=progress)
            if st.journal is not None:  # from here on a crash leaves it "may have run"
                st.record("tool_start", {"call_id": request.id})
                await st.journal.flush()
            budget = current_budget.set(st.budget)  # a delegation tool draws on it
            call = log_context.call_id.set(request.id)  # on the tool's log records
            observer = st.observer
            # Tracing: the call's span is current while the tool runs (a subagent's run
            # and the tool's own spans nest under it).
            scope = observer.call_scope(request.id) if observer is not None else nullcontext()
            try:
                with scope, tool_context(context):
                    value = await tool.invoke(arguments)
            finally:
                log_context.call_id.reset(call)
                current_budget.reset(budget)
            content = tool_content(value)  # text, JSON, or content objects (images too)
            output = content.output
            if st.deps.trusted_results is not None:
                output = self._trusted_result(st, request, arguments, value, output, extra)
            failed = content.is_error is True  # a returned ContentToolResult(is_error=True)
            result = ContentToolResult(
                call_id=request.id,
                name=request.name,
                output=output,
                is_error=failed,
                images=list(content.images),
            )
        except ToolInvocationError as exc:
            failed, result = True, error_result(request, str(exc))
            code = getattr(exc, "notice_code", None)  # e.g. the checkpoint journal refused
            if isinstance(code, str):
                extra.extend(
                    await notify(st, code, str(exc), tool_name=request.name, call_id=request.id)
                )
        except Exception as exc:
            failed, result = True, error_result(request, f"Error: {type(exc).__name__}: {exc}")
        duration = time.monotonic() - started
        if verdict.edited:  # the audit trail: what a person made the call run with
            approved = to_jsonable_python(arguments, fallback=str)
            result = result.model_copy(update={"approved_arguments": approved})
        if verdict.additional_context:
            result = result.model_copy(
                update={"output": f"{result.output}\n\n{verdict.additional_context}"}
            )
        result, hook_runs, stop = await st.gate.after_call(tool, arguments, result, failed)
        runtime = st.deps.context
        if runtime is not None and runtime.is_large(result):  # offload (a file write)
            result = await asyncio.to_thread(runtime.shape_result, result)
        return Outcome(result, duration, hook_runs, stop, extra)

    def _trusted_result(
        self,
        st: RunState,
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

    def _finish_call_events(self, st: RunState, outcome: Outcome) -> list[AgentEvent]:
        events: list[AgentEvent] = list(outcome.events)
        for run in outcome.hook_runs:
            events.extend(st.gate.hook_events(run.event, run))
        if outcome.stop is not None:
            st.hook_stop = outcome.stop
        events.append(self._finish_call(st, outcome))
        return events

    def _finish_call(self, st: RunState, outcome: Outcome) -> AgentEvent:
        result, duration = outcome.result, outcome.duration
        st.results[result.call_id] = result
        st.record("tool_end", {"result": result.model_dump(mode="json")})
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
            images=result.images,
        )
        return event

    def _add_results_turn(self, st: RunState, why: str) -> None:
        """Answer every pending tool request, in request order, then clear them."""
        if not st.pending_calls:
            return
        contents: list[Content] = [
            st.results.get(r.id) or error_result(r, NOT_RUN.format(why=why))
            for r in st.pending_calls
        ]
        st.pending_calls = []
        st.results = {}
        self._add_turn(st, Turn(role="user", contents=contents))

    def _make_consistent(self, st: RunState) -> None:
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


async def _denied(
    st: RunState, request: ContentToolRequest, arguments: dict[str, Any], verdict: Verdict
) -> list[AgentEvent]:
    """A denied call's ``Notification`` (code ``permission_denied``), as deputy sends it."""
    return await notify(
        st,
        "permission_denied",
        verdict.reason,
        tool_name=request.name,
        tool_input=dict(arguments),
        call_id=request.id,
    )


def _repeatable(tool: Tool | None) -> bool:
    """A tool that may run again after it was interrupted: it says it is idempotent
    (``tool_annotations(idempotent_hint=True)``). An MCP server's annotations are its
    claims, not facts: its tools never run twice."""
    return (
        tool is not None and tool.annotations.idempotent_hint is True and tool.source.type != "mcp"
    )
