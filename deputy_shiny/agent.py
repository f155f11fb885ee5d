"""Agent: a model, tools and limits, run as one governed loop.

The Agent is a thin façade: every run method (``run``, ``run_async``, ``run_sync``,
``chat*``, ``stream*``) adapts the one engine in :mod:`deputy_shiny._engine`, so limits,
tool handling and events behave the same whichever you call.

Example:
    >>> from deputy_shiny import Agent
    >>> from deputy_shiny.testing import ScriptedModel
    >>> agent = Agent(ScriptedModel(["Paris."]), system_prompt="Answer briefly.")
    >>> agent.chat("What is the capital of France?")
    'Paris.'
    >>> agent.usage().requests
    1
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
import warnings
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from pathlib import Path
from typing import Any, ClassVar, Literal, overload

from . import _sync
from ._budget import SharedBudget
from ._delegation.graph import DelegationGraph, RouteSpec, retain_graph
from ._delegation.host import DelegationHost, DelegationSubscription, ResultPage
from ._delegation.policies import DelegationDisclosure, DelegationObservation
from ._delegation.records import DelegationManifest, SubagentRecord
from ._delegation.retained import Retention
from ._engine import Engine
from ._metadata import validate_run_context
from ._run_deps import Authority, RunDeps, RunReport
from ._run_options import TaskInput, ToolMode, build_run_options
from ._streams import StreamContent, content_chunks, text_chunks
from ._structured import Validator
from ._tool_registry import ToolRegistry
from .approvals import ApprovalHandler
from .conversation import Conversation
from .errors import (
    AgentBusyError,
    AgentRetainedError,
    ConfigurationError,
    DelegationGraphError,
    InvalidLimitError,
    ToolNameConflictError,
)
from .events import AgentEvent, AgentResult, AgentUsage
from .hooks import HookMatcher, HookRegistry
from .limits import UsageLimits
from .mcp.config import ConfigInput as McpConfigInput
from .mcp.loading import McpLoads
from .mcp.records import McpLoadRecord
from .messages import (
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    Turn,
    UserContent,
    drop_thinking,
    user_turn,
)
from .models import ChatModel, ModelLike, resolve_model
from .permissions import (
    Permissions,
    narrow_mode,
    permissions_standard,
)
from .skills import Skill, prepare_skill, skill_check_requirements, skill_prompt_section
from .tools import NativeWebSearch, Tool, ToolState
from .usage import ConversationCost


class Agent:
    """An LLM agent that runs tasks with tools, under usage limits, reporting events.

    Args:
        model: A litellm model string (``"openai/gpt-4.1-mini"``), a
            :class:`~deputy_shiny.models.ChatModel`, or a test model from
            :mod:`deputy_shiny.testing`. Only the string's shape is checked here;
            provider problems surface at the first request as typed errors.
        tools: Tools made with :func:`~deputy_shiny.tools.tool`.
        system_prompt: Instructions sent before the conversation.
        usage_limits: Limits applied to each run separately (default: 25 requests).
        working_dir: The directory file tools work in; must exist (default: cwd).
        session_id / agent_id: Generated when not given; read-only afterwards.
        agent_name: Optional human-readable name.
        run_context: JSON-compatible values attached to every event and result
            (credential-like keys are rejected).
        fallback_models: Models to try, in order, when a request fails transiently
            (connection error, 408, 429, 500, 502, 503, 504) before the run received
            any response or ran any tool. Once used, a fallback stays in use.
        delegation_disclosure: Who may see this agent's delegations through
            :meth:`inspect_subagents` and the other reads made for a requester
            (default: nobody).
        delegation_observation: How many delegation events are kept for
            :meth:`observe_subagents`.
        delegation_scope: What this agent belongs to (``{"owner": user_id}``), passed to
            the disclosure policy.

    Example:
        >>> from deputy_shiny import Agent, tool, tool_annotations
        >>> from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
        >>> def add(a: int, b: int) -> int:
        ...     "Add two numbers."
        ...     return a + b
        >>> model = ScriptedModel([
        ...     ScriptedReply(tool_calls=[ScriptedToolCall("add", {"a": 2, "b": 3})]),
        ...     "2 + 3 = 5",
        ... ])
        >>> agent = Agent(model, tools=[tool(add, annotations=tool_annotations(
        ...     read_only_hint=True, open_world_hint=False))])
        >>> agent.run_sync("Add 2 and 3").response
        '2 + 3 = 5'
    """

    _retainable: ClassVar[bool] = True  # a LeadAgent cannot be retained

    def __init__(
        self,
        model: ModelLike,
        tools: Iterable[Tool] = (),
        system_prompt: str | None = None,
        usage_limits: UsageLimits | None = None,
        working_dir: str | os.PathLike[str] | None = None,
        session_id: str | None = None,
        run_context: dict[str, Any] | None = None,
        agent_id: str | None = None,
        agent_name: str | None = None,
        fallback_models: Sequence[ModelLike] = (),
        permissions: Permissions | None = None,
        hooks: Iterable[HookMatcher] = (),
        approval_handler: ApprovalHandler | None = None,
        delegation_disclosure: DelegationDisclosure | None = None,
        delegation_observation: DelegationObservation | None = None,
        delegation_scope: Mapping[str, Any] | None = None,
    ) -> None:
        self._model: ChatModel = resolve_model(model)
        self._fallbacks: list[ChatModel] = [resolve_model(m) for m in fallback_models]
        if usage_limits is None:
            usage_limits = UsageLimits(max_requests=25)
        if not isinstance(usage_limits, UsageLimits):
            raise InvalidLimitError(
                f"usage_limits must be a UsageLimits, not {type(usage_limits).__name__}"
            )
        self._usage_limits = usage_limits
        self._working_dir = _existing_dir(working_dir)
        self._session_id = _identifier(session_id, "session_id", "session")
        self._agent_id = _identifier(agent_id, "agent_id", "agent")
        if agent_name is not None and not isinstance(agent_name, str):
            raise ConfigurationError("agent_name must be a string")
        self._agent_name = agent_name
        self._run_context = validate_run_context(run_context or {})
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ConfigurationError("system_prompt must be a string or None")
        self._conversation = Conversation(system_prompt)
        self._tools = ToolRegistry()
        self._on_tool_request: list[Callable[[ContentToolRequest], object]] = []
        self._on_tool_result: list[Callable[[ContentToolResult], object]] = []
        if permissions is None:
            permissions = permissions_standard()
        if not isinstance(permissions, Permissions):
            raise ConfigurationError(
                f"permissions must be a Permissions (e.g. permissions_standard()), not "
                f"{type(permissions).__name__}"
            )
        self._permissions = permissions.for_working_dir(self._working_dir)
        self._hooks = HookRegistry()
        for matcher in hooks:
            self._hooks.add(matcher)
        if approval_handler is not None and not callable(approval_handler):
            raise ConfigurationError(
                "approval_handler must be an async function (request) -> decision"
            )
        self._approval_handler = approval_handler
        self._skills: dict[str, Skill] = {}
        self._usage = AgentUsage()
        self._tool_state = ToolState()
        self._engine = Engine()
        self._mcp: McpLoads | None = None
        self._retained_by: str | None = None  # the agent id of the agent retaining it
        self._retention: Retention | None = None  # the agents it retains (made on first use)
        self._graph: DelegationGraph | None = None  # its delegation graph, if any
        self._delegation_host = DelegationHost(
            self,
            disclosure=delegation_disclosure,
            observation=delegation_observation,
            scope=delegation_scope,
        )
        self.register_tools(tools)

    # ------------------------------------------------------------ identity

    @property
    def agent_id(self) -> str:
        """The agent's ID (read-only)."""
        return self._agent_id

    @property
    def agent_name(self) -> str | None:
        """The agent's name, or None (read-only)."""
        return self._agent_name

    @property
    def session_id(self) -> str:
        """The conversation's session ID (read-only)."""
        return self._session_id

    @property
    def run_context(self) -> dict[str, Any]:
        """A copy of the run_context attached to every run."""
        return dict(self._run_context)

    @property
    def usage_limits(self) -> UsageLimits:
        """The limits applied to each run (read-only)."""
        return self._usage_limits

    @property
    def working_dir(self) -> Path:
        """The directory file tools work in (read-only)."""
        return self._working_dir

    @property
    def permissions(self) -> Permissions:
        """The policy tool calls are checked against (narrow it with set_permission_mode)."""
        return self._permissions

    @property
    def hooks(self) -> HookRegistry:
        """The agent's hooks (add more with :meth:`add_hook`)."""
        return self._hooks

    def get_permission_mode(self) -> str:
        """The current permission mode, e.g. ``"standard"``."""
        return self._permissions.mode

    def set_permission_mode(self, mode: str) -> Agent:
        """Switch to a narrower mode for later tool calls (it takes effect at the next call).

        full -> any; standard -> readonly; plan -> readonly; the same mode does nothing;
        anything else raises (create a new Agent for wider permissions).

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).set_permission_mode("readonly").get_permission_mode()
            'readonly'
        """
        self._ensure_free("change its permissions")
        self._permissions = narrow_mode(self._permissions, mode)
        # Provider-native tools can't be checked per call: drop those the new mode refuses.
        self._tools.drop_refused_natives(self._permissions)
        return self

    def add_hook(self, hook: HookMatcher | Iterable[HookMatcher]) -> Agent:
        """Add a hook (see :class:`~deputy_shiny.hooks.HookMatcher`); hooks run in the order added.

        Example:
            >>> from deputy_shiny.hooks_builtin import hook_block_dangerous_bash
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([])).add_hook(hook_block_dangerous_bash())
        """
        self._ensure_free("add hooks")
        self._hooks.add(hook)
        return self

    @property
    def model(self) -> ChatModel:
        """The model requests go to now (a fallback, once one was used)."""
        return self._model

    @property
    def running(self) -> bool:
        """True while a run is in progress."""
        return self._engine.running

    def __repr__(self) -> str:
        usage = self._usage
        return (
            f"<Agent {self._agent_name or self._agent_id} model={self._model.model} "
            f"turns={len(self._conversation.turns)} tools={len(self._tools.tools)} "
            f"requests={usage.requests}>"
        )

    # ------------------------------------------------------------ runs

    def run(
        self,
        task: TaskInput,
        *,
        usage_limits: UsageLimits | None = None,
        include_partial_messages: bool = True,
        run_context: dict[str, Any] | None = None,
        type: Any = None,
        validate: Validator | None = None,
        max_corrections: int = 0,
        tool_mode: ToolMode = "concurrent",
    ) -> AsyncIterator[AgentEvent]:
        """Run a task, yielding :data:`~deputy_shiny.events.AgentEvent` objects as it goes.

        The ``stop`` event ends every run and :meth:`last_run` then holds the result.
        Arguments are checked at once; the run starts when you iterate.

        Args:
            task: The user's message: text, content objects, or a user Turn.
            usage_limits: Limits for this run; None fields use the agent's, and a looser
                value is clamped to the agent's.
            include_partial_messages: Yield a ``text`` event per streamed chunk (the
                result records them either way).
            run_context: Merged into the agent's; it cannot change ID fields (keys
                ending in ``id``) the agent sets.
            type: A type (pydantic model, dataclass, ``list[int]``...) to extract from
                the conversation after the task into ``result.structured_output``.
            validate: Checks the extracted value: True accepts, False or a message
                rejects (the message is the model's feedback). Anything else, or an
                exception, ends the run with an error.
            max_corrections: How often a rejected value may be corrected.
            tool_mode: ``"concurrent"`` runs one response's tool calls in parallel.

        Example:
            >>> import asyncio
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel(["Hi there"]))
            >>> async def main():
            ...     return [e.type async for e in agent.run("Hello")]
            >>> asyncio.run(main())[:2]
            ['start', 'request_start']
        """
        self._ensure_free("run a task directly")
        options = build_run_options(
            task,
            agent_limits=self._usage_limits,
            agent_run_context=self._run_context,
            usage_limits=usage_limits,
            include_partial_messages=include_partial_messages,
            run_context=run_context,
            output_type=type,
            validate=validate,
            max_corrections=max_corrections,
            tool_mode=tool_mode,
        )
        return self._engine.run(self._run_deps(), self._conversation, options)

    def _delegated_run(
        self,
        task: str,
        *,
        parent_budget: SharedBudget,
        ancestors: tuple[Authority, ...],
        usage_limits: UsageLimits,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run ``task`` as a subagent: the same engine, drawing on ``parent_budget`` and
        checked against ``ancestors`` at every call (package-internal: delegation/)."""
        options = build_run_options(
            task,
            agent_limits=self._usage_limits,
            agent_run_context=self._run_context,
            usage_limits=usage_limits,
            include_partial_messages=True,
            run_context=None,
            output_type=None,
            validate=None,
            max_corrections=0,
            tool_mode="concurrent",
        )
        deps = dataclasses.replace(
            self._run_deps(), parent_budget=parent_budget, ancestors=ancestors
        )
        return self._engine.run(deps, self._conversation, options)

    async def run_async(
        self,
        task: TaskInput,
        *,
        usage_limits: UsageLimits | None = None,
        run_context: dict[str, Any] | None = None,
        type: Any = None,
        validate: Validator | None = None,
        max_corrections: int = 0,
        tool_mode: ToolMode = "concurrent",
    ) -> AgentResult:
        """Run a task to the end and return its :class:`~deputy_shiny.events.AgentResult`.

        Raises:
            ProviderError: the model request failed (after any fallbacks).
            UsageLimitExceeded: a limit with ``on_exceed="error"`` was reached.
            StructuredOutputError: structured output was still rejected.
            AgentRunError: the run failed otherwise. Each carries ``result``.

        Example:
            >>> import asyncio
            >>> from deputy_shiny.testing import ScriptedModel
            >>> asyncio.run(Agent(ScriptedModel(["Done."])).run_async("Go")).stop_reason
            'complete'
        """
        events = self.run(
            task,
            usage_limits=usage_limits,
            run_context=run_context,
            type=type,
            validate=validate,
            max_corrections=max_corrections,
            tool_mode=tool_mode,
        )
        async for _ in events:
            pass
        return self._engine.finished_result()

    def run_sync(
        self,
        task: TaskInput,
        *,
        usage_limits: UsageLimits | None = None,
        run_context: dict[str, Any] | None = None,
        type: Any = None,
        validate: Validator | None = None,
        max_corrections: int = 0,
        tool_mode: ToolMode = "concurrent",
    ) -> AgentResult:
        """Blocking :meth:`run_async` for scripts (an error inside a running event loop).

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel(["Done."])).run_sync("Go").response
            'Done.'
        """
        return _sync.run_sync(
            self.run_async(
                task,
                usage_limits=usage_limits,
                run_context=run_context,
                type=type,
                validate=validate,
                max_corrections=max_corrections,
                tool_mode=tool_mode,
            ),
            "run_sync",
        )

    def last_run(self) -> AgentResult | None:
        """The result of the most recent run, or None before the first one ends."""
        return self._engine.last_result

    def interrupt(self, reason: str = "interrupted") -> bool:
        """Stop the current run at the next safe point; safe to call from any thread.

        Stops mid-stream, while a tool runs (a sync tool's thread finishes in the
        background; its result is discarded), or before the next request. The
        conversation stays consistent: partial text is kept, open tool requests get
        a "not run" result. Returns True if a run was active.

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).interrupt()
            False
        """
        return self._engine.interrupter.request(reason)

    @property
    def tool_state(self) -> ToolState:
        """The state of this agent's stateful tools (e.g. ``run_python``'s interpreter)."""
        return self._tool_state

    def close(self) -> None:
        """Release what the agent's tools hold: stop every ``run_python`` session it started.

        Interrupts a run in progress first. The conversation, tools and settings stay;
        a later call starts fresh sessions. Safe to repeat. The Shiny kit calls this
        when the browser session ends.

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([]))
            >>> agent.close(); agent.close()
        """
        self.interrupt("closed")
        self._tool_state.close()

    async def aclose(self) -> None:
        """:meth:`close` from async code (stopping processes happens in a worker thread)."""
        self.interrupt("closed")
        await asyncio.to_thread(self._tool_state.close)

    # ------------------------------------------------------------ ellmer-style adapters

    async def chat_async(
        self,
        *content: UserContent,
        tool_mode: ToolMode = "concurrent",
        run_context: dict[str, Any] | None = None,
    ) -> str:
        """Send a message and return the reply text; :meth:`last_run` has the full result.

        Example:
            >>> import asyncio
            >>> from deputy_shiny.testing import ScriptedModel
            >>> asyncio.run(Agent(ScriptedModel(["Hello!"])).chat_async("Hi"))
            'Hello!'
        """
        result = await self.run_async(
            _content_task(content), tool_mode=tool_mode, run_context=run_context
        )
        return result.response

    def chat(self, *content: UserContent, run_context: dict[str, Any] | None = None) -> str:
        """Blocking :meth:`chat_async`.

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel(["Hello!"])).chat("Hi")
            'Hello!'
        """
        return _sync.run_sync(self.chat_async(*content, run_context=run_context), "chat")

    async def chat_structured_async(
        self,
        *content: UserContent,
        type: Any,
        run_context: dict[str, Any] | None = None,
        validate: Validator | None = None,
        max_corrections: int = 0,
    ) -> Any:
        """Extract data of ``type`` (a pydantic model, dataclass, ``list[int]``...) from a reply.

        Every attempt counts toward the usage limits.

        Raises:
            StructuredOutputError: the value was still rejected after ``max_corrections``.

        Example:
            >>> import asyncio
            >>> from pydantic import BaseModel
            >>> from deputy_shiny.testing import ScriptedModel
            >>> class City(BaseModel):
            ...     name: str
            >>> agent = Agent(ScriptedModel(["Paris", '{"name": "Paris"}']))
            >>> asyncio.run(agent.chat_structured_async("Capital of France?", type=City))
            City(name='Paris')
        """
        if type is None:
            raise ConfigurationError("chat_structured needs a type")
        result = await self.run_async(
            _content_task(content),
            type=type,
            run_context=run_context,
            validate=validate,
            max_corrections=max_corrections,
        )
        return result.structured_output

    def chat_structured(
        self,
        *content: UserContent,
        type: Any,
        run_context: dict[str, Any] | None = None,
        validate: Validator | None = None,
        max_corrections: int = 0,
    ) -> Any:
        """Blocking :meth:`chat_structured_async`.

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel(["", "[1, 2]"])).chat_structured("Two numbers", type=list[int])
            [1, 2]
        """
        return _sync.run_sync(
            self.chat_structured_async(
                *content,
                type=type,
                run_context=run_context,
                validate=validate,
                max_corrections=max_corrections,
            ),
            "chat_structured",
        )

    @overload
    def stream_async(
        self,
        *content: UserContent,
        tool_mode: ToolMode = ...,
        stream: Literal["text"] = ...,
        run_context: dict[str, Any] | None = ...,
    ) -> AsyncIterator[str]: ...

    @overload
    def stream_async(
        self,
        *content: UserContent,
        tool_mode: ToolMode = ...,
        stream: Literal["content"],
        run_context: dict[str, Any] | None = ...,
    ) -> AsyncIterator[StreamContent]: ...

    def stream_async(
        self,
        *content: UserContent,
        tool_mode: ToolMode = "concurrent",
        stream: Literal["text", "content"] = "text",
        run_context: dict[str, Any] | None = None,
    ) -> AsyncIterator[str] | AsyncIterator[StreamContent]:
        """Stream a reply: ``stream="text"`` yields str chunks, ``"content"`` content objects.

        ``"content"`` yields :class:`ContentText` chunks, :class:`ContentToolRequest`
        as a call starts and :class:`ContentToolResult` as it ends. Errors raise
        after the stream, as in :meth:`run_async`.

        Example:
            >>> import asyncio
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel(["Hello there"]))
            >>> async def main():
            ...     return "".join([c async for c in agent.stream_async("Hi")])
            >>> asyncio.run(main())
            'Hello there'
        """
        if stream not in ("text", "content"):
            raise ConfigurationError('stream must be "text" or "content"')
        events = self.run(_content_task(content), tool_mode=tool_mode, run_context=run_context)
        finish = self._engine.finished_result
        if stream == "text":
            return text_chunks(events, finish)
        return content_chunks(events, finish)

    def stream(
        self,
        *content: UserContent,
        stream: Literal["text", "content"] = "text",
        run_context: dict[str, Any] | None = None,
    ) -> Iterator[str | StreamContent]:
        """Blocking :meth:`stream_async`, for scripts.

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> "".join(Agent(ScriptedModel(["Hi!"])).stream("Hello"))
            'Hi!'
        """
        _sync.ensure_no_running_loop("stream")
        chunks: AsyncIterator[Any] = self.stream_async(
            *content, stream=stream, run_context=run_context
        )
        return _sync.iterate_sync(chunks, "stream")

    def _run_deps(self) -> RunDeps:
        """What the next run may use: a snapshot of this agent's configuration."""
        return RunDeps(
            agent_id=self._agent_id,
            agent_name=self._agent_name,
            session_id=self._session_id,
            model=self._model,
            fallbacks=tuple(self._fallbacks),
            working_dir=self._working_dir,
            permissions=self._permissions,
            hooks=self._hooks,
            tools=dict(self._tools.tools),
            tool_schemas=tuple(self._tools.schemas()),
            request_extras=self._tools.request_extras(),
            approval_handler=self._approval_handler,
            on_tool_request=tuple(self._on_tool_request),
            on_tool_result=tuple(self._on_tool_result),
            tool_state=self._tool_state,
            report=self._record_run,
        )

    def _record_run(self, report: RunReport) -> None:
        """Count a finished run's usage; a fallback the run moved to stays the model."""
        self._usage = self._usage + report.usage
        if report.fallbacks_used:
            self._model = report.model
            del self._fallbacks[: report.fallbacks_used]

    def _ensure_free(self, action: str) -> None:
        if self._retained_by is not None:
            raise AgentRetainedError(
                f"Cannot {action}: this agent is retained by agent {self._retained_by}, "
                "which must release_agent() it first."
            )

    def _ensure_idle(self, action: str) -> None:
        if self._engine.running:
            raise AgentBusyError(f"Cannot {action} while the agent is running a task.")

    # ------------------------------------------------------------ conversation

    def get_turns(self, include_system_prompt: bool = False) -> list[Turn]:
        """The whole conversation (optionally with the system prompt as the first turn).

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel(["Hi!"]))
            >>> _ = agent.chat("Hello")
            >>> [t.role for t in agent.get_turns()]
            ['user', 'assistant']
        """
        turns = list(self._conversation.turns)
        system = self._conversation.system_turn() if include_system_prompt else None
        if system is not None:
            turns.insert(0, system)
        return turns

    def get_context_turns(self, include_system_prompt: bool = False) -> list[Turn]:
        """The turns the model sees now (the whole conversation until compaction exists)."""
        turns = self._conversation.context_turns()
        system = self._conversation.system_turn() if include_system_prompt else None
        return [system, *turns] if system is not None else turns

    def set_turns(self, turns: Iterable[Turn]) -> Agent:
        """Replace the conversation (not during a run).

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).set_turns([]).get_turns()
            []
        """
        self._ensure_free("replace the conversation")
        self._ensure_idle("replace the conversation")
        new_turns = list(turns)
        for turn in new_turns:
            if not isinstance(turn, Turn):
                raise ConfigurationError(f"set_turns takes Turn objects, not {type(turn).__name__}")
        self._conversation.turns = new_turns
        return self

    def add_turn(self, user: Turn | UserContent, assistant: Turn | str) -> Agent:
        """Append a user turn and an assistant turn, as ellmer's ``add_turn`` does.

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([])).add_turn("2+2?", "4")
            >>> agent.last_turn().text
            '4'
        """
        self._ensure_free("add turns")
        self._ensure_idle("add turns")
        user_t = user if isinstance(user, Turn) else user_turn(user)
        assistant_t = (
            assistant
            if isinstance(assistant, Turn)
            else Turn(role="assistant", contents=[ContentText(text=assistant)])
        )
        if user_t.role != "user" or assistant_t.role != "assistant":
            raise ConfigurationError("add_turn takes a user turn, then an assistant turn")
        self._conversation.turns.extend([user_t, assistant_t])
        return self

    def last_turn(self, role: Literal["assistant", "user", "system"] = "assistant") -> Turn | None:
        """The last turn with ``role``, or None (``"system"``: the system prompt as a turn)."""
        if role == "system":
            return self._conversation.system_turn()
        return next((t for t in reversed(self._conversation.turns) if t.role == role), None)

    def get_system_prompt(self) -> str | None:
        """The system prompt, or None."""
        return self._conversation.system_prompt

    def set_system_prompt(self, value: str | None) -> Agent:
        """Replace the system prompt (None removes it)."""
        self._ensure_free("change the system prompt")
        if value is not None and not isinstance(value, str):
            raise ConfigurationError("system_prompt must be a string or None")
        self._conversation.system_prompt = value
        return self

    def usage(self) -> AgentUsage:
        """Usage of the whole conversation, over all runs.

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).usage().requests
            0
        """
        return self._usage

    def cost(self) -> ConversationCost:
        """Tokens and cost of the whole conversation; ``total`` is None if any cost is unknown."""
        usage = self._usage
        return ConversationCost(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total=usage.cost,
            complete=usage.cost_missing == 0,
            missing=usage.cost_missing,
        )

    def get_model(self) -> str:
        """The litellm model string requests go to."""
        return self._model.model

    def set_model(self, model: ModelLike) -> Agent:
        """Send later requests to another model (any model string or model object).

        The conversation, system prompt and tools carry over. Switching provider drops
        thinking content from the history, since each provider accepts only its own.

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).set_model("anthropic/claude-sonnet-4-5").get_model()
            'anthropic/claude-sonnet-4-5'
        """
        self._ensure_free("change the model")
        self._ensure_idle("change the model")
        new_model = resolve_model(model)
        if self._tools.natives and new_model.provider != self._model.provider:
            raise ConfigurationError(
                "Provider-native tools can't move to another provider; remove them with "
                "set_tools() first."
            )
        if new_model.provider != self._model.provider:
            self._conversation.turns = drop_thinking(self._conversation.turns)
        self._model = new_model
        return self

    # ------------------------------------------------------------ tools

    def register_tool(self, tool: Tool, replace: bool = False) -> Agent:
        """Add a tool; a name clash is an error unless ``replace=True``.

        Example:
            >>> from deputy_shiny import tool
            >>> from deputy_shiny.testing import ScriptedModel
            >>> def now() -> str:
            ...     "The current time."
            ...     return "noon"
            >>> sorted(Agent(ScriptedModel([])).register_tool(tool(now)).get_tools())
            ['now']
        """
        return self.register_tools([tool], replace=replace)

    def register_tools(
        self, tools: Iterable[Tool | NativeWebSearch], replace: bool = False
    ) -> Agent:
        """Add several tools; all are checked before any is added.

        Two tools with one name in the batch are always an error; a clash with a
        registered tool is an error unless ``replace=True``. Provider-native web search
        (from ``tools_web(model)``) is authorized here, once: it needs web access, an
        explicit ``tool_allowlist`` entry, and no ``can_use_tool`` callback.
        """
        self._ensure_free("add tools")
        self._tools.add(
            tools,
            self._permissions,
            provider=self._model.provider,
            replace=replace,
            agent_id=self._agent_id,
            session_id=self._session_id,
        )
        return self

    def _lend_tools(self, tools: Iterable[Tool], lead: Agent) -> None:
        """Register tools ``lead`` lends this agent, its subagent (package-internal:
        delegation/). A tool bound to the lead (an MCP connection's) stays the lead's:
        its binding is checked against the lead, on whose behalf this agent works."""
        self._tools.add(
            tools,
            self._permissions,
            provider=self._model.provider,
            replace=False,
            agent_id=lead.agent_id,
            session_id=lead.session_id,
        )

    def set_tools(self, tools: Iterable[Tool | NativeWebSearch]) -> Agent:
        """Replace all registered tools (the batch is checked first)."""
        self._ensure_free("replace the tools")
        self._tools.replace_all(
            tools,
            self._permissions,
            provider=self._model.provider,
            agent_id=self._agent_id,
            session_id=self._session_id,
        )
        return self

    def get_tools(self) -> dict[str, Tool | NativeWebSearch]:
        """The registered tools by name (provider-native ones included)."""
        return self._tools.all()

    # ------------------------------------------------------------ delegations: reads

    def list_subagents(self) -> list[SubagentRecord]:
        """Every delegation this agent made, oldest first, running ones included (host
        code only: no disclosure check). Records are kept in memory only.

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).list_subagents()
            []
        """
        return self._delegation_host.list_subagents()

    def get_subagent_results(
        self, agent_name: str | None = None, delegation_id: str | None = None
    ) -> list[SubagentRecord]:
        """The finished delegations (optionally of one subagent, or one delegation)."""
        return [
            r
            for r in self.list_subagents()
            if r.completed_at is not None
            and (agent_name is None or r.agent_name == agent_name)
            and (delegation_id is None or r.delegation_id == delegation_id)
        ]

    def get_subagent_messages(
        self, agent_name: str | None = None, session_id: str | None = None
    ) -> dict[str, list[Turn]]:
        """Each delegation's turns (so far, for a running one), by delegation id.

        Reading them adds nothing to this agent's context. No disclosure check: use
        :meth:`inspect_subagents` before showing history to a person.
        """
        return self._delegation_host.messages(agent_name, session_id)

    def get_subagent_contexts(
        self, view: Literal["initial", "current"] = "initial"
    ) -> dict[str, DelegationManifest | dict[str, Any] | None]:
        """What each subagent started with (``initial``: its manifest) or what its model
        context holds (``current``: system prompt and turns; at the end for a finished
        one). Nothing is sent to a model; no disclosure check."""
        return self._delegation_host.contexts(view)

    def interrupt_subagent(self, delegation_id: str, reason: str = "interrupted") -> bool:
        """Ask a running subagent to stop at its next safe point (its own delegations
        stop too). No disclosure check: make sure the user may do this. Returns True if
        it was running."""
        return self._delegation_host.interrupt(delegation_id, reason)

    def observe_subagents(
        self, requester: Any, delegation_id: str | None = None, after: int | None = None
    ) -> DelegationSubscription:
        """Follow delegation events as they happen, as ``requester`` may see them.

        Raises:
            DelegationDisclosureError: the requester may see nothing here.
        """
        return self._delegation_host.observe_subagents(requester, delegation_id, after)

    def inspect_subagents(
        self, requester: Any, delegation_id: str | None = None, transcript: bool = False
    ) -> list[dict[str, Any]]:
        """A snapshot of each delegation ``requester`` may see: its task, what the runtime
        observed (status, stop reason, usage, tools called, errors) kept apart from what
        the subagent claimed (its answer), and the manifest it started from; with
        ``transcript`` its turns too. A retained agent's task also reports the handle's
        total usage. Every view passes the disclosure policy.

        Raises:
            DelegationDisclosureError: the requester may see none of them.
        """
        return self._delegation_host.inspect(requester, delegation_id, transcript)

    def export_subagents(self, requester: Any, delegation_id: str | None = None) -> dict[str, Any]:
        """A JSON-ready record of the finished delegations ``requester`` may see, for
        :func:`~deputy_shiny.delegation.delegation_history`. Raises if a selected
        delegation is still running."""
        return self._delegation_host.export(requester, delegation_id)

    def read_subagent_result(
        self, requester: Any, delegation_id: str, reference: str, offset: int = 0
    ) -> ResultPage:
        """Read 8,192 characters of a subagent's full answer from ``offset`` (``reference``
        as in its :meth:`inspect_subagents` view). Nothing is run.

        Raises:
            DelegationDisclosureError: the requester may not see this delegation.
            DelegationError: no such delegation, result or offset.
        """
        return self._delegation_host.read_result(requester, delegation_id, reference, offset)

    # ------------------------------------------------------------ delegations: retained

    def retain_agent(self, agent: Agent, usage_limits: UsageLimits, max_runs: int = 32) -> str:
        """Retain ``agent`` to send it tasks with :meth:`continue_agent`; returns its handle.

        The retained agent keeps its conversation between tasks. Until
        :meth:`release_agent`, it cannot be run directly and its conversation, prompt,
        model, tools, hooks, tool observers and permissions cannot change
        (:class:`~deputy_shiny.errors.AgentRetainedError`); observers it already has keep
        working. Each of its tool calls must also pass this agent's current permissions.

        Args:
            agent: A plain Agent (not a LeadAgent, not this one, not retained, not
                retaining others) without fallback models or provider-native tools.
            usage_limits: The total of all its tasks until release (each task is also
                capped by the agent's own per-run limits).
            max_runs: How many tasks it may be sent.

        Raises:
            RetainError: ``agent`` cannot be retained, or this agent holds 32 already.

        Example:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> owner = Agent(ScriptedModel([]))
            >>> analyst = Agent(ScriptedModel(["Sales rose 4%.", "The north did."]))
            >>> handle = owner.retain_agent(analyst, UsageLimits(max_requests=10))
            >>> owner.continue_agent(handle, "Summarise sales.").response
            'Sales rose 4%.'
            >>> owner.continue_agent(handle, "Which region drove it?").response
            'The north did.'
            >>> len(analyst.get_turns()), [r.status for r in owner.list_subagents()]
            (4, ['completed', 'completed'])
            >>> owner.release_agent(handle)
        """
        self._ensure_free("retain agents")
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"retain_agent takes an Agent, not {type(agent).__name__}")
        return self._retained().retain(agent, usage_limits, max_runs)

    async def continue_agent_async(
        self, handle: str, task: str, usage_limits: UsageLimits | None = None
    ) -> AgentResult:
        """Send a retained agent its next task (it still has its earlier conversation).

        The task runs on the same engine, recorded as a delegation of this agent
        (:meth:`list_subagents`). Its usage is charged to the handle's total and, when
        called from inside one of this agent's runs (from a tool), to that run's budget
        too; its limits are ``usage_limits`` (None: the agent's own) clamped to what
        both have left.

        Raises (all before any request):
            RetainedHandleError: the handle is another agent's or unknown
                (RetainedAgentReleasedError: released).
            RetainedAgentBusyError: it is running a task.
            RetainedAgentChangedError: it was changed since it was retained.
            RetainedAgentExhaustedError: ``max_runs`` tasks were sent already.
            DelegationTaskError: the task is empty or over 64 KiB.
        """
        return await self._retained().continue_(handle, task, usage_limits)

    def continue_agent(
        self, handle: str, task: str, usage_limits: UsageLimits | None = None
    ) -> AgentResult:
        """Blocking :meth:`continue_agent_async` (an error inside a running event loop)."""
        return _sync.run_sync(
            self.continue_agent_async(handle, task, usage_limits), "continue_agent"
        )

    def cancel_agent(self, handle: str, reason: str = "interrupted") -> bool:
        """Ask a retained agent to stop its current task at the next safe point (the
        conversation so far is kept). True if a task was running; repeating is harmless."""
        return self._retained().cancel(handle, reason)

    def release_agent(self, handle: str) -> None:
        """Stop retaining an agent so it can be used on its own again.

        This also discards the delegation records of its tasks (save them first with
        :meth:`export_subagents`). Its tools and connections stay open.

        Raises:
            RetainedAgentBusyError: it is running (``cancel_agent`` and wait first).
            RetainedHandleError: the handle is another agent's, unknown or released.
        """
        self._retained().release(handle)

    # ------------------------------------------------------------ delegations: graph

    def retain_agent_graph(
        self,
        agents: Mapping[str, Agent],
        routes: Mapping[str, Mapping[str, RouteSpec | Mapping[str, Any]]],
        usage_limits: UsageLimits,
        *,
        max_depth: int = 3,
        max_delegations: int = 16,
        max_concurrency: int = 4,
        max_runs: int = 32,
    ) -> dict[str, str]:
        """Retain several agents as a graph whose members delegate to each other through
        route tools; returns each agent's handle by name (for :meth:`continue_agent`).

        This agent is the graph's root (routes name it ``"root"``) and records every
        delegation in it (:meth:`list_subagents`, with ``parent_delegation_id`` for
        nested ones). ``routes[source][tool_name]`` adds to ``source`` (an agent's name
        or ``"root"``) a tool ``tool_name(task)`` that sends ``task`` to the route's
        target as its next task: a :class:`~deputy_shiny.delegation.RouteSpec` or a
        mapping with ``target``, ``description`` and optional ``usage_limits`` (each
        task's limits, clamped to what is left). Every run in the graph draws on the one
        budget ``usage_limits`` (its ``max_requests`` is required), and a route the
        root's own run calls draws on that run too. Each call a member makes must also
        pass the current permissions of every agent above it in the chain, so a route
        from a plan-mode agent gives its target no write.

        Routes may form cycles, but a route to an agent that is already running (one
        in the chain, or busy elsewhere) is refused at once. So are routes past
        ``max_depth`` (the root's own delegates are at depth 1), past
        ``max_delegations`` (tasks in the graph until release, ``continue_agent`` ones
        included) or past ``max_concurrency`` (members running at once): a refusal,
        never a queue, since an agent waiting on its own delegate holds its slot and
        queueing could deadlock. A refused route call is a tool error for the model and
        a ``not_started`` record. Each member meets :meth:`retain_agent`'s conditions
        and, until :meth:`release_agent_graph`, is retained like one (``max_runs`` tasks
        each; the members count toward the 32 agents one agent may retain).

        Raises:
            DelegationGraphError: a graph already exists, an agent is named ``root`` or
                appears twice, a route's source or target is unknown, a route tool's
                name is invalid or clashes with its source's tools, or a limit is not a
                whole number of at least 1 (``max_delegations``: 0).
            RetainError: an agent cannot be retained.
            InvalidLimitError: ``usage_limits`` is not a UsageLimits with max_requests.

        Example:
            >>> from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
            >>> def ask(tool, task):
            ...     return ScriptedReply(tool_calls=[ScriptedToolCall(tool, {"task": task})])
            >>> root = Agent(ScriptedModel([ask("ask_planner", "Plan a trip."), "Booked."]))
            >>> planner = Agent(ScriptedModel([ask("ask_booker", "Book it."), "Trip planned."]))
            >>> booker = Agent(ScriptedModel(["Booked a train."]))
            >>> handles = root.retain_agent_graph(
            ...     {"planner": planner, "booker": booker},
            ...     {
            ...         "root": {"ask_planner": {"target": "planner", "description": "Plans."}},
            ...         "planner": {"ask_booker": {"target": "booker", "description": "Books."}},
            ...     },
            ...     UsageLimits(max_requests=10),
            ... )
            >>> root.run_sync("Get me to Lyon.").response
            'Booked.'
            >>> [(r.agent_name, r.response) for r in root.list_subagents()]
            [('planner', 'Trip planned.'), ('booker', 'Booked a train.')]
            >>> root.delegation_graph_usage().requests
            3
            >>> root.release_agent_graph()
        """
        self._ensure_free("retain agents")
        if self._graph is not None:
            raise DelegationGraphError(
                "this agent already has a delegation graph; release_agent_graph() it first"
            )
        for name, agent in agents.items() if isinstance(agents, Mapping) else ():
            if not isinstance(agent, Agent):
                raise ConfigurationError(
                    f"retain_agent_graph takes Agents; {name!r} is a {type(agent).__name__}"
                )
        self._graph = retain_graph(
            self._retained(),
            agents,
            routes,
            usage_limits,
            max_depth=max_depth,
            max_delegations=max_delegations,
            max_concurrency=max_concurrency,
            max_runs=max_runs,
        )
        return self._graph.handles()

    def delegation_graph_usage(self) -> AgentUsage:
        """The total usage of every run in this agent's delegation graph so far (running
        ones included; the root's own requests are not in it).

        Raises:
            DelegationGraphError: this agent has no delegation graph.
        """
        if self._graph is None:
            raise DelegationGraphError("this agent has no delegation graph")
        return self._graph.usage()

    def release_agent_graph(self) -> None:
        """Release the delegation graph: its route tools and handles go, its members can
        be used on their own again (their own tools and connections stay), and the
        graph's delegation records are discarded (save them first with
        :meth:`export_subagents`). A new graph may then be retained.

        Raises:
            DelegationGraphError: no graph, or an agent in it is running (cancel it with
                :meth:`cancel_agent` and wait for the task to end first).
        """
        if self._graph is None:
            raise DelegationGraphError("this agent has no delegation graph")
        self._graph.release()
        self._graph = None

    def _add_route_tools(self, tools: list[Tool]) -> None:
        """Register a graph's route tools (package-internal: before retaining)."""
        self._tools.add(
            tools,
            self._permissions,
            provider=self._model.provider,
            agent_id=self._agent_id,
            session_id=self._session_id,
        )

    def _remove_route_tools(self, tools: list[Tool]) -> None:
        """Remove a released graph's route tools (package-internal)."""
        self._tools.remove(tools)

    def _retained(self) -> Retention:
        if self._retention is None:
            self._retention = Retention(self._delegation_host)
        return self._retention

    def _retain_refusal(self) -> str | None:
        """Why this agent cannot be retained now, or None (package-internal)."""
        if not self._retainable:
            return f"a {type(self).__name__} cannot be retained"
        if self._retained_by is not None:
            return "it is already retained"
        if self._retention is not None and self._retention.count():
            return "it retains other agents (release them first)"
        if self._fallbacks:
            return "it has fallback models"
        if self._tools.natives:
            return "it has provider-native tools"
        return None

    def _set_retained(self, owner_id: str | None) -> None:
        self._retained_by = owner_id

    def _fingerprint(self) -> tuple[Any, ...]:
        """What a retained agent must keep unchanged between its tasks (package-internal)."""
        return (
            self._model,
            self._conversation.system_prompt,
            tuple(self._tools.all().items()),
            self._permissions,
            self._hooks.snapshot(),
            self._approval_handler,
            tuple(self._on_tool_request),
            tuple(self._on_tool_result),
            tuple(self._conversation.turns),
            self._working_dir,
        )

    # ------------------------------------------------------------ MCP

    def load_mcp(
        self,
        config: McpConfigInput = None,
        servers: str | Sequence[str] | None = None,
        replace: bool = False,
    ) -> Agent:
        """Load the tools of MCP servers from a config (blocking; see :meth:`load_mcp_async`).

        Example:
            >>> import warnings
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([]))
            >>> with warnings.catch_warnings(action="ignore"):
            ...     _ = agent.load_mcp({"mcpServers": {}})
            >>> agent.mcp_status()[0].status, agent.mcp_tools()
            ('unavailable', [])
        """
        return _sync.run_sync(self.load_mcp_async(config, servers, replace), "load_mcp")

    async def load_mcp_async(
        self,
        config: McpConfigInput = None,
        servers: str | Sequence[str] | None = None,
        replace: bool = False,
    ) -> Agent:
        """Load the tools of MCP servers (``servers``: exact names; None: all configured).

        ``config`` is a path, a dict or an ``McpConfig`` (None: ``$DEPUTY_MCP_CONFIG`` or
        ``~/.config/mcptools/config.json``). The servers stop when the agent is closed.
        ``replace=True`` swaps the tools loaded earlier from these servers (dropping
        those a server no longer offers, and replacing other tools with the same names);
        with ``replace=False`` a name clash is an error. A server that fails is skipped
        with a warning; tools of connections that have since closed are removed.
        :meth:`mcp_status` records every call.
        """
        self._ensure_free("load MCP tools")
        self._ensure_idle("load MCP tools")
        await self._mcp_loads().load(self, config, servers, replace)
        return self

    def mcp_tools(self) -> list[str]:
        """The names of the registered tools :meth:`load_mcp` loaded."""
        return self._mcp_loads().tool_names(self)

    def mcp_status(self) -> list[McpLoadRecord]:
        """A record of each :meth:`load_mcp` call: status, servers, tools, time, error."""
        return self._mcp_loads().status()

    def _mcp_loads(self) -> McpLoads:
        if self._mcp is None:
            self._mcp = McpLoads()
        return self._mcp

    # ------------------------------------------------------------ skills

    def load_skill(
        self, skill: Skill | str | os.PathLike[str], allow_conflicts: bool = False
    ) -> Agent:
        """Load a skill: register its tools (under this agent's permissions), append its prompt.

        Warns when packages the skill needs are missing or it expects another provider.
        A tool name clash is an error unless ``allow_conflicts=True``, when the skill's
        tools replace the registered ones (with a warning).

        Example:
            >>> from deputy_shiny.skills import skill_create
            >>> from deputy_shiny.testing import ScriptedModel
            >>> terse = skill_create("terse", prompt="Be terse.")
            >>> agent = Agent(ScriptedModel([])).load_skill(terse)
            >>> sorted(agent.skills()), "Be terse." in agent.get_system_prompt()
            (['terse'], True)
        """
        self._ensure_free("load a skill")
        self._ensure_idle("load a skill")
        loaded = prepare_skill(skill)
        if loaded.name in self._skills and not allow_conflicts:
            raise ConfigurationError(f"A skill named {loaded.name!r} is already loaded.")
        check = skill_check_requirements(loaded, provider=self._model.provider)
        if not check.ok:
            warnings.warn(
                f"Skill {loaded.name!r}: " + "; ".join(check.messages), UserWarning, stacklevel=2
            )
        clashes = sorted(t.name for t in loaded.tools if t.name in self._tools.tools)
        if clashes and not allow_conflicts:
            raise ToolNameConflictError(
                f"Skill {loaded.name!r} brings tools already registered: {', '.join(clashes)}. "
                "Pass allow_conflicts=True to let the skill's tools replace them."
            )
        if clashes:
            warnings.warn(
                f"Skill {loaded.name!r} replaces registered tools: {', '.join(clashes)}",
                UserWarning,
                stacklevel=2,
            )
        self.register_tools(loaded.tools, replace=allow_conflicts)
        section = skill_prompt_section(loaded)
        if section:
            self._conversation.system_prompt = (self._conversation.system_prompt or "") + section
        self._skills[loaded.name] = loaded
        return self

    def skills(self) -> dict[str, Skill]:
        """The loaded skills by name."""
        return dict(self._skills)

    def on_tool_request(
        self, callback: Callable[[ContentToolRequest], object]
    ) -> Callable[[], None]:
        """Call ``callback(request)`` when the model requests a tool; returns a remover.

        Raise :class:`~deputy_shiny.errors.ToolRejectedError` (``raise ToolRejectedError(why)``) in
        the callback to refuse the call; any other exception also refuses it.
        """
        self._ensure_free("add tool observers")
        return _add_callback(self._on_tool_request, callback)

    def on_tool_result(self, callback: Callable[[ContentToolResult], object]) -> Callable[[], None]:
        """Call ``callback(result)`` when a tool call has a result; returns a remover."""
        self._ensure_free("add tool observers")
        return _add_callback(self._on_tool_result, callback)


# ---------------------------------------------------------------- helpers


def _add_callback(registry: list[Any], callback: Callable[..., object]) -> Callable[[], None]:
    if not callable(callback):
        raise ConfigurationError("callback must be callable")
    registry.append(callback)

    def remove() -> None:
        if callback in registry:
            registry.remove(callback)

    return remove


def _existing_dir(path: str | os.PathLike[str] | None) -> Path:
    resolved = Path(os.getcwd() if path is None else path).expanduser()
    if not resolved.is_dir():
        raise ConfigurationError(
            f"working_dir {str(resolved)!r} does not exist or is not a directory"
        )
    return resolved.resolve()


def _identifier(value: str | None, name: str, prefix: str) -> str:
    if value is None:
        return f"{prefix}_{uuid.uuid4().hex}"
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{name} must be a non-empty string")
    return value


def _content_task(content: Sequence[UserContent]) -> Turn:
    if not content:
        raise ConfigurationError("Send at least one piece of content")
    return user_turn(*content)
