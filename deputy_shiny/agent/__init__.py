"""The Agent: a model, tools and limits, run as one governed loop.

:class:`Agent` is a façade over the parts in this folder. Each component owns its state,
is built in ``Agent.__init__`` from the collaborators it needs (passed in, never read
from the agent), and the Agent's public methods over it read at most two of the
agent's attributes (``tests/test_agent_components.py`` checks it):

- ``_agent.py``: construction, identity, the conversation, the model and permissions,
  and the run methods (``run``, ``run_async``, ``run_sync``), all adapters of the one
  engine in :mod:`deputy_shiny._engine`, ``usage``, ``cost``, ``token_count`` and
  ``clone``; it registers the saved sessions' sections of the components;
- ``_session_sections.py``: the saved session's ``permission_mode`` section (a
  restored conversation keeps a narrowed mode, never a wider one);
- ``_usage.py``: ``get_tokens`` and ``get_cost``, usage by turn as ellmer's;
- ``_checks.py``: the constructor's argument checks;
- ``_clone.py``: ``clone()``, the twin rebuilt part by part;
- ``_config_change.py``: ``HookFirer``, the hooks fired outside a run (``ConfigChange``
  and its notice, from ``set_permission_mode`` and ``set_model``);
- ``_guard.py``: :class:`~deputy_shiny.agent._guard.Guard`, the one "retained by another
  agent / running a task" check every component uses;
- ``_chat.py`` and ``_streams.py``: the chat and stream adapters (``chat*``,
  ``stream*``) and the chunks they yield, a stream controller's cancel; every run method
  takes the keywords :class:`RunKeywords` declares (from ``_engine/options.py``);
- ``_echo.py``: ``echo=`` of the chat adapters, as deputy's;
- ``_turns.py``: ``Turns``, the conversation as ellmer shows it (``get_turns``,
  ``set_turns``, even during a run, ``add_turn``, the system prompt);
- ``_tool_registry.py``: ``AgentTools``, the registered tools and provider-native search;
- ``_skills.py``: ``Skills``, the loaded skills;
- ``_approvals.py``: ``Approvals``, the approval handler and durable approvals
  (``pending_approval``, ``resume_approval``);
- ``_runs.py``: ``RunResumer``, held by ``Approvals``: runs journaled in the store and
  resumed after their process died (``interrupted_run``, ``resume_run``);
- ``_context.py``: ``ConversationContext``, the context policy, compaction, offloaded
  results and saved sessions;
- ``_checkpoints.py``: ``FileCheckpoints``, the file checkpoint journal;
- ``_mcp.py``: ``McpTools``, loading MCP servers' tools;
- ``_delegation/``: ``Delegator`` (methods.py), what every Agent delegates with (the
  host that records delegations, retained agents, graphs and their policies).

Examples:
    >>> from deputy_shiny.agent import Agent
    >>> from deputy_shiny.testing import ScriptedModel
    >>> Agent(ScriptedModel(["Hi."])).chat("Hello")
    'Hi.'
"""

from __future__ import annotations

from .._engine.options import RunKeywords, StructuredKeywords
from ..models import ModelLike
from ..usage import ConversationCost
from . import _session_sections  # noqa: F401  (registers the permission_mode section)
from ._agent import Agent

__all__ = ["Agent", "ConversationCost", "ModelLike", "RunKeywords", "StructuredKeywords"]
