"""RunOptions: what one run was asked to do, checked before it starts.

:class:`RunKeywords` declares, once, the keywords every run method of the Agent takes
(``run``, ``run_async``, ``run_sync``, ``chat*``, ``stream*``); :func:`build_run_options`
turns them into a :class:`RunOptions`: the task as a user turn, the limits clamped to the
agent's, the merged run context and the structured-output settings. Bad arguments raise
at once, before any request.

Examples:
    >>> from deputy_shiny.usage import UsageLimits
    >>> options = build_run_options(
    ...     "Hi", agent_limits=UsageLimits(max_requests=5), agent_run_context={},
    ...     keywords={"usage_limits": UsageLimits(max_requests=50)},
    ... )
    >>> options.prompt.text, options.limits.max_requests
    ('Hi', 5)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from pydantic import TypeAdapter

from .._util.metadata import merge_run_context
from ..errors import ConfigurationError, InvalidLimitError
from ..messages import ContentImage, ContentText, Turn, UserContent, user_turn
from ..usage import UsageLimits
from .durable import Resumption
from .journal import Replay
from .structured import Validator

__all__ = [
    "RunKeywords",
    "RunOptions",
    "StructuredKeywords",
    "TaskInput",
    "ToolMode",
    "build_run_options",
]

TaskInput = str | Turn | ContentText | ContentImage | Sequence[UserContent]
"""What a task may be: text, content objects, or a user turn."""

ToolMode = Literal["concurrent", "sequential"]
"""How one response's tool calls run: in parallel, or one after another."""


class _OptionKeywords(TypedDict, total=False):
    # RunKeywords without ``type``, which StructuredKeywords makes required.
    usage_limits: UsageLimits | None
    run_context: dict[str, Any] | None
    validate: Validator | None
    max_corrections: int
    tool_mode: ToolMode


class RunKeywords(_OptionKeywords, total=False):
    """The keywords every run method takes, all optional: ``run``, ``run_async``,
    ``run_sync``, ``chat``, ``chat_async``, ``stream`` and ``stream_async`` (as
    ``**kwargs: Unpack[RunKeywords]``, so a type checker rejects any other keyword, and
    so does the run, with a ``TypeError``).

    Attributes:
        usage_limits: Limits for this run (a :class:`~deputy_shiny.usage.UsageLimits`);
            None fields use the agent's, and a looser value is clamped to the agent's.
        run_context: Merged into the agent's; it cannot change ID fields (keys ending
            in ``id``) the agent sets.
        type: A type (pydantic model, dataclass, ``list[int]``...) to extract from the
            conversation after the task into ``result.structured_output``.
        validate: Checks the extracted value: True accepts, False or a message rejects
            (the message is the model's feedback). Anything else, or an exception, ends
            the run with an error.
        max_corrections: How often a rejected value may be corrected (default 0).
        tool_mode: ``"concurrent"`` (the default) runs one response's tool calls in
            parallel, ``"sequential"`` one after another.

    Examples:
        >>> from deputy_shiny import Agent, UsageLimits
        >>> from deputy_shiny.agent import RunKeywords
        >>> from deputy_shiny.testing import ScriptedModel
        >>> keywords: RunKeywords = {"usage_limits": UsageLimits(max_requests=1)}
        >>> Agent(ScriptedModel(["Done."])).run_sync("Go", **keywords).usage.requests
        1
    """

    type: Any


class StructuredKeywords(_OptionKeywords):
    """:class:`RunKeywords` with ``type`` required (``chat_structured``)."""

    type: Any


_KEYWORDS = RunKeywords.__required_keys__ | RunKeywords.__optional_keys__


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
    # A journaled run being resumed after its process died: it goes on from its last
    # journaled step, instead of adding ``prompt``.
    replay: Replay | None = None


def build_run_options(
    task: TaskInput,
    *,
    agent_limits: UsageLimits,
    agent_run_context: dict[str, Any],
    keywords: Mapping[str, Any],
    include_partial_messages: bool = True,
) -> RunOptions:
    """Check a run's arguments at once and combine them with the agent's settings.

    ``keywords`` are the run's :class:`RunKeywords` (any other key is a ``TypeError``).
    A per-run limit looser than the agent's is clamped to it; ``run_context`` is
    merged into the agent's (it cannot change ID fields).
    """
    unknown = sorted(set(keywords) - _KEYWORDS)
    if unknown:
        raise TypeError(
            f"Unexpected keyword argument {unknown[0]!r} for a run; a run takes "
            f"{', '.join(sorted(_KEYWORDS))} (see deputy_shiny.agent.RunKeywords)"
        )
    usage_limits = keywords.get("usage_limits")
    run_context = keywords.get("run_context")
    output_type = keywords.get("type")
    validate = keywords.get("validate")
    max_corrections = keywords.get("max_corrections", 0)
    tool_mode = keywords.get("tool_mode", "concurrent")
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
    if not isinstance(include_partial_messages, bool):
        raise ConfigurationError("include_partial_messages must be True or False")
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
