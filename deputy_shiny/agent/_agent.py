"""Agent: a model, tools and limits, run as one governed loop.

The Agent is a thin façade: every run method (``run``, ``run_async``, ``run_sync``,
``chat*``, ``stream*``) adapts the one engine in :mod:`deputy_shiny._engine.loop`, so limits,
tool handling and events behave the same whichever you call.

Examples:
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
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from pathlib import Path
from typing import Any, ClassVar, Literal, Unpack, cast

from .._engine.budget import SharedBudget
from .._engine.compaction import count_tokens
from .._engine.deps import Authority, Lineage, RunDeps, RunReport
from .._engine.loop import Engine
from .._engine.offload import ToolResultStore, tool_read_tool_result
from .._engine.options import RunKeywords, TaskInput, build_run_options
from .._util import sync as _sync
from .._util.metadata import validate_run_context
from ..approvals import ApprovalHandler
from ..context import ContextPolicy
from ..conversation import Conversation
from ..errors import (
    ConfigurationError,
)
from ..events import AgentEvent, AgentResult, AgentUsage
from ..hooks import HookMatcher, HookRegistry
from ..identity import SessionId
from ..messages import (
    ContentToolRequest,
    ContentToolResult,
    UserContent,
    drop_thinking,
    user_turn,
)
from ..models import ChatModel, ModelLike, Provider, resolve_model
from ..permissions import (
    Permissions,
    narrow_mode,
)
from ..persistence.sessions import SessionSection, register_session_section
from ..persistence.store import Store
from ..tools import Tool, ToolState
from ..trusted import TrustedResults
from ..usage import ConversationCost, UsageLimits
from ._approvals import ApprovalMethods, Approvals, check_store
from ._chat import ChatMethods
from ._checkpoints import CheckpointMethods, FileCheckpoints, make_file_journal, trusted_check
from ._checks import (
    add_callback,
    check_new_chat,
    checked_context_policy,
    checked_handler,
    checked_limits,
    checked_permissions,
    existing_dir,
    identifier,
    optional_text,
)
from ._clone import clone_agent
from ._config_change import HookFirer
from ._context import ContextMethods, ConversationContext
from ._delegation.host import DelegationHost
from ._delegation.methods import DelegationMethods, Delegator
from ._delegation.policies import DelegationDisclosure, DelegationObservation
from ._guard import Guard
from ._mcp import McpMethods, McpTools
from ._skills import SkillMethods, Skills
from ._tool_registry import AgentTools, ToolMethods
from ._turns import TurnMethods, Turns
from ._usage import UsageMethods
from ._weak import weakly


class Agent(
    ChatMethods,
    TurnMethods,
    ContextMethods,
    DelegationMethods,
    McpMethods,
    CheckpointMethods,
    ApprovalMethods,
    ToolMethods,
    SkillMethods,
    UsageMethods,
):
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
        session_id: Generated when not given; read-only afterwards.
        agent_id: Generated when not given; read-only afterwards.
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
        enable_file_checkpointing: Journal files before ``write_file``, ``edit_file`` and
            ``multi_edit`` change them, for :meth:`rewind_files`; a checkpoint is made as
            each run starts. ``file_checkpoint_max_file_bytes`` (50 MiB) and
            ``file_checkpoint_max_journal_bytes`` (250 MiB) cap what is stored: a call
            that would pass them is refused. ``checkpoint_dir``: where the journal lives
            (outside the working dir; default a private temporary directory).
        trusted_results: A :class:`~deputy_shiny.trusted.TrustedResults` policy naming the
            one tool allowed to produce each trusted result type; a tool that could get
            around it cannot be registered.
        approval_dir: An existing directory where calls waiting for approval are saved
            when no ``approval_handler`` can answer: the run stops with
            ``approval_pending``, and :meth:`resume_approval` decides the call later,
            even in a new process. Such tools must take JSON-only arguments. When set,
            a response's tool calls run one at a time.
        context_policy: When to compact and where large tool results go
            (:class:`~deputy_shiny.context.ContextPolicy`; default: compact past about
            32,000 tokens). With an ``offload_dir``, ``read_tool_result`` is added.
        store: A :class:`~deputy_shiny.persistence.Store` (``FileStore`` or ``SqlStore``)
            that keeps what this agent saves beyond the process, scoped to its session, in
            place of the directories: calls waiting for approval (as with ``approval_dir``;
            any process sharing the store may decide them, once), the file checkpoint
            journal (with ``enable_file_checkpointing``; instead of ``checkpoint_dir``) and
            large tool results (offloaded, with ``read_tool_result``, instead of
            ``offload_dir``). Not together with those directories.

    Examples:
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
    _hook_firer: HookFirer | None = None  # see _firer()

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
        enable_file_checkpointing: bool = False,
        file_checkpoint_max_file_bytes: int = 50 * 1024**2,
        file_checkpoint_max_journal_bytes: int = 250 * 1024**2,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        trusted_results: TrustedResults | None = None,
        approval_dir: str | os.PathLike[str] | None = None,
        context_policy: ContextPolicy | None = None,
        store: Store | None = None,
    ) -> None:
        self._model: ChatModel = resolve_model(model)
        self._fallbacks: list[ChatModel] = [resolve_model(m) for m in fallback_models]
        self._usage_limits = checked_limits(usage_limits)
        self._working_dir = existing_dir(working_dir)
        self._session_id = identifier(session_id, "session_id", "session")
        self._agent_id = identifier(agent_id, "agent_id", "agent")
        self._agent_name = optional_text(agent_name, "agent_name")
        self._run_context = validate_run_context(run_context or {})
        self._conversation = Conversation(optional_text(system_prompt, "system_prompt"))
        context_policy = checked_context_policy(context_policy)
        check_store(store, approval_dir, checkpoint_dir, context_policy)
        self._store = store
        tool_results = ToolResultStore(context_policy.offload_dir, self._session_id, store=store)
        self._engine = Engine()
        self._guard = Guard(self._engine)  # retained by another agent, or running?
        self._turns = Turns(self._conversation, self._guard)
        self._tools = AgentTools(
            trusted_check(trusted_results),
            guard=self._guard,
            permissions=weakly(lambda agent: agent._permissions, self),
            model=weakly(lambda agent: agent._model, self),
            agent_id=self._agent_id,
            session_id=self._session_id,
        )
        self._trusted_results = trusted_results
        journal = make_file_journal(
            enable_file_checkpointing,
            self._working_dir,
            directory=checkpoint_dir,
            max_file_bytes=file_checkpoint_max_file_bytes,
            max_journal_bytes=file_checkpoint_max_journal_bytes,
            store=store,
            session_id=self._session_id,
        )
        self._checkpoints = FileCheckpoints(journal, self._guard, weakly(_notify, self))
        self._on_tool_request: list[Callable[[ContentToolRequest], object]] = []
        self._on_tool_result: list[Callable[[ContentToolResult], object]] = []
        self._permissions = checked_permissions(permissions).for_working_dir(self._working_dir)
        self._hooks = HookRegistry()
        self._hooks.add(list(hooks))
        self._approvals = Approvals(
            checked_handler(approval_handler),
            None if approval_dir is None else existing_dir(approval_dir, "approval_dir"),
            agent_id=self._agent_id,
            session_id=self._session_id,
            working_dir=self._working_dir,
            usage_limits=self._usage_limits,
            permissions=weakly(lambda agent: agent._permissions, self),
            run_context=weakly(lambda agent: agent._run_context, self),
            run_deps=weakly(Agent._run_deps, self),
            conversation=self._conversation,
            tools=self._tools,
            engine=self._engine,
            guard=self._guard,
            store=store,
        )
        self._skills = Skills(
            tools=self._tools,
            conversation=self._conversation,
            guard=self._guard,
            provider=weakly(lambda agent: agent._model.provider, self),
        )
        self._usage = AgentUsage()
        self._tool_state = ToolState()
        self._mcp = McpTools(self._guard)
        self._context = ConversationContext(
            context_policy,
            tool_results,
            conversation=self._conversation,
            guard=self._guard,
            engine=self._engine,
            agent_id=self._agent_id,
            agent_name=self._agent_name,
            session_id=self._session_id,
            usage_limits=self._usage_limits,
            model=weakly(lambda agent: agent._model, self),
            run_deps=weakly(Agent._run_deps, self),
            usage=weakly(lambda agent: agent._usage, self),
            set_usage=weakly(Agent._set_usage, self),
            run_context=weakly(lambda agent: agent._run_context, self),
            set_run_context=weakly(Agent._set_run_context, self),
        )
        host = DelegationHost(
            self,
            disclosure=delegation_disclosure,
            observation=delegation_observation,
            scope=delegation_scope,
        )
        self._delegator = Delegator(host, self._guard)
        self.register_tools(tools)
        offloads = context_policy.offload_dir is not None or store is not None
        if offloads and "read_tool_result" not in self._tools.tools:
            self.register_tool(tool_read_tool_result(tool_results))

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
    def session_id(self) -> SessionId:
        """The conversation's session ID (read-only): a ``str`` that can also be called,
        as deputy's ``agent$session_id()`` (``agent.session_id() == agent.session_id``)."""
        return SessionId(self._session_id)

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
    def store(self) -> Store | None:
        """The :class:`~deputy_shiny.persistence.Store` that keeps what this agent saves
        beyond the process, or None (read-only)."""
        return self._store

    @property
    def permissions(self) -> Permissions:
        """The policy tool calls are checked against (narrow it with set_permission_mode)."""
        return self._permissions

    @property
    def trusted_results(self) -> TrustedResults | None:
        """The agent's :class:`~deputy_shiny.trusted.TrustedResults` policy, or None (read-only)."""
        return self._trusted_results

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
        anything else raises (create a new Agent for wider permissions). A change fires
        the ``ConfigChange`` hooks (key ``"permission_mode"``), then ``Notification``
        (code ``permission_mode_changed``).

        Examples:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).set_permission_mode("readonly").get_permission_mode()
            'readonly'
        """
        self._guard.free("change its permissions")
        old = self._permissions.mode
        self._permissions = narrow_mode(self._permissions, mode)
        # Provider-native tools can't be checked per call: drop those the new mode refuses.
        self._tools.drop_refused_natives(self._permissions)
        if old != self._permissions.mode:  # as deputy: ConfigChange, then a notice
            self._firer().config_change("permission_mode", old, self._permissions.mode)
            self._firer().notify(
                "permission_mode_changed",
                f"Permission mode changed from {old} to {mode}.",
                previous_mode=old,
                permission_mode=mode,
            )
        return self

    def _firer(self) -> HookFirer:
        """What fires this agent's hooks outside a run (made at the first change)."""
        if self._hook_firer is None:
            self._hook_firer = HookFirer(self._hooks, weakly(Agent._hook_fields, self))
        return self._hook_firer

    def _hook_fields(self) -> dict[str, Any]:
        """A hook context's fields outside a run: the next run's, without its usage."""
        fields = self._run_deps().hook_fields()
        return {**fields, "run_context": self._run_context, "total_turns": len(self.get_turns())}

    def add_hook(self, hook: HookMatcher | Iterable[HookMatcher]) -> Agent:
        """Add a hook (see :class:`~deputy_shiny.hooks.HookMatcher`); hooks run in the order added.

        Examples:
            >>> from deputy_shiny.hooks_builtin import hook_block_dangerous_bash
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([])).add_hook(hook_block_dangerous_bash())
        """
        self._guard.free("add hooks")
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
        include_partial_messages: bool = True,
        **kwargs: Unpack[RunKeywords],
    ) -> AsyncIterator[AgentEvent]:
        """Run a task, yielding :data:`~deputy_shiny.events.AgentEvent` objects as it goes.

        The ``stop`` event ends every run and :meth:`last_run` then holds the result.
        Arguments are checked at once; the run starts when you iterate.

        Args:
            task: The user's message: text, content objects, or a user Turn.
            include_partial_messages: Yield a ``text`` event per streamed chunk (the
                result records them either way).
            **kwargs: The run keywords (``usage_limits``, ``run_context``, ``type``,
                ``validate``, ``max_corrections``, ``tool_mode``), documented in
                :class:`~deputy_shiny.agent.RunKeywords`.

        Examples:
            >>> import asyncio
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel(["Hi there"]))
            >>> async def main():
            ...     return [e.type async for e in agent.run("Hello")]
            >>> asyncio.run(main())[:2]
            ['start', 'request_start']
        """
        return self._direct_run(task, kwargs, include_partial_messages)

    def _direct_run(
        self, task: TaskInput, keywords: RunKeywords, include_partial_messages: bool
    ) -> AsyncIterator[AgentEvent]:
        """A run its caller asked for (a retained agent refuses: its retainer runs it)."""
        self._ensure_free("run a task directly")
        options = build_run_options(
            task,
            agent_limits=self._usage_limits,
            agent_run_context=self._run_context,
            keywords=keywords,
            include_partial_messages=include_partial_messages,
        )
        return self._engine.run(self._run_deps(), self._conversation, options)

    def _delegated_run(
        self,
        task: str,
        *,
        parent_budget: SharedBudget,
        ancestors: tuple[Authority, ...],
        usage_limits: UsageLimits,
        lineage: Lineage | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run ``task`` as a subagent: the same engine, drawing on ``parent_budget`` and
        checked against ``ancestors`` at every call; its result names ``lineage``
        (package-internal: delegation/)."""
        options = build_run_options(
            task,
            agent_limits=self._usage_limits,
            agent_run_context=self._run_context,
            keywords={"usage_limits": usage_limits},
        )
        deps = dataclasses.replace(
            self._run_deps(), parent_budget=parent_budget, ancestors=ancestors, lineage=lineage
        )
        return self._engine.run(deps, self._conversation, options)

    async def run_async(
        self,
        task: TaskInput,
        *,
        include_partial_messages: bool = True,
        **kwargs: Unpack[RunKeywords],
    ) -> AgentResult:
        """Run a task to the end and return its :class:`~deputy_shiny.events.AgentResult`.

        ``kwargs`` are the run keywords (:class:`~deputy_shiny.agent.RunKeywords`).
        ``include_partial_messages`` is accepted as deputy's: it doesn't change the
        result, whose ``events`` always hold the ``text`` chunks.

        Raises:
            ProviderError: the model request failed (after any fallbacks).
            UsageLimitExceeded: a limit with ``on_exceed="error"`` was reached.
            StructuredOutputError: structured output was still rejected.
            AgentRunError: the run failed otherwise. Each carries ``result``.

        Examples:
            >>> import asyncio
            >>> from deputy_shiny.testing import ScriptedModel
            >>> asyncio.run(Agent(ScriptedModel(["Done."])).run_async("Go")).stop_reason
            'complete'
        """
        async for _ in self.run(task, include_partial_messages=include_partial_messages, **kwargs):
            pass
        return self._engine.finished_result()

    def run_sync(
        self,
        task: TaskInput,
        *,
        include_partial_messages: bool = True,
        **kwargs: Unpack[RunKeywords],
    ) -> AgentResult:
        """Blocking :meth:`run_async` for scripts (an error inside a running event loop).

        ``kwargs`` are the run keywords (:class:`~deputy_shiny.agent.RunKeywords`);
        ``include_partial_messages`` as :meth:`run_async` (the result is the same).

        Examples:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel(["Done."])).run_sync("Go").response
            'Done.'
        """
        run = self.run_async(task, include_partial_messages=include_partial_messages, **kwargs)
        return _sync.run_sync(run, "run_sync")

    def last_run(self) -> AgentResult | None:
        """The result of the most recent run, or None before the first one ends."""
        return self._engine.last_result

    def interrupt(self, reason: str = "interrupted") -> bool:
        """Stop the current run at the next safe point; safe to call from any thread.

        Stops mid-stream, while a tool runs (a sync tool's thread finishes in the
        background; its result is discarded), or before the next request. The
        conversation stays consistent: partial text is kept, open tool requests get
        a "not run" result. Returns True if a run was active.

        Examples:
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

        Examples:
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
            approval_handler=self._approvals.handler,
            durable=self._approvals.store(),
            journal=self._approvals.runs.opener(),
            on_tool_request=tuple(self._on_tool_request),
            on_tool_result=tuple(self._on_tool_result),
            tool_state=self._tool_state,
            report=self._record_run,
            file_journal=self._checkpoints.journal,
            trusted_results=self._trusted_results,
            context=self._context.runtime(),
        )

    def _record_run(self, report: RunReport) -> None:
        """Count a finished run's usage; a fallback the run moved to stays the model."""
        self._usage = self._usage + report.usage
        if report.fallbacks_used:
            self._model = report.model
            del self._fallbacks[: report.fallbacks_used]

    def _ensure_free(self, action: str) -> None:
        self._guard.free(action)  # the run methods' check (kept under this name for them)

    def _set_usage(self, usage: AgentUsage) -> None:
        self._usage = usage

    def _set_run_context(self, run_context: dict[str, Any]) -> None:
        self._run_context = run_context

    # ------------------------------------------------------------ usage

    def usage(self) -> AgentUsage:
        """Usage of the whole conversation, over all runs.

        Examples:
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
            cached_tokens=usage.cached_tokens,
            total=usage.cost,
            complete=usage.cost_missing == 0,
            missing=usage.cost_missing,
        )

    def token_count(
        self, *content: UserContent, include: Literal["new", "complete"] = "new"
    ) -> int:
        """Estimated tokens of ``content`` sent as a user turn, as ellmer's
        ``$token_count()``, with the count compaction uses; ``include="complete"`` adds
        the context the next request would send (system prompt, context turns, tool
        schemas). It loads litellm's tokenizer on first use (a script's call; an app
        calls it from a worker thread).

        Examples:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel([]), system_prompt="Be brief.")
            >>> new = agent.token_count("How many words is this?")
            >>> 0 < new < agent.token_count("How many words is this?", include="complete")
            True
        """
        if include not in ("new", "complete"):
            raise ConfigurationError(f"include must be 'new' or 'complete', not {include!r}")
        return count_tokens(
            self._conversation,
            self._tools.schemas(),
            user_turn(*content),
            complete=include == "complete",
        )

    def clone(self) -> Agent:
        """A new agent with this one's configuration and a copy of its conversation.

        The copy has its own engine, tool state (its own ``run_python`` interpreter),
        locks, approvals and journal, and a new ``agent_id`` (the same ``session_id``):
        the two can run at once, and changing one changes nothing in the other. Its
        usage starts from this conversation's. Not copied: tools bound to this agent (an
        MCP connection's), tool observers, tools approved "always", delegations and
        retained agents. A :class:`~deputy_shiny.delegation.LeadAgent` is not cloned
        (build another one from its definitions), nor an agent with a ``store`` (its
        approvals and journal are its session's records).

        Examples:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel(["Hi!", "Bye!"]))
            >>> _ = agent.chat("Hello")
            >>> twin = agent.clone()
            >>> (len(twin.get_turns()), twin.agent_id != agent.agent_id)
            (2, True)
        """
        return cast(Agent, clone_agent(self, Agent))

    def get_model(self) -> str:
        """The litellm model string requests go to."""
        return self._model.model

    def get_provider(self) -> Provider:
        """Who serves the model requests go to, as ellmer's ``get_provider()``: a
        :class:`~deputy_shiny.models.Provider` (``name``, ``model``, ``api_base``).

        Examples:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).set_model("anthropic/claude-sonnet-4-5").get_provider()
            Provider(name='anthropic', model='claude-sonnet-4-5', api_base=None)
        """
        return self._model.get_provider()

    def get_model_object(self) -> ChatModel:
        """The model object requests go to, with its parameters and extra arguments, as
        ellmer's ``get_model_object()``: the :class:`~deputy_shiny.models.ChatModel`."""
        return self._model

    def set_chat(self, chat: ModelLike) -> Agent:
        """Replace the chat the agent sends requests to, as deputy's ``set_chat()``: a
        chatlas ``Chat`` (or anything :meth:`set_model` takes). The conversation, system
        prompt, tools, permissions, hooks and limits stay; thinking is dropped when the
        provider changes. The chat must have no turns and no tools (they would not move:
        use :meth:`set_turns` and :meth:`register_tools`); its system prompt is replaced by
        the agent's. Only the model is taken from it, so one chat may serve many agents.
        Subagents made afterwards use the new model.
        """
        check_new_chat(chat)
        return self.set_model(chat)

    def set_model(self, model: ModelLike) -> Agent:
        """Send later requests to another model (any model string or model object).

        The conversation, system prompt and tools carry over. Switching provider drops
        thinking content from the history, since each provider accepts only its own.
        A change fires the ``ConfigChange`` hooks (key ``"model"``, the model strings).

        Examples:
            >>> from deputy_shiny.testing import ScriptedModel
            >>> Agent(ScriptedModel([])).set_model("anthropic/claude-sonnet-4-5").get_model()
            'anthropic/claude-sonnet-4-5'
        """
        self._guard.ready("change the model")
        new_model = resolve_model(model)
        if self._tools.natives and new_model.provider != self._model.provider:
            raise ConfigurationError(
                "Provider-native tools can't move to another provider; remove them with "
                "set_tools() first."
            )
        if new_model.provider != self._model.provider:
            self._conversation.turns = drop_thinking(self._conversation.turns)
        old, self._model = self._model, new_model
        self._firer().config_change("model", old.model, new_model.model)
        return self

    # ------------------------------------------------------------ tools

    def _lend_tools(self, tools: Iterable[Tool], lead: Agent) -> None:
        """Register tools ``lead`` lends this agent, its subagent (package-internal:
        delegation/). A tool bound to the lead (an MCP connection's) stays the lead's:
        its binding is checked against the lead, on whose behalf this agent works."""
        self._tools.add_unguarded(tools, on_behalf_of=(lead.agent_id, lead.session_id))

    # ------------------------------------------------------------ what delegation needs

    def _add_route_tools(self, tools: list[Tool]) -> None:
        """Register a graph's route tools (package-internal: before retaining)."""
        self._tools.add_unguarded(tools)

    def _remove_route_tools(self, tools: list[Tool]) -> None:
        """Remove a released graph's route tools (package-internal)."""
        self._tools.remove(tools)

    def _retain_refusal(self) -> str | None:
        """Why this agent cannot be retained now, or None (package-internal)."""
        if not self._retainable:
            return f"a {type(self).__name__} cannot be retained"
        if self._guard.retained_by is not None:
            return "it is already retained"
        if self._delegator.retains_others():
            return "it retains other agents (release them first)"
        if self._fallbacks:
            return "it has fallback models"
        if self._tools.natives:
            return "it has provider-native tools"
        if self._approvals.durable:
            # Its tasks run inside its owner's; a call paused to disk would outlive that.
            return "it has an approval_dir" if self._approvals.approval_dir else "it has a store"
        return None

    def _set_retained(self, owner_id: str | None) -> None:
        self._guard.retained_by = owner_id

    def _fingerprint(self) -> tuple[Any, ...]:
        """What a retained agent must keep unchanged between its tasks (package-internal)."""
        return (
            self._model,
            self._conversation.system_prompt,
            tuple(self._tools.all().items()),
            self._permissions,
            self._hooks.snapshot(),
            self._approvals.handler,
            tuple(self._on_tool_request),
            tuple(self._on_tool_result),
            tuple(self._conversation.turns),
            self._working_dir,
        )

    def on_tool_request(
        self, callback: Callable[[ContentToolRequest], object]
    ) -> Callable[[], None]:
        """Call ``callback(request)`` when the model requests a tool; returns a remover.

        Raise :class:`~deputy_shiny.errors.ToolRejectedError` (``raise ToolRejectedError(why)``) in
        the callback to refuse the call; any other exception also refuses it.
        """
        self._guard.free("add tool observers")
        return add_callback(self._on_tool_request, callback)

    def on_tool_result(self, callback: Callable[[ContentToolResult], object]) -> Callable[[], None]:
        """Call ``callback(result)`` when a tool call has a result; returns a remover."""
        self._guard.free("add tool observers")
        return add_callback(self._on_tool_result, callback)


# ---------------------------------------------------------------- saved sessions
# The built-in sections: each component saves and checks its own part of the agent.

register_session_section(
    SessionSection(
        "tool_results",
        lambda agent: agent._context.save_tool_results(),
        lambda agent, data: agent._context.load_tool_results(data),
        order=0,
    )
)
register_session_section(
    SessionSection(
        "conversation",
        lambda agent: agent._context.save_conversation(),
        lambda agent, data: agent._context.load_conversation(data),
        required=True,
    )
)
register_session_section(
    SessionSection(
        "run_context",
        lambda agent: agent._context.save_run_context(),
        lambda agent, data: agent._context.load_run_context(data),
    )
)
register_session_section(
    SessionSection(
        "file_checkpoints",
        lambda agent: agent._checkpoints.save_section(),
        lambda agent, data: agent._checkpoints.load_section(data),
        order=0,
    )
)


def _notify(agent: Agent, code: str, message: str, **details: Any) -> None:
    """A Notification outside a run (a component's, as ``file_checkpoint_created``)."""
    agent._firer().notify(code, message, **details)
