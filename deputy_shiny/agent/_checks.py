"""The Agent's argument checks: each constructor argument is checked here, with an
error that names it (private helpers of :mod:`deputy_shiny.agent._agent`)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..approvals import ApprovalHandler
from ..context import ContextPolicy
from ..errors import ConfigurationError, ContextPolicyError, InvalidLimitError
from ..models._chatlas import is_chatlas_chat
from ..permissions import Permissions, permissions_standard
from ..usage import UsageLimits


def add_callback(registry: list[Any], callback: Callable[..., object]) -> Callable[[], None]:
    if not callable(callback):
        raise ConfigurationError("callback must be callable")
    registry.append(callback)

    def remove() -> None:
        if callback in registry:
            registry.remove(callback)

    return remove


def checked_limits(usage_limits: UsageLimits | None) -> UsageLimits:
    """The agent's limits: 25 requests a run unless given."""
    if usage_limits is None:
        return UsageLimits(max_requests=25)
    if not isinstance(usage_limits, UsageLimits):
        raise InvalidLimitError(
            f"usage_limits must be a UsageLimits, not {type(usage_limits).__name__}"
        )
    return usage_limits


def checked_context_policy(policy: ContextPolicy | None) -> ContextPolicy:
    if policy is None:
        return ContextPolicy()
    if not isinstance(policy, ContextPolicy):
        raise ContextPolicyError(
            f"context_policy must be a ContextPolicy, not {type(policy).__name__}"
        )
    return policy


def checked_permissions(permissions: Permissions | None) -> Permissions:
    if permissions is None:
        return permissions_standard()
    if not isinstance(permissions, Permissions):
        raise ConfigurationError(
            f"permissions must be a Permissions (e.g. permissions_standard()), not "
            f"{type(permissions).__name__}"
        )
    return permissions


def checked_handler(handler: ApprovalHandler | None) -> ApprovalHandler | None:
    if handler is not None and not callable(handler):
        raise ConfigurationError("approval_handler must be an async function (request) -> decision")
    return handler


def optional_text(value: str | None, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ConfigurationError(f"{name} must be a string or None")
    return value


def existing_dir(path: str | os.PathLike[str] | None, name: str = "working_dir") -> Path:
    resolved = Path(os.getcwd() if path is None else path).expanduser()
    if not resolved.is_dir():
        raise ConfigurationError(f"{name} {str(resolved)!r} does not exist or is not a directory")
    return resolved.resolve()


def identifier(value: str | None, name: str, prefix: str) -> str:
    if value is None:
        return f"{prefix}_{uuid.uuid4().hex}"
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{name} must be a non-empty string")
    return value


def check_new_chat(chat: object) -> None:
    """Refuse a chatlas ``Chat`` for ``set_chat`` that has turns or tools (they would not
    move to the agent: nothing but its model is read)."""
    if not is_chatlas_chat(chat):
        return
    if chat.get_turns():  # type: ignore[attr-defined]
        raise ConfigurationError(
            "set_chat takes a Chat with no turns: its turns would not move to the agent "
            "(set them with agent.set_turns())."
        )
    if chat.get_tools():  # type: ignore[attr-defined]
        raise ConfigurationError(
            "set_chat takes a Chat with no tools: its tools would not move to the agent "
            "(register them with agent.register_tools())."
        )
