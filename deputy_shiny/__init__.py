"""deputy_shiny: a governed LLM agent runtime and a Shiny-for-Python chat kit.

Importing this package is cheap and offline: litellm is imported on the first model
request (or by :func:`warm_up` in a worker thread).

Examples:
    >>> from deputy_shiny import Agent
    >>> from deputy_shiny.testing import ScriptedModel
    >>> Agent(ScriptedModel(["Hello from a scripted model."])).chat("Hi")
    'Hello from a scripted model.'
"""

import importlib
import os
from typing import TYPE_CHECKING

from ._util.version import package_version

if TYPE_CHECKING:
    from .agent import Agent, ConversationCost
    from .approvals import ApprovalDecision, ApprovalRequest
    from .context import CompactionRecord, ContextPolicy
    from .delegation import (
        AgentDefinition,
        agent_definition,
        agent_definition_read,
        agent_definition_resolve,
        agent_definition_write,
    )
    from .errors import (
        AgentRunError,
        ApprovalResumeError,
        CheckpointError,
        CompactionError,
        ConfigurationError,
        DelegationError,
        DeputyError,
        McpError,
        PersistenceError,
        ProviderError,
        SandboxUnavailableError,
        StructuredOutputError,
        ToolInvocationError,
        UsageLimitExceeded,
    )
    from .events import AgentEvent, AgentResult, AgentUsage, CostSummary, StopReason
    from .hooks import (
        HookContext,
        HookMatcher,
        HookPoint,
        HookResultPostToolUse,
        HookResultPreCompact,
        HookResultPreToolUse,
    )
    from .hooks_builtin import hook_block_dangerous_bash, hook_limit_file_writes, hook_log_tools
    from .identity import CallIdentity
    from .mcp import (
        McpConfig,
        McpConnection,
        McpLoadRecord,
        load_mcp_config,
        tools_mcp,
        tools_mcp_async,
    )
    from .messages import (
        ContentImage,
        ContentText,
        ContentThinking,
        ContentToolRequest,
        ContentToolResult,
        Turn,
    )
    from .models import DEMO_MODEL, ChatModel
    from .models._litellm import warm_up
    from .observability import JsonLogFormatter, RunLogFilter, instrument, uninstrument
    from .permissions import (
        PermissionDecision,
        PermissionResultAllow,
        PermissionResultDeny,
        PermissionResultPending,
        Permissions,
        permissions_check,
        permissions_check_async,
        permissions_full,
        permissions_plan,
        permissions_readonly,
        permissions_standard,
    )
    from .persistence.approval_records import approval_read
    from .persistence.approvals import ApprovalContinuation
    from .persistence.checkpoints import FileCheckpoint, FileJournal, FileRewind
    from .sandbox import Sandbox, sandbox_unavailable_reason
    from .skills import (
        Skill,
        SkillInfo,
        skill_check_requirements,
        skill_create,
        skill_load,
        skills_list,
    )
    from .tools import (
        Tool,
        ToolAnnotations,
        ToolState,
        content_image_file,
        content_image_inline,
        set_ask_user_callback,
        tool,
        tool_annotations,
        tool_ask_user,
        tool_edit_file,
        tool_glob_files,
        tool_grep_files,
        tool_list_files,
        tool_metadata,
        tool_multi_edit,
        tool_read_csv,
        tool_read_file,
        tool_read_markdown,
        tool_run_bash,
        tool_run_python,
        tool_web_fetch,
        tool_web_search,
        tool_write_file,
        tools_all,
        tools_code,
        tools_data,
        tools_file,
        tools_interactive,
        tools_preset,
        tools_web,
    )
    from .tools._tool_threads import set_tool_threads, tool_threads
    from .trusted import TrustedResults, result_trusted_results
    from .usage import UsageLimits

    __version__: str
    """The installed distribution's version (``"0.0.0"`` when run from an uninstalled tree)."""

