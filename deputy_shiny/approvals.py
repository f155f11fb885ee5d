"""Human approval of tool calls: what a UI is asked, and what it answers.

When the permission evaluation ends in ASK, the agent awaits its
``approval_handler(request) -> ApprovalDecision``. The request carries an unguessable
``request_id`` (the routing key a UI answers with; never the model's call id, which
a model or a prompt injection could predict), the tool's description, annotations,
arguments and input schema, so a UI can show the call and let a person edit typed
values. When no one can answer live, the engine hands a durable store a
:class:`Suspension` (the paused call and the run around it).

Examples:
    >>> from deputy_shiny.approvals import ApprovalDecision
    >>> ApprovalDecision.approve(updated_input={"path": "notes.txt"}).updated_input
    {'path': 'notes.txt'}
    >>> ApprovalDecision.deny("not today").message
    'not today'
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .identity import CallIdentity
from .messages import ContentToolRequest, ContentToolResult, Turn
from .usage import AgentUsage, UsageLimits


def new_request_id() -> str:
    """An unguessable id for one approval request (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


class ApprovalRequest(BaseModel):
    """A tool call waiting for a human.

    Attributes:
        request_id: Unguessable routing key; answer with it, never with ``call_id``.
        call_id: The model's id for the call (for display only).
        tool_name / description: What would run.
        annotations: The tool's annotations as supplied (missing ones absent).
        arguments: The validated arguments the call would run with.
        input_schema: The tool's JSON schema, so a UI can edit typed values.
        reason: Why approval is needed (an approval rule, the callback, a hook).
        agent_id / session_id / run_id: Whose call it is.
        calls_after: Tool calls of the same model response still to be decided after
            this one (a UI can show "1 of N waiting" and offer to stop them all).

    Examples:
        >>> r = ApprovalRequest(call_id="c1", tool_name="write_file", description="Write",
        ...                     arguments={"path": "a.txt"}, input_schema={}, reason="writes")
        >>> len(r.request_id) > 30, r.identity.call_id
        (True, 'c1')
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    request_id: str = Field(default_factory=new_request_id)
    call_id: str
    tool_name: str
    description: str = ""
    annotations: dict[str, bool] = Field(default_factory=dict)
    arguments: dict[str, Any] = Field(default_factory=dict)
    input_schema: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""
    agent_id: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    calls_after: int = 0

    @property
    def identity(self) -> CallIdentity:
        """Whose call it is, as one :class:`~deputy_shiny.identity.CallIdentity`.

        (The ids stay flat fields too: durable approval files and UIs read them.)
        """
        return CallIdentity(
            agent_id=self.agent_id,
            session_id=self.session_id,
            run_id=self.run_id,
            call_id=self.call_id,
        )


class ApprovalDecision(BaseModel):
    """A human's answer to an :class:`ApprovalRequest`.

    Build one with :meth:`approve`, :meth:`deny`, :meth:`approve_always` or
    :meth:`stop_run`. Edited input (``updated_input``) is checked again by the whole
    permission policy.

    Examples:
        >>> ApprovalDecision.approve_always().always
        True
        >>> ApprovalDecision.stop_run().stop
        True
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    approved: bool
    updated_input: dict[str, Any] | None = None
    message: str | None = None
    always: bool = False
    stop: bool = False

    @model_validator(mode="after")
    def _stop_is_a_denial(self) -> ApprovalDecision:
        if self.stop and self.approved:
            raise ValueError("a decision that stops the run cannot approve the call")
        return self

    @classmethod
    def approve(cls, updated_input: dict[str, Any] | None = None) -> ApprovalDecision:
        """Run the call (with ``updated_input`` instead of the model's, if given)."""
        return cls(approved=True, updated_input=updated_input)

    @classmethod
    def deny(cls, message: str | None = None) -> ApprovalDecision:
        """Refuse the call; ``message`` is told to the model."""
        return cls(approved=False, message=message)

    @classmethod
    def approve_always(cls) -> ApprovalDecision:
        """Run the call, and approve this tool for the rest of the conversation."""
        return cls(approved=True, always=True)

    @classmethod
    def stop_run(cls, message: str | None = None) -> ApprovalDecision:
        """Refuse the call and end the run: no call of this response runs (not even
        ones approved before it), no further request is made, and the run stops with
        ``interrupted``. For a person facing a flood of approvals."""
        return cls(approved=False, stop=True, message=message)


PROMPT_ANSWER_MAX_CHARS = 64 * 1024


def prompt_tool_decision(value: object) -> ApprovalDecision | str:
    """A permission prompt tool's answer as a decision, or why it is no answer.

    The answer is untrusted (a remote service, or text shaped by whatever reached it),
    so only exactly this approves: a JSON object (or a dict) whose ``behavior`` is
    ``"allow"``, with an optional ``updatedInput`` object (checked again by the policy,
    as a person's edit is). ``{"behavior": "deny"}`` denies with its ``message`` (a
    string), and ``"interrupt": true`` also stops the run. Anything else (prose,
    JSON inside prose, another behavior, a wrong type, over 64 KiB) is a string saying
    what is wrong, and the call is denied.

    Examples:
        >>> prompt_tool_decision('{"behavior": "allow"}').approved
        True
        >>> prompt_tool_decision('{"behavior": "deny", "message": "No."}').message
        'No.'
        >>> prompt_tool_decision('Sure! {"behavior": "allow"}')
        'the answer is not a JSON object'
    """
    import json

    if isinstance(value, str):
        if len(value) > PROMPT_ANSWER_MAX_CHARS:
            return f"the answer is over {PROMPT_ANSWER_MAX_CHARS // 1024} KiB"
        try:
            value = json.loads(value)
        except ValueError:
            return "the answer is not a JSON object"
    if not isinstance(value, dict):
        return "the answer is not a JSON object"
    behavior = value.get("behavior")
    if behavior == "allow":
        edited = value.get("updatedInput")
        if edited is not None and not isinstance(edited, dict):
            return "its updatedInput is not an object"
        return ApprovalDecision.approve(updated_input=edited)
    if behavior == "deny":
        message = value.get("message")
        if message is not None and not isinstance(message, str):
            return "its message is not a string"
        interrupt = value.get("interrupt", False)
        if not isinstance(interrupt, bool):
            return "its interrupt is not true or false"
        return ApprovalDecision(approved=False, message=message, stop=interrupt)
    return f'its behavior is {str(behavior)[:40]!r}, not "allow" or "deny"'


ApprovalStatus = Literal["requested", "approved", "denied", "timeout", "pending_durable"]

ApprovalHandler = Callable[[ApprovalRequest], Awaitable[ApprovalDecision]]
"""``async (ApprovalRequest) -> ApprovalDecision``; raising TimeoutError means timeout."""


@dataclass(frozen=True)
class Suspension:
    """One paused tool call, as the engine hands it to a durable approval store.

    Here, beside the request it carries, because both sides use it: the engine
    (``_engine/durable.py``) makes it and :mod:`deputy_shiny.persistence.approvals`
    saves it, and neither imports the other's folder for it.

    Attributes:
        request: The approval request (the paused call, its validated JSON arguments).
        calls: Every tool call of the paused response, in order (ids preserved).
        results: The results so far: calls that ran (or were refused) before the pause,
            and the calls after it, each answered the engine's ``NOT_EXECUTED`` note.
        turns: The conversation up to and including the response that made the calls.
        usage: The run's usage so far (it still counts toward the limits on resume).
        limits: The run's limits.
        run_id / run_context: The run that paused.
    """

    request: ApprovalRequest
    calls: tuple[ContentToolRequest, ...]
    results: tuple[ContentToolResult, ...]
    turns: tuple[Turn, ...]
    usage: AgentUsage
    limits: UsageLimits
    run_id: str
    run_context: dict[str, Any]
