"""What a run reports: AgentEvent (a union discriminated on ``type``), AgentUsage, AgentResult.

``agent.run(task)`` yields events as the agent works; the ``stop`` event ends every run
and ``agent.last_run()`` then holds the :class:`AgentResult`.

Examples:
    >>> from deputy_shiny.events import AgentUsage
    >>> AgentUsage(requests=2, input_tokens=10, output_tokens=5).total_tokens
    15
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from .messages import Content, ContentImage, ContentToolRequest, ContentToolResult, Turn
from .usage import AgentUsage, CostSummary, RequestUsage

StopReason = Literal[
    "complete",
    "request_limit",
    "tool_call_limit",
    "input_token_limit",
    "output_token_limit",
    "total_token_limit",
    "cost_limit",
    "cost_unavailable",
    "budget_limit",
    "tool_loop",
    "hook_requested_stop",
    "interrupted",
    "provider_error",
    "approval_pending",
    "error",
]
"""Why a run ended. ``interrupt(reason)`` may record its own reason instead of ``interrupted``."""

LIMIT_STOP_REASONS = frozenset(
    {
        "request_limit",
        "tool_call_limit",
        "input_token_limit",
        "output_token_limit",
        "total_token_limit",
        "cost_limit",
        "cost_unavailable",
        "budget_limit",
    }
)


class _EventBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    agent_id: str
    session_id: str
    run_id: str
    run_context: dict[str, Any] = Field(default_factory=dict)
    timestamp: float = Field(default_factory=time.time)
    # A subagent's run: who delegated it (as on its AgentResult); None otherwise.
    parent_agent_id: str | None = None
    parent_run_id: str | None = None
    delegation_id: str | None = None


class StartEvent(_EventBase):
    """The run started on ``task`` (the user's message text)."""

    type: Literal["start"] = "start"
    task: str


class RequestStartEvent(_EventBase):
    """A model request is about to be sent (``request_index`` counts from 1 in the run).

    Every attempt is one: a retry and a fallback each start a request, so a run's
    ``usage.requests`` is the number of its ``request_start`` events.
    """

    type: Literal["request_start"] = "request_start"
    request_index: int
    model: str


class TextEvent(_EventBase):
    """One streamed chunk of the model's text."""

    type: Literal["text"] = "text"
    text: str


class TextCompleteEvent(_EventBase):
    """The whole text of one model response."""

    type: Literal["text_complete"] = "text_complete"
    text: str


class RequestEndEvent(_EventBase):
    """A model request finished; its tokens and cost (None if unknown)."""

    type: Literal["request_end"] = "request_end"
    usage: RequestUsage
    cost: float | None = None


class RequestErrorEvent(_EventBase):
    """A model request failed; ``transient`` errors may be retried on a fallback model."""

    type: Literal["request_error"] = "request_error"
    error: str
    transient: bool = False


class ContentEvent(_EventBase):
    """A model response held content other than text and tool calls (its reasoning, as a
    :class:`~deputy_shiny.messages.ContentThinking`): one event per content, in order,
    before the response's ``text_complete``. ``content_type`` is the content's ``type``
    (``"thinking"``). Model-written: show it as text, never as markup."""

    type: Literal["content"] = "content"
    content: Content
    content_type: str


class TurnEvent(_EventBase):
    """A model turn joined the conversation (after its ``request_end``): ``turn`` is the
    assistant :class:`~deputy_shiny.messages.Turn`, with its tokens and cost in
    ``turn.usage``; ``turn_number`` counts the run's model turns from 1."""

    type: Literal["turn"] = "turn"
    turn: Turn
    turn_number: int


class WarningEvent(_EventBase):
    """Something went wrong that the run survived, or is about to stop it: ``message``
    for people, ``code`` for code (``cost_limit_warning``: the run has spent 90% of its
    cost limit; ``compact_fallback``: compaction used a plain digest because the summary
    failed; ``journal_unavailable``: the run could not be journaled in the store and runs
    without it), ``details`` the underlying error or numbers. The ``Notification`` hook
    fires with the same code."""

    type: Literal["warning"] = "warning"
    message: str
    code: str = ""
    details: str = ""


class ToolStartEvent(_EventBase):
    """The agent is handling a tool call (before permission checks and execution)."""

    type: Literal["tool_start"] = "tool_start"
    call_id: str
    tool_name: str
    arguments: dict[str, Any]


class ToolEndEvent(_EventBase):
    """A tool call finished; ``output`` is exactly what the model sees, with ``images``
    (the checked inline images the tool returned) for a model that takes images."""

    type: Literal["tool_end"] = "tool_end"
    call_id: str
    tool_name: str
    output: str
    is_error: bool = False
    duration: float = 0.0
    images: list[ContentImage] = Field(default_factory=list)


class ToolProgressEvent(_EventBase):
    """A running tool call reported progress (``ToolContext.progress``): ``message`` is
    the tool's plain text, ``fraction`` how much is done (0 to 1) or None.

    Latest wins: the run sends at most one every ``PROGRESS_INTERVAL`` seconds per call
    (0.1), the newest report; none after the call's ``tool_end``.
    """

    type: Literal["tool_progress"] = "tool_progress"
    call_id: str
    tool_name: str
    message: str
    fraction: float | None = None


class PermissionEvent(_EventBase):
    """A permission decision on a tool call, with the evaluation step that made it."""

    type: Literal["permission"] = "permission"
    call_id: str
    tool_name: str
    decision: Literal["allow", "deny", "ask"]
    reason: str = ""
    step: str = ""


class HookEvent(_EventBase):
    """A hook ran at ``hook_event``; ``result`` summarises what it returned (or None)."""

    type: Literal["hook"] = "hook"
    hook_event: str
    result: Any = None


class ApprovalEvent(_EventBase):
    """A tool call's approval changed state."""

    type: Literal["approval"] = "approval"
    call_id: str
    request_id: str
    status: Literal["requested", "approved", "denied", "timeout", "pending_durable"]
    path: str | None = None


class RetryEvent(_EventBase):
    """A transient failure before any chunk: the same model is asked again after
    ``delay`` seconds, as attempt ``attempt`` of at most ``attempts``
    (``1 + ChatModel.retries``); ``error`` is the failure's one-line message."""

    type: Literal["retry"] = "retry"
    attempt: int
    attempts: int
    delay: float
    error: str


class WaitingEvent(_EventBase):
    """The provider has sent nothing for ``seconds``: no reply yet, or (``started``)
    nothing more mid-reply. ``host`` is where the request went (``host:port``, or the
    provider's name); ``limit`` is when the attempt gives up (None: no limit). Sent after a
    quarter and three quarters of the limit (15 and 45 s by default); the kit shows
    ``Still waiting for <host> (45 s)… Stop to give up``."""

    type: Literal["waiting"] = "waiting"
    model: str
    host: str
    seconds: float
    limit: float | None = None
    started: bool = False


class FallbackEvent(_EventBase):
    """A transient failure moved the agent to its next fallback model (it stays there)."""

    type: Literal["fallback"] = "fallback"
    from_model: str
    to_model: str
    error: str


class StructuredAttemptEvent(_EventBase):
    """One attempt at structured output, accepted or not (with the feedback message)."""

    type: Literal["structured_attempt"] = "structured_attempt"
    attempt: int
    accepted: bool
    message: str = ""


class FileCheckpointEvent(_EventBase):
    """A file checkpoint was made (at the start of a run, with file checkpointing on);
    pass ``checkpoint_id`` to ``agent.rewind_files()`` to go back to it."""

    type: Literal["file_checkpoint"] = "file_checkpoint"
    checkpoint_id: str
    name: str | None = None


class TrustedResultEvent(_EventBase):
    """A trusted tool returned: ``value`` is exactly what it returned, for the app
    (see :class:`~deputy_shiny.trusted.TrustedResults`); ``result_trusted_results(result)``
    collects these from an :class:`AgentResult`."""

    type: Literal["trusted_result"] = "trusted_result"
    result_id: str
    result_type: str
    tool_name: str
    call_id: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    value: Any = None


class CompactionStartEvent(_EventBase):
    """The run is compacting its context (it passed ``ContextPolicy.max_tokens``).

    ``tokens`` is the estimated size of the context before compaction.
    """

    type: Literal["compaction_start"] = "compaction_start"
    reason: Literal["auto", "manual"] = "auto"
    tokens: int


class CompactionEvent(_EventBase):
    """Compaction finished (``method``: ``model``, ``hook``, ``supplied``, ``text`` or
    ``cancelled`` when a PreCompact hook cancelled it); tokens are estimates."""

    type: Literal["compaction"] = "compaction"
    method: str
    tokens_before: int
    tokens_after: int
    turns_removed: int


class CompactionErrorEvent(_EventBase):
    """A compaction summary could not be written; ``fallback`` says what happened next
    (``"text"``: a plain digest was used; ``"error"``: the run ends with the error)."""

    type: Literal["compaction_error"] = "compaction_error"
    error: str
    fallback: str


class UsageEvent(_EventBase):
    """The run's usage so far (sent after each request and at the end)."""

    type: Literal["usage"] = "usage"
    usage: AgentUsage


class RunErrorEvent(_EventBase):
    """The run failed with an error (the ``stop`` event follows)."""

    type: Literal["run_error"] = "run_error"
    error: str


class StopEvent(_EventBase):
    """The run ended; always the last event."""

    type: Literal["stop"] = "stop"
    stop_reason: str
    message: str = ""


AgentEvent = Annotated[
    StartEvent
    | RequestStartEvent
    | TextEvent
    | TextCompleteEvent
    | RequestEndEvent
    | RequestErrorEvent
    | ContentEvent
    | TurnEvent
    | WarningEvent
    | ToolStartEvent
    | ToolEndEvent
    | ToolProgressEvent
    | PermissionEvent
    | HookEvent
    | ApprovalEvent
    | RetryEvent
    | WaitingEvent
    | FallbackEvent
    | StructuredAttemptEvent
    | FileCheckpointEvent
    | TrustedResultEvent
    | CompactionStartEvent
    | CompactionEvent
    | CompactionErrorEvent
    | UsageEvent
    | RunErrorEvent
    | StopEvent,
    Field(discriminator="type"),
]
"""Any event of a run; dispatch on ``event.type``."""

# Built on its first use, not at import (as every model here: defer_build).
agent_event_adapter: TypeAdapter[AgentEvent] = TypeAdapter(
    AgentEvent, config=ConfigDict(defer_build=True)
)


class AgentResult(BaseModel):
    """The outcome of one run.

    Attributes:
        response: The final response text (of the last model response).
        turns: The turns this run added to the conversation.
        events: Every event of the run, text chunks included.
        usage: The run's :class:`AgentUsage`.
        cost: The run's :class:`CostSummary`.
        duration: Seconds from start to stop.
        stop_reason: Why the run ended (``"complete"`` when the model finished).
        structured_output: The accepted value when the run asked for ``type=``.
        parent_agent_id / parent_run_id / delegation_id: For a subagent's run, the
            agent and run that delegated it (``parent_run_id`` is None when host code
            sent the task, as ``continue_agent`` from outside a run) and the delegation
            (as in ``list_subagents()``); None for a run its caller started.

    The helpers read it as deputy's do: :meth:`n_turns`, :meth:`tool_calls`,
    :meth:`tool_results`, :meth:`text_chunks` and :meth:`is_success`.

    Examples:
        >>> from deputy_shiny.testing import ScriptedModel
        >>> from deputy_shiny import Agent
        >>> result = Agent(ScriptedModel(["Hello!"])).run_sync("Hi")
        >>> (result.response, result.stop_reason, result.is_success(), result.n_turns())
        ('Hello!', 'complete', True, 2)
        >>> result.text_chunks(), result.tool_calls(), result.parent_agent_id
        (['Hello!'], [], None)
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )

    response: str
    turns: list[Turn]
    events: list[AgentEvent]
    usage: AgentUsage
    cost: CostSummary
    duration: float
    stop_reason: str
    stop_message: str = ""
    structured_output: Any = None
    agent_id: str
    agent_name: str | None = None
    session_id: str
    run_id: str
    run_context: dict[str, Any] = Field(default_factory=dict)
    parent_agent_id: str | None = None
    parent_run_id: str | None = None
    delegation_id: str | None = None

    def n_turns(self) -> int:
        """How many turns the run added to the conversation (the user's included)."""
        return len(self.turns)

    def tool_calls(self) -> list[ContentToolRequest]:
        """Every tool call the model asked for in this run, in order."""
        return [request for turn in self.turns for request in turn.tool_requests]

    def tool_results(self) -> list[ContentToolResult]:
        """Every tool result the model was sent in this run, in order (calls that did not
        run have their "not run" error result here too)."""
        return [result for turn in self.turns for result in turn.tool_results]

    def text_chunks(self) -> list[str]:
        """The streamed text, chunk by chunk, as the ``text`` events carried it."""
        return [event.text for event in self.events if event.type == "text"]

    def is_success(self) -> bool:
        """True when the model finished (stop reason ``complete``); a limit, an error,
        an interruption or a pending approval is not a success."""
        return self.stop_reason == "complete"
