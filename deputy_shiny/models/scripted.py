"""ScriptedModel and FunctionModel: test models that are real litellm providers.

Import them from :mod:`deputy_shiny.testing` (its docstring has the example). Each
model registers its own litellm ``CustomLLM`` provider name through
:mod:`deputy_shiny.models._custom_provider` and records every request.

Examples:
    >>> from deputy_shiny.testing import ScriptedModel
    >>> ScriptedModel(["Hi"]).remaining
    1
"""

from __future__ import annotations

import threading
import uuid
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, ClassVar, TypeAlias

from pydantic import PrivateAttr

from ..errors import ConfigurationError, ScriptedModelExhausted
from . import _custom_provider, _litellm
from ._chat_model import ChatModel
from ._replies import ProviderFailure, Reply, ScriptedReply, ScriptedToolCall

__all__ = [
    "FunctionModel",
    "ProviderFailure",
    "ScriptedModel",
    "ScriptedModelExhausted",
    "ScriptedReply",
    "ScriptedToolCall",
]


class _ScriptedChatModel(ChatModel):
    """A ChatModel that keeps its test model alive (so its provider stays registered)."""

    _source: Any = PrivateAttr(default=None)


class _TestModel:
    """Shared machinery: an own litellm provider, request log, unregistration on collection."""

    _kind: ClassVar[str] = "scripted"

    def __init__(self, retries: int = 0, *, vision: bool = True, audio_input: bool = True) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 10:
            raise ConfigurationError(f"retries must be an int from 0 to 10, not {retries!r}")
        for name, flag in (("vision", vision), ("audio_input", audio_input)):
            if not isinstance(flag, bool):
                raise ConfigurationError(f"{name} must be True or False, not {flag!r}")
        # No retries unless asked: each scripted reply then answers exactly one request.
        self._retries = retries
        self.requests: list[dict[str, Any]] = []
        self._provider = f"deputy-scripted-{uuid.uuid4().hex[:12]}"
        # What the model cannot take, by litellm's check names (supports_images() asks).
        lacks = [
            c
            for c, has in (("supports_vision", vision), ("supports_audio_input", audio_input))
            if not has
        ]
        _custom_provider.register_source(self._provider, self, weak=True, lacks=lacks)
        finalizer = weakref.finalize(self, _litellm.forget_provider, self._provider)
        finalizer.atexit = False

    def as_chat_model(self) -> ChatModel:
        """The :class:`~deputy_shiny.models.ChatModel` that sends requests to this model.

        The returned ChatModel keeps this model alive, so an agent holding only the
        ChatModel still reaches it.

        Examples:
            >>> ScriptedModel(["Hi"]).as_chat_model().model.endswith("/scripted")
            True
        """
        # A test model retries at once: a test waits for nothing.
        chat_model = _ScriptedChatModel(
            model=f"{self._provider}/{self._kind}", retries=self._retries, retry_delay=0.0
        )
        chat_model._source = self
        return chat_model

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._provider}, {len(self.requests)} requests>"

    def _scripted_response(self, request: dict[str, Any]) -> object:
        raise NotImplementedError


