"""The governed run loop: request -> tool calls -> limits -> events.

Every public run method of :class:`~deputy_shiny.agent.Agent` is an adapter over
:meth:`Engine.run`, an async generator of events. One run:

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
import re
import time
import traceback
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from pydantic import TypeAdapter, ValidationError

from . import _litellm
from ._interrupt import Interrupted, Interrupter
from ._redact import redact
from ._tool_gate import CallIds, ToolGate, Verdict
from .errors import (
    DeputyError,
    MissingCredentialsError,
    ProviderError,
    StructuredOutputError,
    ToolArgumentsError,
    ToolInvocationError,
    ToolRejectedError,
    UnknownModelError,
    UsageLimitExceeded,
)
from .events import (
    LIMIT_STOP_REASONS,
    AgentEvent,
    AgentResult,
    AgentUsage,
    CostSummary,
    FallbackEvent,
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
    UsageEvent,
)
from .hooks import HookRun
from .limits import UsageLimits
from .messages import (
    Content,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    Turn,
    TurnUsage,
    to_openai_messages,
    tool_request_from_json,
)
from .models import ChatModel, missing_credentials
from .tools import Tool, format_tool_output, tool_context

if TYPE_CHECKING:
    from .agent import Agent

logger = logging.getLogger(__name__)

ToolMode = Literal["concurrent", "sequential"]
Validator = Callable[[Any], object]

_NOT_RUN = "Tool call not run: {why}."
_TEXT_FIELDS = frozenset(
    {"agent_id", "session_id", "run_id", "run_context", "timestamp", "type", "text"}
)
_LOOP_REPEATS = 3


@dataclass
class RunOptions:
    """Everything one run needs beyond the agent's own state."""

    prompt: Turn
    limits: UsageLimits
    run_context: dict[str, Any]
    include_partial_messages: bool = True
    output_type: TypeAdapter[Any] | None = None
    validate: Validator | None = None
    max_corrections: int = 0
    tool_mode: ToolMode = "concurrent"


@dataclass
class _Response:
    """One model response being assembled from stream chunks."""

    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None

    def reset(self) -> None:
        """Forget a failed attempt (before a fallback model tries again)."""
        self.text.clear()
        self.thinking.clear()
        self.calls.clear()
        self.input_tokens = self.output_tokens = self.cost = None

    def turn(self, usage: TurnUsage | None) -> Turn:
        contents: list[Content] = []
        if self.thinking:
            contents.append(ContentThinking(thinking="".join(self.thinking)))
        if self.text:
            contents.append(ContentText(text="".join(self.text)))
        for index in sorted(self.calls):
            call = self.calls[index]
            call_id = call["id"] or f"call_{uuid.uuid4().hex[:24]}"
            contents.append(tool_request_from_json(call_id, call["name"], "".join(call["args"])))
        return Turn(role="assistant", contents=contents, usage=usage)


@dataclass
class _Outcome:
    """A finished tool call: its result and what the after-call hooks did."""

    result: ContentToolResult
    duration: float = 0.0
    hook_run: HookRun | None = None
    hook_event: str = "PostToolUse"
    stop: str | None = None


_Ready = tuple[ContentToolRequest, Tool, dict[str, Any], "Verdict"]