# Where each public name lives. The package imports a module the first time one of its
# names is read (module __getattr__): ``import deputy_shiny`` itself loads none of them,
# and ``from deputy_shiny import Agent`` loads what Agent needs. The imports above say the
# same for type checkers (tests/test_import.py checks that the two agree).
_EXPORTS: dict[str, tuple[str, ...]] = {
    ".agent": ("Agent", "ConversationCost"),
    ".approvals": ("ApprovalDecision", "ApprovalRequest"),
    ".context": ("CompactionRecord", "ContextPolicy"),
    ".delegation": (
        "AgentDefinition",
        "agent_definition",
        "agent_definition_read",
        "agent_definition_resolve",
        "agent_definition_write",
    ),
    ".errors": (
        "AgentRunError",
        "ApprovalResumeError",
        "CheckpointError",
        "CompactionError",
        "ConfigurationError",
        "DelegationError",
        "DeputyError",
        "McpError",
        "PersistenceError",
        "ProviderError",
        "SandboxUnavailableError",
        "StructuredOutputError",
        "ToolInvocationError",
        "UsageLimitExceeded",
    ),
    ".events": ("AgentEvent", "AgentResult", "AgentUsage", "CostSummary", "StopReason"),
    ".hooks": (
        "HookContext",
        "HookMatcher",
        "HookPoint",
        "HookResultPostToolUse",
        "HookResultPreCompact",
        "HookResultPreToolUse",
    ),
    ".hooks_builtin": ("hook_block_dangerous_bash", "hook_limit_file_writes", "hook_log_tools"),
    ".identity": ("CallIdentity",),
    ".mcp": (
        "McpConfig",
        "McpConnection",
        "McpLoadRecord",
        "load_mcp_config",
        "tools_mcp",
        "tools_mcp_async",
    ),
    ".messages": (
        "ContentImage",
        "ContentText",
        "ContentThinking",
        "ContentToolRequest",
        "ContentToolResult",
        "Turn",
    ),
    ".models": ("DEMO_MODEL", "ChatModel"),
    ".models._litellm": ("warm_up",),
    ".observability": ("JsonLogFormatter", "RunLogFilter", "instrument", "uninstrument"),
    ".permissions": (
        "PermissionDecision",
        "PermissionResultAllow",
        "PermissionResultDeny",
        "PermissionResultPending",
        "Permissions",
        "permissions_check",
        "permissions_check_async",
        "permissions_full",
        "permissions_plan",
        "permissions_readonly",
        "permissions_standard",
    ),
    ".persistence.approval_records": ("approval_read",),
    ".persistence.approvals": ("ApprovalContinuation",),
    ".persistence.checkpoints": ("FileCheckpoint", "FileJournal", "FileRewind"),
    ".sandbox": ("Sandbox", "sandbox_unavailable_reason"),
    ".skills": (
        "Skill",
        "SkillInfo",
        "skill_check_requirements",
        "skill_create",
        "skill_load",
        "skills_list",
    ),
    ".tools": (
        "Tool",
        "ToolAnnotations",
        "ToolState",
        "content_image_file",
        "content_image_inline",
        "set_ask_user_callback",
        "tool",
        "tool_annotations",
        "tool_ask_user",
        "tool_edit_file",
        "tool_glob_files",
        "tool_grep_files",
        "tool_list_files",
        "tool_metadata",
        "tool_multi_edit",
        "tool_read_csv",
        "tool_read_file",
        "tool_read_markdown",
        "tool_run_bash",
        "tool_run_python",
        "tool_web_fetch",
        "tool_web_search",
        "tool_write_file",
        "tools_all",
        "tools_code",
        "tools_data",
        "tools_file",
        "tools_interactive",
        "tools_preset",
        "tools_web",
    ),
    ".tools._tool_threads": ("set_tool_threads", "tool_threads"),
    ".trusted": ("TrustedResults", "result_trusted_results"),
    ".usage": ("UsageLimits",),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
# The public submodules an import of the package used to load, so that
# ``import deputy_shiny; deputy_shiny.errors.McpError`` keeps working.
_SUBMODULES = frozenset({module.split(".")[1] for module in _EXPORTS} | {"conversation"})

if not TYPE_CHECKING:  # at runtime only: type checkers see the imports above

    def __getattr__(name: str) -> object:
        """A public name, imported from its module on first use (then a plain attribute)."""
        if name == "__version__":
            return package_version()  # reads the metadata (importlib.metadata, ~50 ms)
        module = _MODULE_OF.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module, __name__), name)
        elif name in _SUBMODULES:
            value = importlib.import_module(f".{name}", __name__)
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


