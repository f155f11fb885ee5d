"""OpenTelemetry spans of runs (private; :func:`~deputy_shiny.observability.instrument`
installs them). Only this module imports ``opentelemetry``, and only once tracing is on.

One run is a tree of spans, following the GenAI semantic conventions (names, kinds and
``gen_ai.*`` attributes; ``operation.cost`` as pydantic-ai reports it)::

    invoke_agent <agent>                 the run (INTERNAL), under the span current as it
    ├─ chat <model>                      starts; each model request (CLIENT): tokens, cost,
    ├─ execute_tool <tool>               finish reasons; each tool call (INTERNAL)
    │  ├─ approval <tool>                waiting for a person's answer
    │  └─ invoke_agent <subagent>        a delegation: the subagent's run, with its own
    └─ chat <model>                      requests and calls below it

Spans carry names, ids, counts, costs and stop reasons, never content (prompts, replies,
tool arguments or outputs), so nothing a user or a model wrote, nor a key, reaches the
trace backend. Error messages on a span's status are redacted.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .._util.redact import redact
from .._util.version import package_version

if TYPE_CHECKING:
    from .._engine.deps import RunDeps
    from .._engine.observer import RunObserver
    from ..events import AgentEvent, AgentResult
    from ..messages import Turn

logger = logging.getLogger(__name__)

SCOPE = "deputy_shiny"
ERROR_STOPS = frozenset({"error", "provider_error"})

_F = TypeVar("_F", bound=Callable[..., Any])


def _quiet(method: _F) -> _F:
    """A tracing failure is logged, never raised into the run it watches."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception:
            logger.debug("deputy_shiny tracing failed", exc_info=True)
            return None

    return wrapper  # type: ignore[return-value]


def factory(provider: trace.TracerProvider | None = None) -> Callable[[RunDeps, str], RunObserver]:
    """The observer factory for ``provider`` (None: the global one, looked up at each
    span, so a provider set after :func:`instrument` is used, as py-shiny does)."""

    def start(deps: RunDeps, run_id: str) -> RunObserver:
        tracer = trace.get_tracer(SCOPE, package_version(), tracer_provider=provider)
        return SpanObserver(tracer, deps, run_id)

    return start


def _error(span: Span, kind: str, message: str) -> None:
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, redact(message)[:500]))