class ScriptedModel(_TestModel):
    """A test model that answers each request with the next scripted reply, in order.

    A str reply is ``ScriptedReply(text=...)``. An exception reply makes the request
    itself fail (``await litellm.acompletion(...)`` raises, before any chunk);
    :class:`ProviderFailure` becomes the litellm exception for its status, other
    litellm exceptions are raised as they are. A request after the last reply raises
    :class:`ScriptedModelExhausted`. ``requests`` records every request as
    ``{"messages": [...], "tools": [...], "params": {...}}``. ``retries`` (default 0, so
    each reply answers one request) is the model's :attr:`ChatModel.retries`: a
    transient failure is then retried at once, taking the next reply. ``vision=False``
    / ``audio_input=False`` make a model that takes no images / no audio, as litellm
    says of many real ones: the images and sound tools return then reach it as a note.

    Examples:
        >>> from deputy_shiny import Agent
        >>> model = ScriptedModel(["Paris.", ProviderFailure(429)])
        >>> Agent(model).chat("Capital of France?")
        'Paris.'
        >>> model.requests[0]["messages"][-1]
        {'role': 'user', 'content': 'Capital of France?'}
    """

    _kind = "scripted"

    def __init__(
        self,
        responses: Iterable[Reply],
        *,
        retries: int = 0,
        vision: bool = True,
        audio_input: bool = True,
    ) -> None:
        if isinstance(responses, str | bytes | ScriptedReply | BaseException):
            raise ConfigurationError(
                "ScriptedModel takes a list of replies, e.g. ScriptedModel(['Hello!'])."
            )
        replies: list[ScriptedReply | Exception] = []
        for position, item in enumerate(responses):
            if isinstance(item, str):
                replies.append(ScriptedReply(text=item))
            elif isinstance(item, ScriptedReply | Exception):
                replies.append(item)
            else:
                raise ConfigurationError(
                    f"Reply {position} is a {type(item).__name__}; a ScriptedModel reply must "
                    "be a str, a ScriptedReply or an exception instance."
                )
        self._replies: deque[ScriptedReply | Exception] = deque(replies)
        self._total = len(replies)
        self._lock = threading.Lock()
        super().__init__(retries, vision=vision, audio_input=audio_input)

    @property
    def remaining(self) -> int:
        """How many scripted replies are left.

        Examples:
            >>> ScriptedModel(["a", "b"]).remaining
            2
        """
        return len(self._replies)

    def _scripted_response(self, request: dict[str, Any]) -> object:
        with self._lock:
            self.requests.append(request)
            if self._replies:
                return self._replies.popleft()
        raise ScriptedModelExhausted(
            f"ScriptedModel got request {len(self.requests)} but was given only "
            f"{self._total} repl{'y' if self._total == 1 else 'ies'}. Add a reply for "
            "every model request the test makes (each tool round trip is one more request)."
        )


ReplyFunction: TypeAlias = Callable[
    [list[dict[str, Any]], list[dict[str, Any]]], "Reply | Awaitable[Reply]"
]


class FunctionModel(_TestModel):
    """A test model that answers with ``fn(messages, tools)``, sync or async.

    ``messages`` and ``tools`` are in OpenAI chat format (plain dicts, a fresh copy
    per call). ``fn`` returns a str, a :class:`ScriptedReply` or an exception
    (returned or raised: either fails the request, like an exception reply of a
    :class:`ScriptedModel`). A sync ``fn`` may be called in a worker thread (litellm
    dispatches provider calls there); an async one is awaited on the event loop.
    ``retries``, ``vision`` and ``audio_input`` as :class:`ScriptedModel`'s.

    Examples:
        >>> def echo(messages, tools):
        ...     return "You said: " + messages[-1]["content"]
        >>> model = FunctionModel(echo)
        >>> async def pick_tool(messages, tools):
        ...     name = tools[0]["function"]["name"]
        ...     return ScriptedReply(tool_calls=[ScriptedToolCall(name=name, arguments={})])
        >>> tool_caller = FunctionModel(pick_tool)
    """

    _kind = "function"

    def __init__(
        self,
        fn: ReplyFunction,
        *,
        retries: int = 0,
        vision: bool = True,
        audio_input: bool = True,
    ) -> None:
        if not callable(fn):
            raise ConfigurationError(
                f"FunctionModel needs a function (messages, tools) -> reply, "
                f"not {type(fn).__name__}."
            )
        self._fn = fn
        super().__init__(retries, vision=vision, audio_input=audio_input)

    def _scripted_response(self, request: dict[str, Any]) -> object:
        self.requests.append(request)
        messages = _custom_provider.plain_copy(request["messages"])
        tools = _custom_provider.plain_copy(request["tools"])
        return self._fn(messages, tools)