# Of the exceptions, only the family roots an app catches are here; every other one is
# in deputy_shiny.errors, whose docstring lists each family under its root.
__all__ = [
    "DEMO_MODEL",
    "Agent",
    "AgentDefinition",
    "AgentEvent",
    "AgentResult",
    "AgentRunError",
    "AgentUsage",
    "ApprovalContinuation",
    "ApprovalDecision",
    "ApprovalRequest",
    "ApprovalResumeError",
    "CallIdentity",
    "ChatModel",
    "CheckpointError",
    "CompactionError",
    "CompactionRecord",
    "ConfigurationError",
    "ContentImage",
    "ContentText",
    "ContentThinking",
    "ContentToolRequest",
    "ContentToolResult",
    "ContextPolicy",
    "ConversationCost",
    "CostSummary",
    "DelegationError",
    "DeputyError",
    "FileCheckpoint",
    "FileJournal",
    "FileRewind",
    "HookContext",
    "HookMatcher",
    "HookPoint",
    "HookResultPostToolUse",
    "HookResultPreCompact",
    "HookResultPreToolUse",
    "JsonLogFormatter",
    "McpConfig",
    "McpConnection",
    "McpError",
    "McpLoadRecord",
    "PermissionDecision",
    "PermissionResultAllow",
    "PermissionResultDeny",
    "PermissionResultPending",
    "Permissions",
    "PersistenceError",
    "ProviderError",
    "RunLogFilter",
    "Sandbox",
    "SandboxUnavailableError",
    "Skill",
    "SkillInfo",
    "StopReason",
    "StructuredOutputError",
    "Tool",
    "ToolAnnotations",
    "ToolInvocationError",
    "ToolState",
    "TrustedResults",
    "Turn",
    "UsageLimitExceeded",
    "UsageLimits",
    "__version__",
    "agent_definition",
    "agent_definition_read",
    "agent_definition_resolve",
    "agent_definition_write",
    "approval_read",
    "content_image_file",
    "content_image_inline",
    "hook_block_dangerous_bash",
    "hook_limit_file_writes",
    "hook_log_tools",
    "instrument",
    "load_mcp_config",
    "permissions_check",
    "permissions_check_async",
    "permissions_full",
    "permissions_plan",
    "permissions_readonly",
    "permissions_standard",
    "result_trusted_results",
    "sandbox_unavailable_reason",
    "set_ask_user_callback",
    "set_tool_threads",
    "skill_check_requirements",
    "skill_create",
    "skill_load",
    "skills_list",
    "tool",
    "tool_annotations",
    "tool_ask_user",
    "tool_edit_file",
    "tool_glob_files",
    "tool_grep_files",
    "tool_list_files",
    "tool_metadata",
    "tool_multi_edit",
    "tool_read_csv",
    "tool_read_file",
    "tool_read_markdown",
    "tool_run_bash",
    "tool_run_python",
    "tool_threads",
    "tool_web_fetch",
    "tool_web_search",
    "tool_write_file",
    "tools_all",
    "tools_code",
    "tools_data",
    "tools_file",
    "tools_interactive",
    "tools_mcp",
    "tools_mcp_async",
    "tools_preset",
    "tools_web",
    "uninstrument",
    "warm_up",
]

if os.environ.get("DEPUTY_OTEL"):  # tracing asked for at import (guide: Traces and logs)
    importlib.import_module(".observability", __name__).instrument_from_environment(os.environ)
