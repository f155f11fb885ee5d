"""``Agent.clone()``: a new agent with the same configuration and a copy of the conversation.

It lives apart from ``_agent.py`` because it reads every part the constructor made
(the model, limits, hooks, approvals, journal, context policy, delegation host, tools)
and rebuilds each for the twin: nothing mutable is shared.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError

__all__ = ["clone_agent"]


def clone_agent(agent: Any, agent_class: type[Any]) -> Any:
    """See :meth:`Agent.clone` (``agent_class`` is ``Agent``: this module does not import it)."""
    Agent = agent_class
    if type(agent) is not Agent or agent._store is not None:  # a store's records are its session's
        raise ConfigurationError(
            f"{type(agent).__name__}.clone(): a lead agent, or an agent with a store, is not cloned"
        )
    agent._guard.idle("clone the agent")
    journal = agent._checkpoints.journal
    policy = agent._context.policy
    host = agent._delegator.host
    offloads = policy.offload_dir is not None
    twin = Agent(
        agent._model,
        system_prompt=None,
        usage_limits=agent._usage_limits,
        working_dir=agent._working_dir,
        session_id=agent._session_id,
        run_context=agent._run_context,
        agent_name=agent._agent_name,
        fallback_models=agent._fallbacks,
        permissions=agent._permissions,
        hooks=agent._hooks.snapshot(),
        approval_handler=agent._approvals.handler,
        delegation_disclosure=host.disclosure,
        delegation_observation=host.observation,
        delegation_scope=host.scope,
        enable_file_checkpointing=journal is not None,
        trusted_results=agent._trusted_results,
        approval_dir=agent._approvals.approval_dir,
        context_policy=policy,
        file_checkpoint_max_file_bytes=getattr(journal, "max_file_bytes", 50 * 1024**2),
        file_checkpoint_max_journal_bytes=getattr(journal, "max_journal_bytes", 250 * 1024**2),
    )
    twin._tools.add_unguarded(
        t
        for name, t in agent._tools.all().items()
        # A tool bound to this agent is its own (an MCP connection's); the
        # constructor made the twin's read_tool_result over its own store.
        if getattr(t, "agent_id", None) is None and not (offloads and name == "read_tool_result")
    )
    twin._context.load_conversation(agent._context.save_conversation())()
    return twin