class SpanObserver:
    """The spans of one run (see the module docstring)."""

    def __init__(self, tracer: trace.Tracer, deps: RunDeps, run_id: str) -> None:
        self._tracer = tracer
        self._model = deps.model
        name = deps.agent_name or "agent"
        # The agent attributes every span of the run carries.
        self._common: dict[str, Any] = {
            "gen_ai.agent.id": deps.agent_id,
            "gen_ai.agent.name": name,
            "gen_ai.conversation.id": deps.session_id,
            "deputy.run.id": run_id,
        }
        attributes: dict[str, Any] = {
            **self._common,
            "gen_ai.operation.name": "invoke_agent",
            **self._provider_attributes(deps.model.model, deps.model.provider),
        }
        if deps.ancestors:  # a delegated run: who delegated it
            attributes["deputy.parent_agent.id"] = deps.ancestors[0].agent_id
        # The parent is whatever span is current as the run starts (py-shiny's session
        # and reactive spans, an app's own, or a lead's tool call for a delegation).
        self._run = tracer.start_span(
            f"invoke_agent {name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        self._run_context = trace.set_span_in_context(self._run)
        self._request: Span | None = None
        self._finish_reason: str | None = None
        self._tools: dict[str, Span] = {}
        self._tool_names: dict[str, str] = {}
        self._approvals: dict[str, Span] = {}

    @staticmethod
    def _provider_attributes(model: str, provider: str) -> dict[str, Any]:
        return {
            "gen_ai.provider.name": provider,
            "gen_ai.system": provider,  # the name before semantic conventions 1.37
            "gen_ai.request.model": model,
        }

    def _child(self, name: str, kind: SpanKind, attributes: dict[str, Any], parent: Any) -> Span:
        return self._tracer.start_span(
            name, context=parent, kind=kind, attributes={**self._common, **attributes}
        )

    # ---------------------------------------------------------------- events

    @_quiet
    def on_event(self, event: AgentEvent) -> None:
        handler = self._handlers.get(event.type)
        if handler is not None:
            handler(self, event)

    def _request_start(self, event: Any) -> None:
        self._end_request()
        provider = event.model.split("/", 1)[0] if "/" in event.model else self._model.provider
        self._request = self._child(
            f"chat {event.model}",
            SpanKind.CLIENT,
            {
                "gen_ai.operation.name": "chat",
                **self._provider_attributes(event.model, provider),
                "deputy.request.index": event.request_index,
            },
            self._run_context,
        )
        self._finish_reason = None

    def _request_end(self, event: Any) -> None:
        span = self._request
        if span is None:
            return
        usage = event.usage
        if usage.input_tokens is not None:
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        if usage.output_tokens is not None:
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        if event.cost is not None:
            span.set_attribute("operation.cost", float(event.cost))
        if self._finish_reason is not None:
            span.set_attribute("gen_ai.response.finish_reasons", (self._finish_reason,))
        self._end_request()

    def _request_error(self, event: Any) -> None:
        span = self._request
        if span is None:
            return
        _error(span, "transient_error" if event.transient else "provider_error", event.error)
        self._end_request()

    def _end_request(self) -> None:
        if self._request is not None:
            self._request.end()
            self._request = None

    def _tool_start(self, event: Any) -> None:
        self._tool_names[event.call_id] = event.tool_name
        self._tools[event.call_id] = self._child(
            f"execute_tool {event.tool_name}",
            SpanKind.INTERNAL,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": event.tool_name,
                "gen_ai.tool.call.id": event.call_id,
                "gen_ai.tool.type": "function",
            },
            self._run_context,
        )

    def _tool_end(self, event: Any) -> None:
        span = self._tools.pop(event.call_id, None)
        if span is None:
            return
        if event.is_error:
            # Only the kind: the output (what the model sees) may quote anything.
            _error(span, "tool_error", "The tool call failed or was refused.")
        span.end()

    def _permission(self, event: Any) -> None:
        span = self._tools.get(event.call_id)
        if span is not None:
            span.set_attribute("deputy.permission.decision", event.decision)

    def _approval(self, event: Any) -> None:
        span = self._approvals.pop(event.call_id, None)
        if span is None:
            tool_name = self._tool_names.get(event.call_id, "tool")
            tool_span = self._tools.get(event.call_id)
            parent = trace.set_span_in_context(tool_span) if tool_span else self._run_context
            span = self._child(
                f"approval {tool_name}",
                SpanKind.INTERNAL,
                {"gen_ai.tool.name": tool_name, "gen_ai.tool.call.id": event.call_id},
                parent,
            )
        span.set_attribute("deputy.approval.status", event.status)
        if event.status == "requested":
            self._approvals[event.call_id] = span  # ends with the answer
            return
        if event.status == "timeout":
            _error(span, "approval_timeout", "Nobody answered the approval in time.")
        span.end()

    def _fallback(self, event: Any) -> None:
        self._run.add_event(
            "deputy.fallback",
            {"deputy.from_model": event.from_model, "deputy.to_model": event.to_model},
        )

    _handlers: ClassVar[dict[str, Callable[[SpanObserver, Any], None]]] = {
        "request_start": _request_start,
        "request_end": _request_end,
        "request_error": _request_error,
        "tool_start": _tool_start,
        "tool_end": _tool_end,
        "permission": _permission,
        "approval": _approval,
        "fallback": _fallback,
    }

    @_quiet
    def on_response(self, turn: Turn) -> None:
        self._finish_reason = "tool_calls" if turn.tool_requests else "stop"

    # ---------------------------------------------------------------- tool execution

    def call_scope(self, call_id: str) -> AbstractContextManager[object]:
        span = self._tools.get(call_id)
        return nullcontext() if span is None else _current(span)

    # ---------------------------------------------------------------- the end

    @_quiet
    def finish(self, result: AgentResult, error: BaseException | None) -> None:
        for span in (*self._approvals.values(), *self._tools.values()):
            span.set_attribute("deputy.stop_reason", result.stop_reason)
            span.end()  # the run stopped before the call ended
        self._approvals.clear()
        self._tools.clear()
        if self._request is not None:
            _error(self._request, "interrupted", "The run stopped during the request.")
            self._end_request()
        run = self._run
        usage = result.usage
        run.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        run.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        run.set_attribute("deputy.usage.requests", usage.requests)
        run.set_attribute("deputy.usage.tool_calls", usage.tool_calls)
        if usage.cost is not None:
            run.set_attribute("operation.cost", float(usage.cost))
        run.set_attribute("deputy.stop_reason", result.stop_reason)
        if result.stop_reason in ERROR_STOPS or error is not None:
            kind = type(error).__name__ if error is not None else result.stop_reason
            _error(run, kind, result.stop_message or result.stop_reason)
        run.end()


@contextmanager
def _current(span: Span) -> Iterator[None]:
    """``span`` is current inside (attached and detached in the same task)."""
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield
    finally:
        otel_context.detach(token)


def emit_feedback(provider: trace.TracerProvider | None, attributes: dict[str, Any]) -> None:
    """One ``feedback`` span carrying a ``gen_ai.evaluation.result`` event (the GenAI
    semantic conventions' name for a judgement of a response): ids and the rating, never
    the comment or the reply."""
    tracer = trace.get_tracer(SCOPE, package_version(), tracer_provider=provider)
    span = tracer.start_span("feedback", kind=SpanKind.INTERNAL, attributes=attributes)
    try:
        span.add_event("gen_ai.evaluation.result", attributes=attributes)
    finally:
        span.end()
