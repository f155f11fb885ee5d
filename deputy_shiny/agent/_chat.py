"""The conversational adapters every Agent has: chat, chat_structured, stream (and their
async twins), each a thin adapter over :meth:`Agent.run` / :meth:`Agent.run_async`.

A mixin of :class:`~deputy_shiny.agent.Agent` (only Agent uses it), kept apart so that
agent.py stays configuration and runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Unpack, overload

from .._engine.options import RunKeywords, StructuredKeywords, TaskInput
from .._util import sync as _sync
from ..errors import ConfigurationError
from ..events import AgentEvent, AgentResult
from ..messages import (
    Turn,
    UserContent,
    user_turn,
)
from ..usage import UsageLimits
from ._streams import StreamContent, content_chunks, text_chunks

if TYPE_CHECKING:
    from .._engine.loop import Engine

__all__ = ["ChatMethods"]

# deputy's Agent methods that have another name here: calling one says what to use
# (the differences are listed in the docs' "Differences from deputy, on purpose").
DEPUTY_NAMES = {
    "turns": "get_turns() (one accessor per concept)",
    "provider": "the model property (agent.model.provider, agent.model.name)",
    "get_provider": "the model property: a ChatModel with provider, name and params",
    "get_model_object": "the model property: a ChatModel with its params and api_base",
    "set_chat": "set_model(model) (a model string or ChatModel)",
    "run_shiny": "the Shiny kit: agent_chat_ui() / agent_chat_server() in deputy_shiny.shiny",
    "print": "print(agent) or repr(agent)",
}


class ChatMethods:
    """An Agent's chat and stream adapters (mixed into :class:`~deputy_shiny.agent.Agent`)."""

    if not TYPE_CHECKING:  # mypy would take every attribute as defined

        def __getattr__(self, name: str) -> Any:
            # Only reached for a missing attribute: a deputy name says what replaces it.
            hint = DEPUTY_NAMES.get(name)
            message = f"{type(self).__name__!r} object has no attribute {name!r}"
            if hint is not None:
                message += f"; for deputy's ${name}() use {hint}"
            raise AttributeError(message, name=name, obj=self)

    if TYPE_CHECKING:
        # Agent's own; mypy holds these to the real signatures (an override that
        # drifts from them is an error).
        _engine: Engine

        def run(
            self,
            task: TaskInput,
            *,
            include_partial_messages: bool = True,
            **kwargs: Unpack[RunKeywords],
        ) -> AsyncIterator[AgentEvent]: ...

        async def run_async(
            self, task: TaskInput, **kwargs: Unpack[RunKeywords]
        ) -> AgentResult: ...

        @property
        def usage_limits(self) -> UsageLimits: ...

    # ------------------------------------------------------------ ellmer-style adapters
    # Each takes the run keywords as ``**kwargs: Unpack[RunKeywords]`` (documented once,
    # in RunKeywords) and hands them on untouched.

    async def chat_async(self, *content: UserContent, **kwargs: Unpack[RunKeywords]) -> str:
        """Send a message and return the reply text; :meth:`last_run` has the full result.

        ``kwargs`` are the run keywords (:class:`~deputy_shiny.agent.RunKeywords`).

        Examples:
            >>> import asyncio
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> asyncio.run(Agent(ScriptedModel(["Hello!"])).chat_async("Hi"))
            'Hello!'
        """
        result = await self.run_async(_content_task(content), **kwargs)
        return result.response

    def chat(self, *content: UserContent, **kwargs: Unpack[RunKeywords]) -> str:
        """Blocking :meth:`chat_async`.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel(["Hello!"])).chat("Hi")
            'Hello!'
        """
        return _sync.run_sync(self.chat_async(*content, **kwargs), "chat")

    async def chat_structured_async(
        self, *content: UserContent, **kwargs: Unpack[StructuredKeywords]
    ) -> Any:
        """Extract data of ``type`` (a pydantic model, dataclass, ``list[int]``...) from a reply.

        ``type`` is required; the other run keywords are optional
        (:class:`~deputy_shiny.agent.RunKeywords`). Every attempt counts toward the
        usage limits.

        Raises:
            StructuredOutputError: the value was still rejected after ``max_corrections``.

        Examples:
            >>> import asyncio
            >>> from pydantic import BaseModel
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> class City(BaseModel):
            ...     name: str
            >>> agent = Agent(ScriptedModel(["Paris", '{"name": "Paris"}']))
            >>> asyncio.run(agent.chat_structured_async("Capital of France?", type=City))
            City(name='Paris')
        """
        if kwargs.get("type") is None:
            raise ConfigurationError("chat_structured needs a type")
        result = await self.run_async(_content_task(content), **kwargs)
        return result.structured_output

    def chat_structured(self, *content: UserContent, **kwargs: Unpack[StructuredKeywords]) -> Any:
        """Blocking :meth:`chat_structured_async`.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel(["", "[1, 2]"])).chat_structured("Two numbers", type=list[int])
            [1, 2]
        """
        return _sync.run_sync(self.chat_structured_async(*content, **kwargs), "chat_structured")

    @overload
    def stream_async(
        self,
        *content: UserContent,
        stream: Literal["text"] = ...,
        **kwargs: Unpack[RunKeywords],
    ) -> AsyncIterator[str]: ...

    @overload
    def stream_async(
        self,
        *content: UserContent,
        stream: Literal["content"],
        **kwargs: Unpack[RunKeywords],
    ) -> AsyncIterator[StreamContent]: ...

    def stream_async(
        self,
        *content: UserContent,
        stream: Literal["text", "content"] = "text",
        **kwargs: Unpack[RunKeywords],
    ) -> AsyncIterator[str] | AsyncIterator[StreamContent]:
        """Stream a reply: ``stream="text"`` yields str chunks, ``"content"`` content objects.

        ``"content"`` yields :class:`ContentText` chunks, :class:`ContentToolRequest`
        as a call starts and :class:`ContentToolResult` as it ends. Either is the
        model's raw text: for a shinychat ``Chat``, wrap it in
        ``deputy_shiny.shiny.inert_stream``, which makes it inert as the kit does.
        Errors raise after the stream, as in :meth:`run_async`. ``kwargs`` are the run keywords
        (:class:`~deputy_shiny.agent.RunKeywords`).

        Examples:
            >>> import asyncio
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel(["Hello there"]))
            >>> async def main():
            ...     return "".join([c async for c in agent.stream_async("Hi")])
            >>> asyncio.run(main())
            'Hello there'
        """
        if stream not in ("text", "content"):
            raise ConfigurationError('stream must be "text" or "content"')
        # include_partial_messages given here: a stream needs the text events.
        events = self.run(_content_task(content), include_partial_messages=True, **kwargs)
        finish = self._engine.finished_result
        if stream == "text":
            return text_chunks(events, finish)
        return content_chunks(events, finish)

    def stream(
        self,
        *content: UserContent,
        stream: Literal["text", "content"] = "text",
        **kwargs: Unpack[RunKeywords],
    ) -> Iterator[str | StreamContent]:
        """Blocking :meth:`stream_async`, for scripts.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> "".join(Agent(ScriptedModel(["Hi!"])).stream("Hello"))
            'Hi!'
        """
        _sync.ensure_no_running_loop("stream")
        chunks: AsyncIterator[Any] = self.stream_async(*content, stream=stream, **kwargs)
        return _sync.iterate_sync(chunks, "stream")

    def run_shiny(
        self,
        prompt: UserContent,
        max_tool_calls: int | None = None,
        run_context: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[StreamContent]:
        """deputy's ``run_shiny()``: a run as a content stream for a shinychat ``Chat``.

        ``await chat.append_message_stream(agent.run_shiny(prompt))`` shows the reply
        as it streams, with a card for each tool call. The run is this agent's usual
        one (permissions, hooks, limits, compaction), at most ``max_tool_calls`` tool
        calls (else the agent's ``max_tool_calls``, else 25, as deputy's; never more
        than the agent's). ``run_context`` is merged into the agent's.

        The chunks are the model's raw text: importing ``deputy_shiny.shiny`` makes
        shinychat render each inert; wrap the stream in
        ``deputy_shiny.shiny.inert_stream`` for the kit's full guard (images from
        allowed origins, code byte-exact). One agent serves one conversation: build it
        per browser session (or use the kit's ``agent_chat_server``, which does).

        Examples:
            >>> import asyncio
            >>> from deputy_shiny.testing import ScriptedModel
            >>> async def kinds(agent):
            ...     return [type(c).__name__ async for c in agent.run_shiny("Hi")]
            >>> from deputy_shiny import Agent
            >>> asyncio.run(kinds(Agent(ScriptedModel(["Hello there"]))))
            ['ContentText', 'ContentText']
        """
        if max_tool_calls is None:
            max_tool_calls = self.usage_limits.max_tool_calls
        limits = UsageLimits(max_tool_calls=25 if max_tool_calls is None else max_tool_calls)
        if run_context is None:
            return self.stream_async(prompt, stream="content", usage_limits=limits)
        return self.stream_async(
            prompt, stream="content", usage_limits=limits, run_context=dict(run_context)
        )


def _content_task(content: Sequence[UserContent]) -> Turn:
    if not content:
        raise ConfigurationError("Send at least one piece of content")
    return user_turn(*content)
