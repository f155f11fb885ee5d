"""What one run of the engine carries: its state, a finished call's outcome, and the
error results every part of the engine makes the same way (private)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..conversation import Conversation
from ..events import (
    AgentEvent,
    AgentUsage,
)
from ..hooks import HookRun
from ..messages import (
    ContentToolRequest,
    ContentToolResult,
    Turn,
)
from ..models import ChatModel
from ..models._provider import (
    Response,
)
from ..tools import Tool
from .budget import Meter, SharedBudget
from .deps import RunDeps
from .gate import ToolGate, Verdict
from .journal import RunJournal
from .observer import RunObserver
from .options import RunOptions

NOT_RUN = "Tool call not run: {why}."
TEXT_FIELDS = frozenset(
    {
        "agent_id",
        "session_id",
        "run_id",
        "run_context",
        "timestamp",
        "parent_agent_id",
        "parent_run_id",
        "delegation_id",
        "type",
        "text",
    }
)
LOOP_REPEATS = 3


@dataclass
class Outcome:
    """A finished tool call: its result and what the after-call hooks did."""

    result: ContentToolResult
    duration: float = 0.0
    hook_runs: list[HookRun] = field(default_factory=list)  # PostToolUse(, ...Failure)
    stop: str | None = None
    events: list[AgentEvent] = field(default_factory=list)  # e.g. a trusted_result


Ready = tuple[ContentToolRequest, Tool, dict[str, Any], "Verdict"]


@dataclass
class RunState:
    run_id: str
    options: RunOptions
    deps: RunDeps
    conversation: Conversation
    model: ChatModel
    gate: ToolGate = field(init=False)
    meter: Meter = field(init=False)  # its usage; its budget is shared with delegations
    fallbacks_used: int = 0
    started: float = field(default_factory=time.monotonic)
    events: list[AgentEvent] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
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
    turn_number: int = 0  # the run's model turns so far (the ``turn`` events count them)
    cost_warned: bool = False  # the cost_limit_warning was sent (once a run)
    observer: RunObserver | None = None  # tracing (None: off)
    journal: RunJournal | None = None  # the run journal (None: not journaled)

    @property
    def budget(self) -> SharedBudget:
        return self.meter.budget

    def usage(self) -> AgentUsage:
        return self.meter.usage()

    def record(self, kind: str, data: dict[str, Any]) -> None:
        """Journal a step (nothing without a journal)."""
        if self.journal is not None:
            self.journal.record(kind, data, self.usage())

    def stop(self, reason: str, message: str = "") -> None:
        if self.stop_reason is None:
            self.stop_reason, self.stop_message = reason, message


MAX_ERROR_CHARS = 4_000
"""The most characters an error result carries: a tool's error may quote a huge argument
(a 10 MB path), which would otherwise ride in the conversation, every later request and
the UI."""


def error_result(request: ContentToolRequest, message: str) -> ContentToolResult:
    if len(message) > MAX_ERROR_CHARS:
        cut = len(message) - MAX_ERROR_CHARS
        message = (
            f"{message[: MAX_ERROR_CHARS * 3 // 4]}\n[... {cut:,} characters of this error cut ...]"
            f"\n{message[-MAX_ERROR_CHARS // 4 :]}"
        )
    return ContentToolResult(call_id=request.id, name=request.name, output=message, is_error=True)
