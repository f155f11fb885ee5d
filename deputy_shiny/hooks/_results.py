"""What callbacks return to change a run: the ``HookResult*`` values."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from .._util.config import FrozenConfig
from ..errors import ConfigurationError, InvalidHookError


class HookResultPreToolUse(FrozenConfig):
    """What a ``PreToolUse`` callback returns to change a tool call (None changes nothing).

    Attributes:
        permission: ``"deny"`` refuses the call, ``"ask"`` sends an allowed call to a
            person, ``"allow"`` changes nothing (it can never lift a denial). None
            leaves the decision alone.
        reason: Why; the model sees it when the call is denied.
        updated_input: Replacement arguments. They are checked again like the model's.
        additional_context: Text added to what the model sees with the tool result.
        continue_: False ends the run after this call (stop reason
            ``hook_requested_stop``).
        stop_reason: The message recorded when ``continue_`` is False.

    Examples:
        >>> HookResultPreToolUse(permission="deny", reason="not on Fridays").permission
        'deny'
    """

    _config_error: ClassVar[type[ConfigurationError]] = InvalidHookError

    permission: Literal["allow", "deny", "ask"] | None = None
    reason: str = Field(default="", strict=True)
    updated_input: dict[str, Any] | None = Field(default=None, strict=True)
    additional_context: str | None = Field(default=None, strict=True)
    continue_: bool = Field(default=True, strict=True)
    stop_reason: str | None = Field(default=None, strict=True)


class HookResultPostToolUse(FrozenConfig):
    """What a ``PostToolUse`` callback returns to change a tool's result (None changes nothing).

    Attributes:
        updated_tool_output: Replaces the output the model sees (None keeps it).
        suppress_output: True withholds the output from the model.
        additional_context: Text added to what the model sees with the tool result (as
            deputy's; after the output, or after the withheld-output note).
        continue_: False ends the run after this call (stop reason
            ``hook_requested_stop``).
        stop_reason: The message recorded when ``continue_`` is False.

    Unlike deputy's, where the model keeps the tool's own output, ``updated_tool_output``
    and ``suppress_output`` change what the model sees, not only the ``tool_end`` event.

    Examples:
        >>> HookResultPostToolUse(updated_tool_output="[redacted]").updated_tool_output
        '[redacted]'
        >>> HookResultPostToolUse(additional_context="Check the log too.").additional_context
        'Check the log too.'
    """

    _config_error: ClassVar[type[ConfigurationError]] = InvalidHookError

    updated_tool_output: Any = None
    suppress_output: bool = Field(default=False, strict=True)
    additional_context: str | None = Field(default=None, strict=True)
    continue_: bool = Field(default=True, strict=True)
    stop_reason: str | None = Field(default=None, strict=True)


class HookResultPreCompact(FrozenConfig):
    """What a ``PreCompact`` callback returns: cancel compaction, or supply the summary.

    Compaction (automatic, or ``agent.compact()``) fires ``PreCompact`` first; the first
    callback that returns one decides.

    Attributes:
        continue_: False cancels this compaction.
        summary: Use this summary instead of asking the model for one.

    Examples:
        >>> HookResultPreCompact(summary="We fixed the parser.").continue_
        True
    """

    _config_error: ClassVar[type[ConfigurationError]] = InvalidHookError

    continue_: bool = Field(default=True, strict=True)
    summary: str | None = Field(default=None, strict=True)


_RESULT_TYPES: dict[str, type[FrozenConfig]] = {
    "PreToolUse": HookResultPreToolUse,
    "PostToolUse": HookResultPostToolUse,
    "PreCompact": HookResultPreCompact,
}
