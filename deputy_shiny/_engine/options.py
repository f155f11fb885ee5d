"""RunOptions: what one run was asked to do, checked before it starts.

:func:`build_run_options` turns the arguments of ``Agent.run`` (and friends) into a
:class:`RunOptions`: the task as a user turn, the limits clamped to the agent's, the
merged run context and the structured-output settings. Bad arguments raise at once,
before any request.

Example:
    >>> from deputy_shiny.usage import UsageLimits
    >>> options = build_run_options(
    ...     "Hi", agent_limits=UsageLimits(max_requests=5), agent_run_context={},
    ...     usage_limits=UsageLimits(max_requests=50), include_partial_messages=True,
    ...     run_context=None, output_type=None, validate=None, max_corrections=0,
    ...     tool_mode="concurrent",
    ... )
    >>> options.prompt.text, options.limits.max_requests
    ('Hi', 5)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import TypeAdapter

from .._util.metadata import merge_run_context
from ..errors import ConfigurationError, InvalidLimitError
from ..messages import ContentImage, ContentText, Turn, UserContent, user_turn
from ..usage import UsageLimits
from .durable import Resumption
from .structured import Validator

__all__ = ["RunOptions", "TaskInput", "ToolMode", "build_run_options"]

TaskInput = str | Turn | ContentText | ContentImage | Sequence[UserContent]
"""What a task may be: text, content objects, or a user turn."""

ToolMode = Literal["concurrent", "sequential"]
"""How one response's tool calls run: in parallel, or one after another."""


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
    # A durable approval being resumed: the run starts by applying its decision to the
    # saved call, instead of adding ``prompt`` to the conversation.
    resume: Resumption | None = None


def build_run_options(
    task: TaskInput,
    *,
    agent_limits: UsageLimits,
    agent_run_context: dict[str, Any],
    usage_limits: UsageLimits | None,
    include_partial_messages: bool,
    run_context: dict[str, Any] | None,
    output_type: Any,
    validate: Validator | None,
    max_corrections: int,
    tool_mode: ToolMode,
) -> RunOptions:
    """Check a run's arguments at once and combine them with the agent's settings.

    A per-run limit looser than the agent's is clamped to it; ``run_context`` is
    merged into the agent's (it cannot change ID fields).
    """
    if usage_limits is not None and not isinstance(usage_limits, UsageLimits):
        raise InvalidLimitError(
            f"usage_limits must be a UsageLimits, not {type(usage_limits).__name__}"
        )
    limits = agent_limits if usage_limits is None else usage_limits.clamp_to(agent_limits)
    if isinstance(max_corrections, bool) or not isinstance(max_corrections, int):
        raise ConfigurationError("max_corrections must be a whole number")
    if max_corrections < 0:
        raise ConfigurationError("max_corrections must be 0 or more")
    if validate is not None and not callable(validate):
        raise ConfigurationError("validate must be a function")
    if tool_mode not in ("concurrent", "sequential"):
        raise ConfigurationError('tool_mode must be "concurrent" or "sequential"')
    return RunOptions(
        prompt=_task_turn(task),
        limits=limits,
        run_context=merge_run_context(agent_run_context, run_context or {}),
        include_partial_messages=include_partial_messages,
        output_type=None if output_type is None else _output_adapter(output_type),
        validate=validate,
        max_corrections=max_corrections,
        tool_mode=tool_mode,
    )


def _task_turn(task: TaskInput) -> Turn:
    if isinstance(task, Turn):
        if task.role != "user":
            raise ConfigurationError("A task turn must have role 'user'")
        return task
    if isinstance(task, str | ContentText | ContentImage):
        return user_turn(task)
    if isinstance(task, Sequence):
        return user_turn(*task)
    raise ConfigurationError(f"Cannot use a {type(task).__name__} as a task")


def _output_adapter(output_type: Any) -> TypeAdapter[Any]:
    """A validator and JSON schema for ``type=``, or a ConfigurationError at once."""
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        adapter.json_schema()
    except Exception as exc:
        raise ConfigurationError(
            f"type={output_type!r} cannot be described as JSON schema; use a pydantic model, "
            f"a dataclass, a TypedDict or a type such as list[int] ({exc})"
        ) from None
    return adapter
