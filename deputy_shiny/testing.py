"""Test models: scripted stand-ins for an LLM, so agents can be tested offline and fast.

:class:`ScriptedModel` answers each request with the next scripted reply;
:class:`FunctionModel` answers with whatever a function of the conversation returns.
Both are real litellm providers (each model registers its own), so an agent streams
from them exactly as from a hosted model: text in chunks, tool calls as tool-call
deltas, usage on the last chunk, errors as the litellm exceptions a provider raises.
Every request is recorded in ``model.requests``.

Importing this module does not import litellm.

Examples:
    >>> from deputy_shiny import Agent, tool, tool_annotations
    >>> from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
    >>> def add(a: int, b: int) -> int:
    ...     return a + b
    >>> model = ScriptedModel([
    ...     ScriptedReply(tool_calls=[ScriptedToolCall("add", {"a": 1, "b": 2})]),
    ...     "The sum is 3.",
    ... ])
    >>> local = tool_annotations(read_only_hint=True, open_world_hint=False)
    >>> agent = Agent(model, tools=[tool(add, description="Add two numbers.", annotations=local)])
    >>> agent.chat("What is 1 + 2?")
    'The sum is 3.'
    >>> len(model.requests)
    2
"""

from __future__ import annotations

from .errors import ScriptedModelExhausted
from .models._replies import ProviderFailure, Reply, ScriptedReply, ScriptedToolCall
from .models.scripted import FunctionModel, ReplyFunction, ScriptedModel

__all__ = [
    "FunctionModel",
    "ProviderFailure",
    "Reply",
    "ReplyFunction",
    "ScriptedModel",
    "ScriptedModelExhausted",
    "ScriptedReply",
    "ScriptedToolCall",
]
