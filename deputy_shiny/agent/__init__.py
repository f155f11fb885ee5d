"""The Agent: a model, tools and limits, run as one governed loop.

:class:`Agent` is a façade over the parts in this folder, each owning one concern:

- ``_agent.py``: construction, identity, the conversation, tools and skills, and the
  run methods (``run``, ``run_async``, ``run_sync``), all adapters of the one engine
  in :mod:`deputy_shiny._engine`;
- ``_chat.py`` and ``_streams.py``: the chat and stream adapters (``chat*``,
  ``stream*``) and the chunks they yield; every run method takes the keywords
  :class:`RunKeywords` declares (from ``_engine/options.py``);
- ``_tool_registry.py``: the registered tools and provider-native search;
- ``_approvals.py``: durable approvals (``pending_approval``, ``resume_approval``);
- ``_context.py``: the context policy, compaction and saved sessions;
- ``_checkpoints.py``: file checkpoints and the trusted-results policy;
- ``_mcp.py``: loading MCP servers' tools;
- ``_delegation/``: what every Agent delegates with (the host that records
  delegations, retained agents, graphs and their policies).

Example:
    >>> from deputy_shiny.agent import Agent
    >>> from deputy_shiny.testing import ScriptedModel
    >>> Agent(ScriptedModel(["Hi."])).chat("Hello")
    'Hi.'
"""

from __future__ import annotations

from .._engine.options import RunKeywords, StructuredKeywords
from ..models import ModelLike
from ..usage import ConversationCost
from ._agent import Agent

__all__ = ["Agent", "ConversationCost", "ModelLike", "RunKeywords", "StructuredKeywords"]