class _ProviderFailed(Exception):
    def __init__(self, error: ProviderError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass
class _RunState:
    run_id: str
    options: RunOptions
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
    partial: _Response | None = None
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
    """Runs tasks for one Agent. Private: use :class:`~deputy_shiny.agent.Agent`."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.interrupter = Interrupter()
        self.gate = ToolGate(agent)
        self.last_result: AgentResult | None = None
        self._last_error: BaseException | None = None

    # ---------------------------------------------------------------- events

    def _emit(self, st: _RunState, cls: type[Any], **fields: Any) -> Any:
        # model_construct: these values come from the engine itself, and validating
        # every streamed chunk's event would cost more than the rest of the chunk path.
        event = cls.model_construct(
            agent_id=self.agent.agent_id,
            session_id=self.agent.session_id,
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
                "agent_id": self.agent.agent_id,
                "session_id": self.agent.session_id,
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

    async def run(self, options: RunOptions) -> AsyncIterator[AgentEvent]:
        """Run one task, yielding events; ``self.last_result`` holds the result after."""
        agent = self.agent
        agent._begin_run()
        self.interrupter.arm()
        st = _RunState(run_id=f"run_{uuid.uuid4().hex}", options=options)
        finished = False
        try:
            yield self._emit(st, StartEvent, task=options.prompt.text)
            self._add_turn(st, options.prompt)
            try:
                # As in deputy: SessionStart as each run starts, SessionEnd as it ends.
                for event in await self._observe_hooks(st, "SessionStart"):
                    yield event
                for event in await self._observe_hooks(
                    st, "UserPromptSubmit", prompt=options.prompt.text
                ):
                    yield event
                async for event in self._loop(st):
                    yield event
            except Interrupted as stop:
                st.stop(stop.reason, "The run was interrupted.")
            except _ProviderFailed as failed:
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
            agent._end_run(st.usage())
        if st.stop_reason in LIMIT_STOP_REASONS and options.limits.on_exceed == "error":
            raise UsageLimitExceeded(
                f"Usage limit reached ({st.stop_reason}): {st.stop_message}",
                stop_reason=st.stop_reason,
                result=self.last_result,
            )

    async def _observe_hooks(self, st: _RunState, event: str, **extra: Any) -> list[AgentEvent]:
        """Run hooks that only observe (their failures are recorded, never fatal)."""
        hooks = self.agent._hooks
        if not hooks.matchers(event):
            return []
        run = await hooks.run(
            event,
            context=self.gate.hook_context(event, st.run_id, st.options.run_context, **extra),
        )
        if run.failure is not None:
            logger.warning("%s hook failed: %s", event, run.failure)
        return self.gate.hook_events(partial(self._emit, st), event, run)

    async def _loop(self, st: _RunState) -> AsyncIterator[AgentEvent]:
        while True:
            if self._limit_before_request(st):
                return
            response = _Response()
            async for event in self._request(st, response, tools=self.agent._tool_schemas()):
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

    def _add_turn(self, st: _RunState, turn: Turn) -> None:
        self.agent._turns.append(turn)
        st.turns.append(turn)

    # ---------------------------------------------------------------- limits

    def _limit_before_request(self, st: _RunState) -> bool:
        limit = st.options.limits.max_requests
        if limit is not None and st.requests >= limit:
            st.stop("request_limit", f"The run reached its limit of {limit} model requests.")
            return True
        return False

    def _limit_after_request(self, st: _RunState) -> bool:
        limits = st.options.limits
        checks = (
            ("input_token_limit", limits.max_input_tokens, st.input_tokens, "input tokens"),
            ("output_token_limit", limits.max_output_tokens, st.output_tokens, "output tokens"),
            (
                "total_token_limit",
                limits.max_total_tokens,
                st.input_tokens + st.output_tokens,
                "tokens",
            ),
        )
        for reason, limit, used, what in checks:
            if limit is not None and used > limit:
                st.stop(reason, f"The run used {used} {what}, over its limit of {limit}.")
                return True
        if limits.max_cost_usd is not None:
            if st.cost_missing:
                st.stop(
                    "cost_unavailable",
                    "The run has a cost limit but the provider reported no cost for a "
                    "request, so the limit cannot be enforced.",
                )
                return True
            if st.cost > limits.max_cost_usd:
                st.stop(
                    "cost_limit",
                    f"The run cost ${st.cost:.6f}, over its limit of ${limits.max_cost_usd:.6f}.",
                )
                return True
        return False

    # ---------------------------------------------------------------- requests

    async def _request(
        self,
        st: _RunState,
        response: _Response,
        *,
        tools: list[dict[str, Any]],
        extra: dict[str, Any] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """One model request, with fallbacks; fills ``response``."""
        agent = self.agent
        messages = to_openai_messages(agent._system_prompt, agent._turns)
        while True:
            model = agent._model
            yield self._emit(
                st, RequestStartEvent, request_index=st.requests + 1, model=model.model
            )
            try:
                async for event in self._stream(st, model, messages, tools, response, extra):
                    yield event
                return
            except _ProviderFailed as failed:
                error = failed.error
                yield self._emit(st, RequestErrorEvent, error=str(error), transient=error.transient)
                fallback = agent._next_fallback() if error.transient and not st.progressed else None
                if fallback is None:
                    raise
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
        response: _Response,
        extra: dict[str, Any] | None,
    ) -> AsyncIterator[AgentEvent]:
        litellm = await _load_litellm()
        from ._custom_provider import reported_cost

        _check_credentials(model)
        kwargs = model.request_kwargs()
        kwargs.update(self.agent._request_extras())
        kwargs.update(extra or {})
        if tools:
            kwargs["tools"] = tools
        guard = self.interrupter.guard
        include_partial = st.options.include_partial_messages
        st.partial = response
        stream: Any = None
        try:
            try:
                stream = await guard(
                    litellm.acompletion(
                        messages=messages,
                        stream=True,
                        stream_options={"include_usage": True},
                        **kwargs,
                    )
                )
                iterator = stream.__aiter__()
                while True:
                    try:
                        chunk = await guard(iterator.__anext__())
                    except StopAsyncIteration:
                        break
                    st.progressed = True
                    usage = getattr(chunk, "usage", None)
                    if usage is not None:
                        response.input_tokens = usage.prompt_tokens
                        response.output_tokens = usage.completion_tokens
                    choices = chunk.choices
                    text = choices[0].delta.content if choices else None
                    if text:
                        response.text.append(text)
                        event = self._text_event(st, text)
                        if include_partial:
                            yield event
                    else:
                        # Probing a pydantic chunk for an absent attribute is slow, so
                        # only chunks without text are probed: a reported cost rides on
                        # an empty chunk, and reasoning chunks carry no content.
                        if response.cost is None:
                            response.cost = reported_cost(chunk)
                        if choices:
                            reasoning = getattr(choices[0].delta, "reasoning_content", None)
                            if reasoning:
                                response.thinking.append(reasoning)
                    if not choices:
                        continue
                    delta = choices[0].delta
                    if delta.tool_calls:
                        _add_tool_call_deltas(response, delta.tool_calls)
            except (Interrupted, asyncio.CancelledError, GeneratorExit):
                raise
            except Exception as exc:
                raise _ProviderFailed(_provider_error(exc, model)) from exc
        finally:
            if stream is not None:
                await _close_stream(stream)

    def _finish_response(self, st: _RunState, response: _Response) -> Turn:
        st.partial = None
        input_tokens = response.input_tokens
        output_tokens = response.output_tokens
        if input_tokens is None or output_tokens is None:
            # The provider reported no usage: estimate (about four characters a token)
            # so that token limits still hold.
            input_tokens = _estimate_tokens(
                to_openai_messages(self.agent._system_prompt, self.agent._turns)
            )
            output_tokens = max(1, len("".join(response.text)) // 4)
        cost = response.cost
        if cost is None:
            cost = _known_cost(self.agent._model, input_tokens, output_tokens)
        st.requests += 1
        st.input_tokens += input_tokens
        st.output_tokens += output_tokens
        if cost is None:
            st.cost_missing += 1
        else:
            st.cost += cost
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
        for request in requests:
            self.interrupter.check()
            if limit is not None and st.tool_calls >= limit:
                st.stop("tool_call_limit", f"The run reached its limit of {limit} tool calls.")
                break
            st.tool_calls += 1
            st.progressed = True
            yield self._emit(
                st,
                ToolStartEvent,
                call_id=request.id,
                tool_name=request.name,
                arguments=request.arguments,
            )
            prepared = self._prepare_call(request)
            if isinstance(prepared, ContentToolResult):
                yield self._finish_call(st, _Outcome(prepared))
                continue
            tool, arguments = prepared
            verdict = Verdict()
            async for event in self.gate.decide(
                partial(self._emit, st),
                self.interrupter.guard,
                CallIds(st.run_id, st.options.run_context),
                request,
                tool,
                arguments,
                verdict,
            ):
                yield event
            if verdict.stop_reason is not None:
                st.hook_stop = verdict.stop_reason
            if not verdict.allowed:
                yield self._finish_call(
                    st, _Outcome(_error_result(request, f"Denied: {verdict.reason}"))
                )
                if verdict.interrupt is not None:
                    # PermissionResultDeny(interrupt=True): the calls before this one still
                    # run; the later ones get "not run" results; no further request.
                    st.stop("interrupted", verdict.interrupt)
                    break
                continue
            ready.append((request, tool, verdict.arguments or arguments, verdict))
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
        self, request: ContentToolRequest
    ) -> ContentToolResult | tuple[Tool, dict[str, Any]]:
        tool = self.agent._tools.get(request.name)
        if tool is None:
            known = ", ".join(sorted(self.agent._tools)) or "none"
            return _error_result(
                request, f"Unknown tool {request.name!r}. Available tools: {known}."
            )
        try:
            raw = request.raw_arguments if request.raw_arguments is not None else request.arguments
            arguments = tool.parse_arguments(raw)
        except ToolArgumentsError as exc:
            return _error_result(request, str(exc))
        for callback in list(self.agent._on_tool_request):
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
        try:
            with tool_context(self.agent._tool_context(st.run_id, st.options.run_context, request)):
                value = await tool.invoke(arguments)
            result = ContentToolResult(
                call_id=request.id, name=request.name, output=format_tool_output(value)
            )
        except ToolInvocationError as exc:
            failed, result = True, _error_result(request, str(exc))
        except Exception as exc:
            failed, result = True, _error_result(request, f"Error: {type(exc).__name__}: {exc}")
        duration = time.monotonic() - started
        if verdict.additional_context:
            result = result.model_copy(
                update={"output": f"{result.output}\n\n{verdict.additional_context}"}
            )
        result, hook_run, stop = await self.gate.after_call(
            CallIds(st.run_id, st.options.run_context), tool, arguments, result, failed
        )
        return _Outcome(
            result, duration, hook_run, "PostToolUseFailure" if failed else "PostToolUse", stop
        )

    def _finish_call_events(self, st: _RunState, outcome: _Outcome) -> list[AgentEvent]:
        events: list[AgentEvent] = []
        if outcome.hook_run is not None:
            events.extend(
                self.gate.hook_events(partial(self._emit, st), outcome.hook_event, outcome.hook_run)
            )
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
        for callback in list(self.agent._on_tool_result):
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
        turns = self.agent._turns
        if turns and turns[-1].role == "assistant" and turns[-1].tool_requests:
            # A response with tool calls that a limit stopped before they ran.
            st.pending_calls = list(turns[-1].tool_requests)
            self._add_results_turn(st, why)

    # ---------------------------------------------------------------- structured output

    async def _structured(self, st: _RunState) -> AsyncIterator[AgentEvent]:
        options = st.options
        adapter = options.output_type
        assert adapter is not None
        schema = adapter.json_schema()
        prompt = (
            "Now give the requested data as one JSON value that matches this JSON schema. "
            "Reply with the JSON only, no other text.\n\nSchema:\n" + json.dumps(schema)
        )
        attempt = 0
        while True:
            attempt += 1
            self._add_turn(st, Turn(role="user", contents=[ContentText(text=prompt)]))
            if self._limit_before_request(st):
                return
            response = _Response()
            async for event in self._request(st, response, tools=[], extra=_json_format(schema)):
                yield event
            turn = self._finish_response(st, response)
            async for event in self._after_request_events(st, turn):
                yield event
            if turn.tool_requests:
                st.pending_calls = list(turn.tool_requests)
                self._add_results_turn(st, "tools are not available now; reply with the JSON only")
            if self._limit_after_request(st):
                return
            accepted, value, message = _check_structured(adapter, turn, options.validate)
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
            prompt = (
                f"That value was rejected: {message}\n"
                "Please correct it and reply with the JSON only."
            )

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
            agent_id=self.agent.agent_id,
            agent_name=self.agent.agent_name,
            session_id=self.agent.session_id,
            run_id=st.run_id,
            run_context=st.options.run_context,
        )

    @property
    def last_error(self) -> BaseException | None:
        """The error that ended the last run (provider or engine failure), if any."""
        return self._last_error


# -------------------------------------------------------------------- helpers


def _check_structured(
    adapter: TypeAdapter[Any], turn: Turn, validate: Validator | None
) -> tuple[bool, Any, str]:
    """Parse and validate one structured-output reply: (accepted, value, feedback)."""
    text = _strip_fences(turn.text)
    try:
        value = adapter.validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        return False, None, f"it does not match the schema ({problems})"
    if validate is None:
        return True, value, "accepted"
    try:
        verdict = validate(value)
    except Exception as exc:
        raise StructuredOutputError(
            f"The validate function failed: {type(exc).__name__}: {exc}"
        ) from exc
    if verdict is True:
        return True, value, "accepted"
    if verdict is False:
        return False, value, "the value did not pass validation"
    if isinstance(verdict, str):
        return False, value, verdict
    raise StructuredOutputError(
        f"validate must return True, False or a message, not {type(verdict).__name__}"
    )


async def _load_litellm() -> Any:
    if _litellm.is_loaded():
        return _litellm.get_litellm()
    # The first import takes seconds: never on the event loop.
    return await asyncio.to_thread(_litellm.get_litellm)


def _add_tool_call_deltas(response: _Response, deltas: Sequence[Any]) -> None:
    for delta in deltas:
        index = getattr(delta, "index", None) or 0
        call = response.calls.get(index)
        if call is None:
            call = response.calls[index] = {"id": None, "name": "", "args": []}
        if delta.id:
            call["id"] = delta.id
        function = delta.function
        if function is not None:
            if function.name:
                call["name"] += function.name
            if function.arguments:
                call["args"].append(function.arguments)


async def _close_stream(stream: Any) -> None:
    for name in ("aclose", "close"):
        close = getattr(stream, name, None)
        if close is None:
            continue
        try:
            outcome = close()
            if asyncio.iscoroutine(outcome):
                await outcome
        except Exception:
            logger.debug("closing a model stream failed", exc_info=True)
        return


def _error_result(request: ContentToolRequest, message: str) -> ContentToolResult:
    return ContentToolResult(call_id=request.id, name=request.name, output=message, is_error=True)


def _estimate_tokens(messages: list[dict[str, Any]]) -> int:
    return max(1, len(json.dumps(messages, default=str)) // 4)


def _known_cost(model: ChatModel, input_tokens: int, output_tokens: int) -> float | None:
    """The cost from litellm's price table, or None for models it has no price for."""
    if not _litellm.is_registered(model.provider):
        litellm = _litellm.get_litellm()
        try:
            prompt_cost, completion_cost = litellm.cost_per_token(
                model=model.model, prompt_tokens=input_tokens, completion_tokens=output_tokens
            )
        except Exception:
            return None
        return float(prompt_cost + completion_cost)
    return None


def _json_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "structured_output", "schema": schema},
        }
    }


