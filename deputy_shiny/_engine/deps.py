"""RunDeps: everything one run may use, handed from the Agent to the engine.

The engine and the tool gate read a run's model, tools, permissions, hooks, callbacks
and identity from a frozen :class:`RunDeps` (and write turns to a
:class:`~deputy_shiny.conversation.Conversation`); they never reach into the
:class:`~deputy_shiny.agent.Agent`. A subagent or a test runs the same engine over
another RunDeps. What a run changes beyond the conversation (usage, the fallback
model it ended on) goes back through :attr:`RunDeps.report`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..events import AgentUsage
from ..hooks import HookRegistry
from ..messages import ContentToolRequest, ContentToolResult
from ..models import ChatModel
from ..permissions import Permissions
from ..persistence.checkpoints import FileJournal
from ..tools import Tool, ToolContext, ToolState
from ..trusted import TrustedResults
from .budget import SharedBudget
from .compaction import ContextRuntime
from .durable import DurableStore
from .journal import JournalOpener

__all__ = ["Authority", "RunDeps", "RunReport"]


@dataclass(frozen=True)
class Authority:
    """An agent above a delegated run: every call the run makes must also pass it.

    Its permissions and tools are read at each call (functions, not values), so when
    a lead's mode is narrowed or a tool is taken away mid-run, its subagents lose that
    authority from their next call on.

    Attributes:
        name: How denials name it ("lead agent", or its agent name).
        agent_id: Its agent id.
        permissions: Returns its current permissions.
        working_dir: Where its relative paths resolve.
        tool_names: Returns the names of the tools it has now (a lead lends its subagent
            only its own tools), or None when the run below brings its own tools (a
            retained agent): then only the permissions apply.
        file_journal: Its file checkpoint journal (None: checkpointing is off). Every
            file change of the run below is recorded there too, under its caps, so its
            ``rewind_files`` undoes it and a change it would refuse is refused.
    """

    name: str
    agent_id: str
    permissions: Callable[[], Permissions]
    working_dir: Path
    tool_names: Callable[[], frozenset[str]] | None = None
    file_journal: FileJournal | None = None


@dataclass(frozen=True)
class _Journals:
    """Records a change in several journals: the run's own and those of the agents above.

    Any refusal refuses the change (nothing is written then): a delegated run is held to
    every journal's caps and working directory, never only its own.
    """

    journals: tuple[FileJournal, ...]

    def record(self, path: Path) -> None:
        for journal in self.journals:
            journal.record(path)


@dataclass(frozen=True)
class RunReport:
    """What a finished run tells its owner: its usage and the model it ended on."""

    usage: AgentUsage
    model: ChatModel
    fallbacks_used: int


@dataclass(frozen=True, slots=True)
class Lineage:
    """Where a delegated run comes from: the agent and run that delegated it (the run
    is None when host code, not a run's tool, sent the task) and its delegation."""

    parent_agent_id: str
    parent_run_id: str | None
    delegation_id: str


def _ignore_report(report: RunReport) -> None:
    return None


@dataclass(frozen=True)
class RunDeps:
    """What one run may use (frozen: a run never changes its own configuration).

    Attributes:
        agent_id / agent_name / session_id: Who runs (on every event and result).
        model: The model requests go to first; ``fallbacks`` are tried in order when a
            request fails transiently before the run made progress.
        tools: The registered tools by name, and ``tool_schemas`` as the model sees them.
        request_extras: Request parameters of provider-native tools.
        permissions / working_dir: The policy every call passes, and where relative
            paths resolve.
        hooks: The hook registry.
        approval_handler: Who answers an ASK (None: nobody, so ASK denies, unless
            ``durable`` is set).
        durable: Where a call waiting for approval is saved when no handler can answer
            (``Agent(approval_dir=...)``): the run pauses with ``approval_pending``. When
            set, a response's tool calls run one at a time, each decided then run.
        on_tool_request / on_tool_result: Observers of each call.
        tool_state: The agent's per-agent tool state (``run_python`` interpreters).
        report: Called once when the run ends.
        parent_budget: For a delegated run, the budget of the run that delegated it:
            its usage is charged there too, and it stops when any budget above is spent.
        ancestors: For a delegated run, every agent above it, nearest first: each call
            must pass their current permissions and tools as well as its own.
        file_journal: The agent's file checkpoint journal (None: checkpointing is off):
            the run makes a checkpoint as it starts, and the file tools record into it
            (and into the journal of every agent above, see :attr:`Authority.file_journal`).
        trusted_results: The agent's :class:`~deputy_shiny.trusted.TrustedResults`, or None.
        context: The context policy and tool-result store (automatic compaction before
            requests, large results offloaded); None: neither.
        lineage: For a delegated run, who delegated it (``parent_agent_id``,
            ``parent_run_id``, ``delegation_id``, copied onto its result); None otherwise.
        journal: Where each step of the run is journaled (an agent with a ``store``), so
            another process can resume it (:mod:`deputy_shiny._engine.journal`); None: not.
    """

    agent_id: str
    session_id: str
    model: ChatModel
    working_dir: Path
    permissions: Permissions
    hooks: HookRegistry
    agent_name: str | None = None
    fallbacks: tuple[ChatModel, ...] = ()
    tools: Mapping[str, Tool] = field(default_factory=dict)
    tool_schemas: tuple[dict[str, Any], ...] = ()
    request_extras: Mapping[str, Any] = field(default_factory=dict)
    approval_handler: Callable[..., Any] | None = None
    durable: DurableStore | None = None
    on_tool_request: tuple[Callable[[ContentToolRequest], object], ...] = ()
    on_tool_result: tuple[Callable[[ContentToolResult], object], ...] = ()
    tool_state: ToolState = field(default_factory=ToolState)
    report: Callable[[RunReport], None] = _ignore_report
    parent_budget: SharedBudget | None = None
    ancestors: tuple[Authority, ...] = ()
    file_journal: FileJournal | None = None
    trusted_results: TrustedResults | None = None
    context: ContextRuntime | None = None
    lineage: Lineage | None = None
    journal: JournalOpener | None = None

    @cached_property
    def event_lineage(self) -> dict[str, str | None]:
        """The lineage fields every event of a run with these deps carries (all None
        for a run its caller started)."""
        lineage = self.lineage
        return {
            "parent_agent_id": lineage.parent_agent_id if lineage else None,
            "parent_run_id": lineage.parent_run_id if lineage else None,
            "delegation_id": lineage.delegation_id if lineage else None,
        }

    def hook_fields(self) -> dict[str, Any]:
        """What every hook context of a run with these deps carries besides the event's
        own values: who runs, where, under which policy and model, and its lineage.

        Examples:
            >>> from deputy_shiny.hooks import HookRegistry
            >>> deps = RunDeps("a1", "s1", ChatModel(model="openai/gpt-4.1-mini"),
            ...                Path("."), Permissions(), HookRegistry())
            >>> deps.hook_fields()["provider"]
            {'name': 'openai', 'model': 'gpt-4.1-mini'}
        """
        return {
            "agent_id": self.agent_id,
            "session_id": self.session_id,
            "working_dir": self.working_dir,
            "permissions": self.permissions,
            "provider": {"name": self.model.provider, "model": self.model.name},
            "tools_count": len(self.tools),
            **self.event_lineage,
        }

    def tool_context(
        self, run_id: str, run_context: dict[str, Any], request: ContentToolRequest
    ) -> ToolContext:
        """What a tool call may know: directories from the permissions, and who calls."""
        permissions = self.permissions
        writes = permissions.mode in ("standard", "full")
        return ToolContext(
            working_dir=self.working_dir,
            read_roots=permissions.sandbox_roots(self.working_dir) if permissions.file_read else (),
            write_roots=permissions.write_roots(self.working_dir) if writes else (),
            agent_id=self.agent_id,
            session_id=self.session_id,
            run_id=run_id,
            call_id=request.id,
            tool_name=request.name,
            run_context=run_context,
            state=self.tool_state,
            file_journal=self.file_recorder(),
        )

    def file_recorder(self) -> FileJournal | _Journals | None:
        """What records a file before a tool changes it: this run's journal and those
        of the agents above it (one object the same journal appears in only once)."""
        journals: list[FileJournal] = []
        for journal in (self.file_journal, *(a.file_journal for a in self.ancestors)):
            if journal is not None and all(journal is not j for j in journals):
                journals.append(journal)
        if len(journals) <= 1:
            return journals[0] if journals else None
        return _Journals(tuple(journals))
