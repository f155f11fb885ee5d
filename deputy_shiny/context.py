"""Context policy: when a conversation is compacted, and where large tool results go.

Every :class:`~deputy_shiny.agent.Agent` has a :class:`ContextPolicy`. Before a model
request whose context (system prompt, summary, the turns the model sees, tool
schemas) passes ``max_tokens``, the run asks the model to summarise the older turns,
puts the summary in the system prompt under "Previous Conversation Summary", and keeps
only the newest turns in the model's view (``agent.get_turns()`` keeps everything;
``agent.get_context_turns()`` is what the model sees). A tool result larger than
``max_tool_result_bytes`` is saved under ``offload_dir`` and the model sees a
``deputy://tool-result/<id>`` reference with a preview, which the built-in
``read_tool_result`` tool pages through.

Token counts are estimates, made with litellm's token counter (its bundled tiktoken
encoding, offline, whatever the provider).

Examples:
    >>> from deputy_shiny.context import ContextPolicy
    >>> policy = ContextPolicy(max_tokens=8000, fallback="text")
    >>> policy.compact_to, policy.max_tool_result_bytes
    (0.5, 65536)
    >>> ContextPolicy(compact_to=2)
    Traceback (most recent call last):
    ...
    deputy_shiny.errors.ContextPolicyError: Invalid ContextPolicy: compact_to: ...
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ._util.config import FrozenConfig
from .errors import ConfigurationError, ContextPolicyError, ToolResultReferenceError
from .models import ChatModel, resolve_model

__all__ = [
    "DEFAULT_MICROCOMPACT_MARKER",
    "SUMMARY_HEADING",
    "TOOL_RESULT_SCHEME",
    "CompactionMethod",
    "CompactionRecord",
    "ContextPolicy",
    "parse_tool_result_reference",
]

SUMMARY_HEADING = "## Previous Conversation Summary"
"""The heading the compaction summary sits under, at the end of the system prompt."""

DEFAULT_MICROCOMPACT_MARKER = "[Old tool result cleared to save context.]"
"""What :meth:`~deputy_shiny.agent.Agent.microcompact` puts in place of a cleared result."""

TOOL_RESULT_SCHEME = "deputy://tool-result/"
"""The prefix of every offloaded tool result's reference."""

# An id is 32 url-safe base64 characters (24 random bytes): unguessable, and nothing
# that could name a path (no dots, no slashes).
_REFERENCE = re.compile(r"deputy://tool-result/([A-Za-z0-9_-]{32})(?![A-Za-z0-9_/-])")

CompactionMethod = Literal["model", "hook", "supplied", "text", "cancelled"]


class ContextPolicy(FrozenConfig):
    """When an agent compacts its conversation and where large tool results are stored.

    Attributes:
        max_tokens: Estimated context size (system prompt, summary, context turns, tool
            schemas) above which a run compacts before its next request; None never
            compacts automatically.
        compact_to: The fraction of ``max_tokens`` the context should occupy after
            compaction (the newest turns that fit are kept).
        fallback: When no model can write the summary: ``"error"`` fails (a
            :class:`~deputy_shiny.errors.CompactionError`, or a run ending in error);
            ``"text"`` uses a plain digest (the first 200 characters of each turn).
        max_tool_result_bytes: A tool result larger than this (UTF-8 bytes) is saved
            under ``offload_dir`` and replaced by a reference and a preview; without an
            ``offload_dir`` it is cut to this size instead. None: no limit.
        max_tool_result_image_bytes / max_tool_result_images: Bounds on images in tool
            results (tool results carry text only today; kept for providers that return
            images).
        offload_dir: Where large tool results are saved (created on first use); None
            keeps results in the conversation (cut to the byte limit).
        summary_fallback_models: Models that write the summary, in order, when the
            agent's model cannot (the agent's ``fallback_models`` are not used).

    Examples:
        >>> ContextPolicy(max_tokens=None).max_tokens is None
        True
    """

    _config_error: ClassVar[type[ConfigurationError]] = ContextPolicyError
    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )

    max_tokens: int | None = Field(default=32000, ge=64, strict=True)
    compact_to: float = Field(default=0.5, gt=0.0, lt=1.0)
    fallback: Literal["error", "text"] = "error"
    max_tool_result_bytes: int | None = Field(default=64 * 1024, ge=256, strict=True)
    max_tool_result_image_bytes: int = Field(default=2 * 1024 * 1024, ge=0, strict=True)
    max_tool_result_images: int = Field(default=4, ge=0, strict=True)
    offload_dir: Path | None = None
    summary_fallback_models: tuple[ChatModel, ...] = ()

    @field_validator("offload_dir", mode="before")
    @classmethod
    def _absolute_dir(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, str | Path) or not str(value).strip():
            raise ValueError("must be a directory path or None")
        path = Path(value).expanduser().resolve()
        if path.exists() and not path.is_dir():
            raise ValueError(f"{str(path)!r} exists and is not a directory")
        return path

    @field_validator("summary_fallback_models", mode="before")
    @classmethod
    def _models(cls, value: Any) -> Any:
        if isinstance(value, str | ChatModel) or not hasattr(value, "__iter__"):
            raise ValueError("must be a list of models")
        try:
            return tuple(resolve_model(m) for m in value)
        except ConfigurationError as exc:
            raise ValueError(str(exc)) from None


class CompactionRecord(BaseModel):
    """What one compaction did (``agent.last_compaction()``).

    Attributes:
        method: ``"model"`` (a model wrote the summary), ``"hook"`` (a PreCompact hook
            supplied it), ``"supplied"`` (``compact(summary=...)``), ``"text"`` (the
            plain digest fallback) or ``"cancelled"`` (a PreCompact hook cancelled it).
        tokens_before / tokens_after: Estimated context size before and after.
        turns_removed: Turns taken out of the model's context (kept in ``get_turns()``).
        automatic: True when a run compacted on its own.
        model: The model that wrote the summary, for ``"model"``.
        at: When it happened (seconds since the epoch).

    Examples:
        >>> CompactionRecord(method="text", tokens_before=9000, tokens_after=3000,
        ...                  turns_removed=12).turns_removed
        12
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    method: CompactionMethod
    tokens_before: int
    tokens_after: int
    turns_removed: int
    automatic: bool = False
    model: str | None = None
    at: float = Field(default_factory=time.time)


def parse_tool_result_reference(text: str) -> str:
    """The id in a ``deputy://tool-result/<id>`` reference (or text containing one).

    Raises:
        ToolResultReferenceError: no well-formed reference in ``text`` (a path, a
            traversal or a forged shape never parses).

    Examples:
        >>> parse_tool_result_reference("see deputy://tool-result/" + "a" * 32 + " for more")
        'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'
        >>> parse_tool_result_reference("deputy://tool-result/../../etc/passwd")
        Traceback (most recent call last):
        ...
        deputy_shiny.errors.ToolResultReferenceError: ...
    """
    if not isinstance(text, str):
        raise ToolResultReferenceError("A tool result reference must be a string.")
    found = _REFERENCE.search(text)
    if found is None:
        raise ToolResultReferenceError(
            "No tool result reference found: expected deputy://tool-result/ followed by a "
            "32-character id, as in the placeholder the model saw."
        )
    return found.group(1)
