"""deputy_shiny: a governed LLM agent runtime and a Shiny-for-Python chat kit.

Importing this package is cheap and offline: litellm is imported on the first model
request (or by :func:`warm_up` in a worker thread).

Example:
    >>> from deputy_shiny import Agent
    >>> from deputy_shiny.testing import ScriptedModel
    >>> Agent(ScriptedModel(["Hello from a scripted model."])).chat("Hi")
    'Hello from a scripted model.'
"""

from ._litellm import warm_up
from .agent import Agent, ConversationCost
from .errors import (
    AgentBusyError,
    AgentRunError,
    ConfigurationError,
    DeputyError,
    InvalidLimitError,
    InvalidModelError,
    InvalidToolError,
    MissingCredentialsError,
    ProviderError,
    RunContextError,
    StructuredOutputError,
    SyncInAsyncError,
    ToolArgumentsError,
    ToolInvocationError,
    ToolNameConflictError,
    ToolRejectedError,
    UnknownModelError,
    UsageLimitExceeded,
    tool_reject,
)
from .events import AgentEvent, AgentResult, AgentUsage, CostSummary, StopReason
from .limits import UsageLimits
from .messages import (
    ContentImage,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    Turn,
)
from .models import DEMO_MODEL, ChatModel
from .tools import Tool, ToolAnnotations, tool, tool_annotations, tool_metadata

__all__ = [
    "DEMO_MODEL",
    "Agent",
    "AgentBusyError",
    "AgentEvent",
    "AgentResult",
    "AgentRunError",
    "AgentUsage",
    "ChatModel",
    "ConfigurationError",
    "ContentImage",
    "ContentText",
    "ContentThinking",
    "ContentToolRequest",
    "ContentToolResult",
    "ConversationCost",
    "CostSummary",
    "DeputyError",
    "InvalidLimitError",
    "InvalidModelError",
    "InvalidToolError",
    "MissingCredentialsError",
    "ProviderError",
    "RunContextError",
    "StopReason",
    "StructuredOutputError",
    "SyncInAsyncError",
    "Tool",
    "ToolAnnotations",
    "ToolArgumentsError",
    "ToolInvocationError",
    "ToolNameConflictError",
    "ToolRejectedError",
    "Turn",
    "UnknownModelError",
    "UsageLimitExceeded",
    "UsageLimits",
    "tool",
    "tool_annotations",
    "tool_metadata",
    "tool_reject",
    "warm_up",
]
