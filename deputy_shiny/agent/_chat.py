"""The conversational adapters every Agent has: chat, chat_structured, stream (and their
async twins), each a thin adapter over :meth:`Agent.run` / :meth:`Agent.run_async`.

A mixin of :class:`~deputy_shiny.agent.Agent` (only Agent uses it), kept apart so that
agent.py stays configuration and runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, Unpack, overload

from pydantic_core import to_jsonable_python

from .._engine.options import RunKeywords, StructuredKeywords, TaskInput
from .._util import sync as _sync
from ..errors import ConfigurationError
from ..events import AgentEvent, AgentResult
from ..messages import (
    Turn,
    UserContent,
    user_turn,
)
from ._echo import Echo, echo_mode, echo_reply, echo_value
from ._streams import RunStream, StreamContent, checked_controller, stream_chunks

if TYPE_CHECKING:
    from .._engine.loop import Engine

__all__ = ["ChatMethods"]


class ChatMethods:
    """An Agent's chat and stream adapters (mixed into :class:`~deputy_shiny.agent.Agent`)."""

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
            self,
            task: TaskInput,
            *,
            include_partial_messages: bool = True,
            **kwargs: Unpack[RunKeywords],
        ) -> AgentResult: ...

        def interrupt(self, reason: str = "interrupted") -> bool: ...

    # ------------------------------------------------------------ ellmer-style adapters
    # Each takes the run keywords as ``**kwargs: Unpack[RunKeywords]`` (documented once,
    # in RunKeywords) and hands them on untouched.

    async def chat_async(
        self, *content: UserContent, echo: Echo = None, **kwargs: Unpack[RunKeywords]
    ) -> str:
        """Send a message and return the reply text; :meth:`last_run` has the full result.

        ``echo``: print the reply unless it is ``"none"`` or False (the default, None, is
        ``"none"``), as deputy's; ``"output"``, ``"text"``, ``"all"`` or True print it.
        ``kwargs`` are the run keywords (:class:`~deputy_shiny.agent.RunKeywords`).

        Examples:
            >>> import asyncio
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> asyncio.run(Agent(ScriptedModel(["Hello!"])).chat_async("Hi"))
            'Hello!'
        """
        mode = echo_mode(echo)
        # include_partial_messages given here: passing it to chat is a TypeError (deputy's
        # chat has none; the reply is whole).
        result = await self.run_async(
            _content_task(content), include_partial_messages=True, **kwargs
        )
        echo_reply(result.response, mode)
        return result.response

    def chat(self, *content: UserContent, echo: Echo = None, **kwargs: Unpack[RunKeywords]) -> str:
        """Blocking :meth:`chat_async`.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel(["Hello!"])).chat("Hi", echo="output")
            Hello!
            'Hello!'
        """
        return _sync.run_sync(self.chat_async(*content, echo=echo, **kwargs), "chat")

    async def chat_structured_async(
        self,
        *content: UserContent,
        echo: Echo = None,
        convert: bool = True,
        **kwargs: Unpack[StructuredKeywords],
    ) -> Any:
        """Extract data of ``type`` (a pydantic model, dataclass, ``list[int]``...) from a reply.

        ``type`` is required; the other run keywords are optional
        (:class:`~deputy_shiny.agent.RunKeywords`). Every attempt counts toward the
        usage limits. ``convert=False`` returns the value as JSON data (dicts, lists,
        strings, numbers) instead of ``type``'s objects; ``echo`` as :meth:`chat_async`
        (it prints the value as JSON).

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
        if not isinstance(convert, bool):
            raise ConfigurationError("convert must be True or False")
        mode = echo_mode(echo)
        # include_partial_messages given here: passing it to chat is a TypeError (deputy's
        # chat has none; the reply is whole).
        result = await self.run_async(
            _content_task(content), include_partial_messages=True, **kwargs
        )
        value = result.structured_output
        echo_value(value, mode)
        return value if convert else to_jsonable_python(value)

    def chat_structured(
        self,
        *content: UserContent,
        echo: Echo = None,
        convert: bool = True,
        **kwargs: Unpack[StructuredKeywords],
    ) -> Any:
        """Blocking :meth:`chat_structured_async`.

        Examples:
            >>> from deputy_shiny import Agent
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel(["", "[1, 2]"])).chat_structured("Two numbers", type=list[int])
            [1, 2]
        """
        run = self.chat_structured_async(*content, echo=echo, convert=convert, **kwargs)
        return _sync.run_sync(run, "chat_structured")

    @overload
    def stream_async(
        self,
        *contents: UserContent,
        stream: Literal["text"] = ...,
        content: Literal["text"] | None = ...,
        controller: Any = ...,
        **kwargs: Unpack[RunKeywords],
    ) -> RunStream[str]: ...

    @overload
    def stream_async(
        self,
        *contents: UserContent,
        stream: Literal["content"],
        content: Literal["all"] | None = ...,
        controller: Any = ...,
        **kwargs: Unpack[RunKeywords],
    ) -> RunStream[StreamContent]: ...

    @overload
    def stream_async(
        self,
        *contents: UserContent,
        content: Literal["all"],
        controller: Any = ...,
        **kwargs: Unpack[RunKeywords],
    ) -> RunStream[StreamContent]: ...

    def stream_async(
        self,
        *contents: UserContent,
        stream: Literal["text", "content"] = "text",
        content: Literal["text", "all"] | None = None,
        controller: Any = None,
        **kwargs: Unpack[RunKeywords],
    ) -> RunStream[str] | RunStream[StreamContent]:
        """Stream a reply: ``stream="text"`` yields str chunks, ``"content"`` content objects.

        ``"content"`` yields :class:`ContentText` chunks, :class:`ContentThinking` once a
        response that reasoned has arrived, :class:`ContentToolRequest` as a call starts
        and :class:`ContentToolResult` as it ends. ``content=`` is chatlas's name for the
        mode (``"all"`` is ``stream="content"``). With ``type=``, the stream is the
        structured output as the model writes it: the JSON text of each attempt (the
        task's own reply text is left out; tool cards still show in ``"content"``), and
        :meth:`last_run` then holds the validated value.

        ``controller`` (chatlas's ``StreamController``, ellmer's ``stream_controller()``)
        is reset as the stream starts; cancel it from anywhere to stop the run (its
        stop reason is the controller's reason, ``"cancelled"`` by default).

        Either mode is the model's raw text: for a shinychat ``Chat``, wrap it in
        ``deputy_shiny.shiny.inert_stream``, which makes it inert as the kit does.
        Errors raise after the stream, as in :meth:`run_async`. The stream may also be
        awaited (it gives itself), as chatlas's ``stream_async`` is, so a shinychat
        ``Chat(client=agent)`` works. ``kwargs`` are the run keywords
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
        as_content = _content_mode(stream, content)
        control = checked_controller(controller, self.interrupt)
        # include_partial_messages given here: a stream needs the text events.
        events = self.run(_content_task(contents), include_partial_messages=True, **kwargs)
        return stream_chunks(
            events,
            self._engine.finished_result,
            content=as_content,
            structured_only=kwargs.get("type") is not None,
            control=control,
        )

    def stream(
        self,
        *contents: UserContent,
        stream: Literal["text", "content"] = "text",
        content: Literal["text", "all"] | None = None,
        controller: Any = None,
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
        stream_async: Any = self.stream_async  # the mode is known only at run time
        chunks: AsyncIterator[Any] = stream_async(
            *contents, stream=stream, content=content, controller=controller, **kwargs
        )
        return _sync.iterate_sync(chunks, "stream")


def _content_mode(stream: str, content: str | None) -> bool:
    """Whether a stream yields content objects: ``stream="content"``, or chatlas's
    ``content="all"``."""
    if stream not in ("text", "content"):
        raise ConfigurationError('stream must be "text" or "content"')
    if content is None:
        return stream == "content"
    if content not in ("text", "all"):
        raise ConfigurationError('content must be "text" or "all"')
    if stream == "content" and content == "text":
        raise ConfigurationError('stream="content" and content="text" disagree; give one')
    return content == "all" or stream == "content"


def _content_task(content: Sequence[UserContent]) -> Turn:
    if not content:
        raise ConfigurationError("Send at least one piece of content")
    return user_turn(*content)