_FENCE = re.compile(r"^\s*```[\w-]*\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


def _strip_fences(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text.strip()


_CHECKED_CREDENTIALS: set[str] = set()


def _check_credentials(model: ChatModel) -> None:
    """Fail before any network traffic when the provider's API key is not set.

    Some providers' clients (Mistral, Groq) would otherwise try to connect first.
    """
    if model.model in _CHECKED_CREDENTIALS:
        return
    missing = missing_credentials(model)
    if missing:
        raise _ProviderFailed(
            MissingCredentialsError(
                f"{model.model}: no API key. Set {' or '.join(missing)} in the environment, "
                "or pass ChatModel(model=..., api_key=...).",
                transient=False,
            )
        )
    _CHECKED_CREDENTIALS.add(model.model)


_MISSING_KEY_TEXT = re.compile(r"missing (credentials|\w+ api key)|api_key client option", re.I)


def _provider_error(exc: Exception, model: ChatModel) -> ProviderError:
    """Map whatever litellm raised to a typed ProviderError whose message is one clean line.

    The message is what users see (events, the chat): "<provider> returned <status>:
    <the provider's own words>", secrets redacted, without litellm's tracebacks and
    help text. The whole error, redacted too, goes to the log.
    """
    error = _classify_provider_error(exc, model)
    logger.warning(
        "model request to %s failed (status %s, %s): %s\n%s",
        model.model,
        error.status_code,
        "transient" if error.transient else "not transient",
        error,
        redact(_error_detail(exc)).rstrip(),
    )
    return error


def _classify_provider_error(exc: Exception, model: ChatModel) -> ProviderError:
    from ._custom_provider import (
        classify_provider_error,
        deputy_error_cause,
        provider_error_summary,
        status_phrase,
    )

    litellm = _litellm.get_litellm()
    ours = deputy_error_cause(exc)
    if ours is not None:
        # ScriptedModelExhausted and friends, raised by our own providers and wrapped by litellm.
        return ProviderError(redact(_one_line(str(ours))), transient=False)
    transient, status = classify_provider_error(exc)
    text = str(exc)
    if "LLM Provider NOT provided" in text:
        return UnknownModelError(
            f"{model.model!r} is not a model litellm knows: check the provider prefix and "
            "the model name.",
            transient=False,
            status_code=status,
        )
    provider = _provider_name(exc, model)
    reason = redact(provider_error_summary(exc)) or (
        status_phrase(status) if status is not None else type(exc).__name__
    )
    head = f"{provider} returned {status}" if status is not None else provider
    message = f"{head}: {reason}"
    if isinstance(exc, litellm.AuthenticationError) or _MISSING_KEY_TEXT.search(text):
        if "key" not in reason.lower():
            message += " (check the API key)"
        return MissingCredentialsError(message, transient=False, status_code=status)
    if isinstance(exc, litellm.NotFoundError):
        return UnknownModelError(
            f"{message} (check the model name {model.model!r})",
            transient=False,
            status_code=status,
        )
    return ProviderError(message, transient=transient, status_code=status)


def _provider_name(exc: BaseException, model: ChatModel) -> str:
    """The provider a request went to: the model string's prefix, else litellm's guess."""
    if "/" in model.model:
        return model.model.split("/", 1)[0]
    named = getattr(exc, "llm_provider", None)
    return named if isinstance(named, str) and named else model.model


def _one_line(text: str) -> str:
    """The first non-blank line of ``text``, whitespace collapsed."""
    for line in text.splitlines():
        if line.strip():
            return " ".join(line.split())
    return ""


def _error_detail(exc: BaseException) -> str:
    """The whole error for the log: type, message and the traceback of every link in its chain."""
    try:
        return "".join(traceback.format_exception(exc))
    except Exception:  # a broken __str__ must not hide the failure itself
        return f"{type(exc).__name__}: {exc!r}"
