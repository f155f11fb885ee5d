"""The one exception hierarchy of deputy_shiny.

Every error the library raises on purpose is a ``DeputyError`` (root), so an app
can catch them all in one place. Each class says when it is raised and its
message says what to do next.

The family roots (marked *root*) are importable from ``deputy_shiny`` too; every
other class lives only here. The families:

- ``ConfigurationError`` (root; also a ``ValueError``): a malformed value, raised
  before any request: ``InvalidModelError``, ``InvalidLimitError``,
  ``InvalidToolError`` (and its ``ToolNameConflictError``), ``PermissionsError`` (and
  its ``PermissionDeniedError``: the permissions refuse what an API call asked for),
  ``InvalidHookError``, ``SkillError`` (and its ``SkillLoadError``),
  ``AgentDefinitionError``, ``RunContextError``, ``TrustedResultsError``,
  ``ContextPolicyError``, ``CommandLineError`` (the ``deputy`` command's flags);
  ``McpConfigError`` is one too.
- ``ProviderError`` (root): a model request failed at the provider:
  ``MissingCredentialsError``, ``CredentialsRefusedError``, ``UnknownModelError``,
  ``ProviderTimeoutError``.
- How a run ends in error (``run_async`` and friends): ``UsageLimitExceeded``,
  ``StructuredOutputError`` and ``AgentRunError`` (roots, each carrying the partial
  ``result``).
- ``ToolInvocationError`` (root): a tool failed with a message for the model;
  ``SandboxUnavailableError`` (root) when model-run code cannot be confined.
  Beside it: ``ToolArgumentsError`` (a call's arguments fail the schema) and
  ``PathDenied`` (a path outside what a file tool may touch).
- ``ApprovalResumeError`` (root): a durable approval cannot be resumed:
  ``ApprovalDecidedError``, ``ApprovalMismatchError``; ``RunResumeError``: an
  interrupted run cannot be resumed (the same state machine).
- ``McpError`` (root): ``McpConfigError`` (``McpReplConfigError``,
  ``McpUnknownServerError``), ``McpConnectionError`` (``McpTimeoutError``),
  ``McpBusyError``.
- ``DelegationError`` (root): ``DelegationDisclosureError``, ``DelegationGraphError``,
  ``DelegationTaskError``, ``RetainError``, ``AgentRetainedError``,
  ``RetainedHandleError`` (``RetainedAgentReleasedError``), ``RetainedAgentBusyError``,
  ``RetainedAgentChangedError``, ``RetainedAgentExhaustedError``.
- ``PersistenceError`` (root): ``PersistenceCorruptError``
  (``PersistenceNotAuthenticError``), ``SessionError``; from a store:
  ``StoreUnavailableError``, ``StoreSchemaError``, ``StoreConflictError``.
- ``CheckpointError`` (root): ``CheckpointLimitError``, ``CheckpointPathError``,
  ``CheckpointCorruptError``.
- ``CompactionError`` (root): compaction could not write a summary; beside it
  ``ToolResultReferenceError`` (an offloaded result cannot be read back).
- ``HookExecutionError``: a hook callback failed (never raised by a run; see
  ``HookRun.raise_for_failure``).
- Misuse: ``AgentBusyError`` and ``SyncInAsyncError`` (both ``RuntimeError``);
  ``ScriptedModelExhausted`` (a test model ran out of replies).
- Raised by an app's own code: ``ToolRejectedError`` (from an ``on_tool_request``
  callback) and ``AskUserDeclined`` (from an ask_user callback).
- The chat's uploads: ``AttachmentRefused`` (one file not accepted) and
  ``AttachmentsRefused`` (a message's files, none of them saved or sent).

Examples:
    >>> from deputy_shiny import ConfigurationError, DeputyError
    >>> from deputy_shiny.errors import InvalidModelError
    >>> issubclass(InvalidModelError, ConfigurationError)
    True
    >>> issubclass(ConfigurationError, DeputyError)
    True
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address
from typing import Any

# The public exceptions; the internal signals at the end of the file are not listed.
__all__ = [
    "AgentBusyError",
    "AgentDefinitionError",
    "AgentRetainedError",
    "AgentRunError",
    "ApprovalDecidedError",
    "ApprovalMismatchError",
    "ApprovalResumeError",
    "AskUserDeclined",
    "AttachmentRefused",
    "AttachmentsRefused",
    "CheckpointCorruptError",
    "CheckpointError",
    "CheckpointLimitError",
    "CheckpointPathError",
    "CommandLineError",
    "CompactionError",
    "ConfigurationError",
    "ContextPolicyError",
    "CredentialsRefusedError",
    "DelegationDisclosureError",
    "DelegationError",
    "DelegationGraphError",
    "DelegationTaskError",
    "DeputyError",
    "HookExecutionError",
    "InvalidHookError",
    "InvalidLimitError",
    "InvalidModelError",
    "InvalidToolError",
    "McpBusyError",
    "McpConfigError",
    "McpConnectionError",
    "McpError",
    "McpReplConfigError",
    "McpTimeoutError",
    "McpUnknownServerError",
    "MissingCredentialsError",
    "PathDenied",
    "PermissionDeniedError",
    "PermissionsError",
    "PersistenceCorruptError",
    "PersistenceError",
    "PersistenceNotAuthenticError",
    "ProviderError",
    "ProviderTimeoutError",
    "RetainError",
    "RetainedAgentBusyError",
    "RetainedAgentChangedError",
    "RetainedAgentExhaustedError",
    "RetainedAgentReleasedError",
    "RetainedHandleError",
    "RunContextError",
    "RunResumeError",
    "SandboxUnavailableError",
    "ScriptedModelExhausted",
    "SessionError",
    "SkillError",
    "SkillLoadError",
    "StoreConflictError",
    "StoreSchemaError",
    "StoreUnavailableError",
    "StructuredOutputError",
    "SyncInAsyncError",
    "ToolArgumentsError",
    "ToolInvocationError",
    "ToolNameConflictError",
    "ToolRejectedError",
    "ToolResultReferenceError",
    "TrustedResultsError",
    "UnknownModelError",
    "UsageLimitExceeded",
]


class DeputyError(Exception):
    """Base class of every error deputy_shiny raises on purpose."""


class ConfigurationError(DeputyError, ValueError):
    """A value given to a constructor or method is malformed (raised at once, before any
    request)."""


class InvalidModelError(ConfigurationError):
    """A model string or model object cannot be used (wrong shape or type).

    Provider problems (unknown model at the provider, missing key) are found only at
    the first request and raise :class:`ProviderError` subclasses instead.
    """


class InvalidLimitError(ConfigurationError):
    """A usage limit is negative, not a number, or otherwise unusable."""


class InvalidToolError(ConfigurationError):
    """A tool cannot be defined or registered: not callable, a signature that cannot be
    described as JSON schema, a malformed name, or malformed annotations."""


class ToolNameConflictError(InvalidToolError):
    """Two tools share a name: within one batch, or with a registered tool (without
    ``replace=True``)."""


class PermissionsError(ConfigurationError):
    """A :class:`~deputy_shiny.permissions.Permissions` value, mode or permission callback is
    malformed (raised when the value is made or the mode is set)."""


class PermissionDeniedError(PermissionsError):
    """The permissions refuse what an API call asked for directly: deputy's
    ``deputy_permission_denied``. Raised by registering a provider-native web tool the
    policy does not authorize (``Agent(tools=...)``, ``register_tools``): such a tool
    runs on the provider's servers, so it is authorized once, there. A model's tool call
    that is denied is never raised: the model sees the denial as the call's result.

    Attributes:
        tool_name: The tool refused (None when no tool is concerned).
        permission_mode: The mode in force.
        reason: Why, without the tool's name (the message says both).

    Examples:
        >>> err = PermissionDeniedError("web_search needs web=True", tool_name="web_search",
        ...                             permission_mode="standard", reason="needs web=True")
        >>> err.tool_name, err.permission_mode, isinstance(err, PermissionsError)
        ('web_search', 'standard', True)
    """

    def __init__(
        self,
        message: str,
        *,
        tool_name: str | None = None,
        permission_mode: str | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.permission_mode = permission_mode
        self.reason = reason if reason is not None else message


class InvalidHookError(ConfigurationError):
    """A hook matcher, hook result or built-in hook was given a value it cannot use (raised
    when the :class:`~deputy_shiny.hooks.HookMatcher` or result is made)."""


class HookExecutionError(DeputyError):
    """A hook callback failed (raised, returned the wrong type, or timed out): deputy's
    ``deputy_hook``. The engine never raises it during a run (a failed ``PreToolUse`` or
    ``PermissionRequest`` hook denies the call; other failures are logged in
    :meth:`~deputy_shiny.hooks.HookRegistry.last_errors`); an app that runs hooks
    itself raises it with :meth:`~deputy_shiny.hooks.HookRun.raise_for_failure`.

    Attributes:
        hook_event: The hook event (``"PreToolUse"``, ...).
        tool_name: The tool, for tool events.
        callback: The failing callback's name.

    Examples:
        >>> err = HookExecutionError("hook 0 (audit) failed: OSError: disk full",
        ...                          hook_event="PostToolUse", callback="audit")
        >>> err.hook_event, err.callback
        ('PostToolUse', 'audit')
    """

    def __init__(
        self,
        message: str,
        *,
        hook_event: str,
        tool_name: str | None = None,
        callback: str | None = None,
    ) -> None:
        super().__init__(message)
        self.hook_event = hook_event
        self.tool_name = tool_name
        self.callback = callback


class SkillError(ConfigurationError):
    """A Skill, its requirements, or an argument of a skill function is malformed (raised by
    ``Skill(...)``, :func:`~deputy_shiny.skills.skill_create` and friends)."""


class SkillLoadError(SkillError):
    """:func:`~deputy_shiny.skills.skill_load` cannot load a skill directory; the message
    names the file and field."""


class AgentDefinitionError(ConfigurationError):
    """An agent definition is malformed, or its file cannot be read, parsed or written.

    Raised by :class:`~deputy_shiny.delegation.AgentDefinition` and the
    ``agent_definition_*`` functions; for a file, the message names the file, the problem
    and (when there is one) the field.
    """


class RunContextError(ConfigurationError):
    """``run_context`` holds a credential-like key, a non-JSON value, or tries to change an
    ID field."""


class AgentBusyError(DeputyError, RuntimeError):
    """A run (or a conversation change) was started while the agent is already running."""


class SyncInAsyncError(DeputyError, RuntimeError):
    """A blocking ``*_sync`` method (or ``chat``/``stream``) was called inside a running event loop.

    Use the ``async`` method (``await agent.run_async(...)``) there instead.
    """


class ProviderError(DeputyError):
    """A model request failed at the provider.

    Attributes:
        transient: True for failures worth retrying on another model (connection
            errors and HTTP 408, 429, 500, 502, 503, 504).
        status_code: The HTTP status, when the provider gave one.
        result: The run's partial result, when raised by ``run_async`` and friends.
    """

    def __init__(self, message: str, *, transient: bool = False, status_code: int | None = None):
        super().__init__(message)
        self.transient = transient
        self.status_code = status_code
        self.result: Any = None


class MissingCredentialsError(ProviderError):
    """No API key for the provider: none is set, or the provider said none was sent
    (set its environment variable or pass ``ChatModel(api_key=...)``)."""


class CredentialsRefusedError(ProviderError):
    """The provider refused the API key that was sent (HTTP 401: wrong, revoked or for
    another account or endpoint): the key is there, but it is not accepted."""


class ProviderTimeoutError(ProviderError):
    """The provider sent nothing within a time limit of the model's
    (:class:`~deputy_shiny.models.ChatModel` ``timeout``, ``idle_timeout`` or
    ``total_timeout``).

    Attributes:
        host: Where the request went (``host:port``, or the provider's name).
        limit: The limit that ran out, in seconds.
        phase: ``"first_byte"`` (the reply never started), ``"idle"`` (it stopped
            mid-reply) or ``"total"`` (the request's attempts used up ``total_timeout``).
    """

    def __init__(
        self,
        message: str,
        *,
        host: str,
        limit: float,
        phase: str,
        transient: bool = True,
        status_code: int | None = None,
    ):
        super().__init__(message, transient=transient, status_code=status_code)
        self.host = host
        self.limit = limit
        self.phase = phase


class UnknownModelError(ProviderError):
    """The provider (or litellm) does not know the model string."""


class UsageLimitExceeded(DeputyError):
    """A usage limit with ``on_exceed="error"`` was reached.

    Attributes:
        stop_reason: Which limit, e.g. ``"request_limit"`` or ``"cost_limit"``.
        result: The partial :class:`~deputy_shiny.events.AgentResult` of the run.
    """

    def __init__(self, message: str, *, stop_reason: str, result: Any = None):
        super().__init__(message)
        self.stop_reason = stop_reason
        self.result = result


class CommandLineError(ConfigurationError):
    """The ``deputy`` command line cannot be run as given; its message is the one line
    shown (exit status 2)."""


class StructuredOutputError(DeputyError):
    """Structured output could not be extracted or was still rejected after ``max_corrections``."""

    def __init__(self, message: str, *, result: Any = None):
        super().__init__(message)
        self.result = result


class AgentRunError(DeputyError):
    """A run ended with an error; ``result`` holds what was done before it."""

    def __init__(self, message: str, *, result: Any = None, cause: Any = None):
        super().__init__(message)
        self.result = result
        self.cause = cause


class PathDenied(DeputyError):
    """A path falls outside the directories a tool may touch.

    Raised by the path confinement behind the built-in file and data tools (and the
    permission check of their path arguments); the tool call fails with the message.

    Attributes:
        rule: ``traversal``, ``home``, ``outside``, ``symlink``, ``secret`` (the server's
            own keys and records) or ``invalid``.
        path: The path as given.
    """

    def __init__(self, message: str, *, rule: str, path: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.path = path


class AskUserDeclined(DeputyError):
    """Raise from an ask_user callback when the user will not answer (closed the form, etc.).

    The model then gets a normal result saying the user declined to answer.

    Examples:
        >>> def never(questions, context):
        ...     raise AskUserDeclined("closed the dialog")
    """


class ToolInvocationError(DeputyError):
    """Raise inside a tool to return a clean error message to the model (no traceback)."""


class SandboxUnavailableError(ToolInvocationError):
    """Model-run code cannot be confined as asked: bubblewrap is missing or cannot create
    its namespaces, or a process cap cannot be enforced. The message names the fix
    (install bubblewrap, or ``Sandbox(kind="none")`` to opt out on purpose); the code
    never runs unconfined instead."""


class ToolRejectedError(DeputyError):
    """Raise from an ``on_tool_request`` callback to refuse that one tool call.

    The call does not run; the model sees ``Tool call rejected: <reason>`` as the
    call's error result and the run goes on.

    Examples:
        >>> def no_deletes(request):
        ...     if request.name == "delete_file":
        ...         raise ToolRejectedError("deleting files is not allowed here")
    """


class ToolArgumentsError(DeputyError):
    """The model called a tool with arguments that are malformed or fail its schema.

    Raised by ``Tool.parse_arguments`` for JSON that does not parse, a value that is
    not an object, a missing required or unknown argument, or a value of the wrong
    type. The message is written for the model to read and fix its call.

    Attributes:
        tool_name: The tool that was called, when known.
    """

    def __init__(self, message: str, *, tool_name: str | None = None):
        super().__init__(message)
        self.tool_name = tool_name


class DelegationError(DeputyError):
    """A delegation request the lead cannot carry out: an unknown delegation id, or a
    read of a result that does not exist."""


class DelegationDisclosureError(DelegationError):
    """The lead's ``DelegationDisclosure`` refuses this requester: nothing is shown."""


class RetainError(DelegationError):
    """``retain_agent`` refused: the agent is a LeadAgent, the retaining agent itself,
    already retained, running, retaining others, has fallback models or provider-native
    tools, or the retaining agent already holds 32 agents."""


class AgentRetainedError(DelegationError):
    """The agent is retained by another agent: it cannot be run directly, and its
    conversation, prompt, model, tools, hooks, observers and permissions cannot change
    until its owner calls ``release_agent``."""


class RetainedHandleError(DelegationError):
    """A retained-agent handle cannot be used: it belongs to another agent, was never
    issued, or was released (see :class:`RetainedAgentReleasedError`)."""


class RetainedAgentReleasedError(RetainedHandleError):
    """The handle's agent was released; retain it again for a new handle."""


class RetainedAgentBusyError(DelegationError):
    """The retained agent is running a task: wait for it (or ``cancel_agent``) first."""


class RetainedAgentChangedError(DelegationError):
    """The retained agent was changed since it was retained (its tools, model, prompt,
    hooks, observers, permissions or conversation): release it and retain it again."""


class RetainedAgentExhaustedError(DelegationError):
    """The handle has used all of its ``max_runs`` tasks."""


class DelegationGraphError(DelegationError):
    """A delegation graph refused: ``retain_agent_graph`` arguments that do not form a
    graph (an agent named ``root``, a route to an unknown agent, a route tool name that
    clashes), a second graph before ``release_agent_graph``, a graph limit
    (``max_depth``, ``max_delegations``, ``max_concurrency``) refusing a
    ``continue_agent``, or ``release_agent_graph`` while an agent in it is running."""


class DelegationTaskError(DelegationError, ValueError):
    """A task for a retained agent is empty, not a string, or over 64 KiB (UTF-8)."""


# --------------------------------------------------------------------------- MCP


class McpError(DeputyError):
    """Base class of the MCP errors; raised itself when a server answers a request with an
    error, or lacks something a connection asked for (an allowlisted tool it does not offer).
    """


class McpConfigError(McpError, ConfigurationError):
    """An MCP server configuration is malformed: unreadable JSON, a missing or wrong field,
    an unknown ``${VAR}`` in a header. The message names the server and the field."""


class McpReplConfigError(McpConfigError):
    """An mcp-repl server entry does not pin a sandbox deputy_shiny can check: its final
    ``--sandbox`` is missing, is not the requested ``read-only`` / ``workspace-write``, or
    is overridden by ``--config sandbox_mode=...``; or the entry is not a local command
    running ``--interpreter python``. Raised before any process starts; the message names
    the server and the argument to fix."""


class McpUnknownServerError(McpConfigError):
    """A selected server name is not in the MCP configuration; the message lists the
    configured names (``known``)."""

    def __init__(self, message: str, *, known: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.known = known


class McpConnectionError(McpError):
    """An MCP connection could not start, its server went away (the process exited, the
    HTTP session ended), or it is closed. A closed connection never reconnects by itself:
    open a new one (``agent.load_mcp(...)`` or ``McpConnection.open(...)``)."""


class McpBusyError(McpError):
    """A request was sent to an MCP connection that is still serving another one: each
    connection serves one request at a time, and an overlapping one fails at once."""


class McpTimeoutError(McpConnectionError, TimeoutError):
    """An MCP request outlived its timeout; the connection was closed (its server process
    stopped), so later calls on it raise :class:`McpConnectionError`."""


class PersistenceError(DeputyError):
    """A file deputy_shiny saves or reads (a session, a durable approval, a checkpoint
    journal) cannot be written or read: a missing file or directory, a refused target
    (a symlink, a directory), or data that is not plain JSON."""


class PersistenceCorruptError(PersistenceError):
    """A saved file is not what deputy_shiny wrote: truncated, damaged, edited (it is not
    authentic), of another kind or version, too large, or a symlink. Nothing is loaded
    from it."""


class PersistenceNotAuthenticError(PersistenceCorruptError):
    """A saved record's HMAC does not verify with this server's record key: someone
    without the key wrote or changed it (a recomputed checksum does not help), it was
    written with another key, or it predates record authentication. Nothing is loaded
    from it."""


class StoreUnavailableError(PersistenceError):
    """The store cannot be reached now: the database is down, refuses the connection,
    or did not answer within the store's timeouts. Nothing was changed by the call that
    failed; the same call works again once the store is back."""


class StoreSchemaError(PersistenceError):
    """The database's schema does not match this deputy_shiny: it was migrated by a newer
    version (upgrade deputy_shiny), or it is older and automatic migration is off (the
    message names the command that migrates it). Nothing was read or written."""


class StoreConflictError(PersistenceError):
    """A store write expected a record's revision (or its absence) that was not there:
    another writer changed or created it first. Read it again and decide."""


class CheckpointError(DeputyError):
    """A file checkpoint operation failed: checkpointing is off
    (``enable_file_checkpointing=False``), or the checkpoint id is unknown. The
    subclasses say when a change or a rewind was refused."""


class CheckpointLimitError(CheckpointError):
    """Recording a file's previous contents would pass a checkpoint cap
    (``file_checkpoint_max_file_bytes`` or ``file_checkpoint_max_journal_bytes``). The
    file tool call is refused and nothing is written; rewind or raise the cap."""


class CheckpointPathError(CheckpointError):
    """A checkpointed path is not a plain file inside the agent's working directory: it
    is (or became) a symlink, it lies outside the working directory, or it is now a
    directory. Nothing is written through it."""


class CheckpointCorruptError(CheckpointError):
    """The checkpoint journal (its index, a stored file, or a state given to
    ``restore_checkpoint_state``) is not what deputy_shiny wrote: damaged, edited (not
    authentic, or a hash does not match), or naming a path outside the working directory.
    Nothing is restored from it."""


class TrustedResultsError(ConfigurationError):
    """A tool change would let a tool get around a :class:`TrustedResults` policy: a
    trusted tool is missing or is not a local function tool, or another tool runs code,
    delegates, or may write or reach the open world without being exempted. The tools
    stay as they were."""


class ApprovalResumeError(DeputyError):
    """A durable approval cannot be resumed (see :meth:`~deputy_shiny.Agent.resume_approval`):
    the agent has no ``approval_dir``, the path is not an approval of that directory, the
    decision is malformed, or one of the subclasses below."""


class ApprovalDecidedError(ApprovalResumeError):
    """The approval was already decided (each is decided once), is being resumed by
    another process right now, or ended (``completed``, ``stopped``, ``indeterminate``).
    ``status`` is the record's status."""

    def __init__(self, message: str, *, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


class ApprovalMismatchError(ApprovalResumeError):
    """The agent resuming an approval is not the one that saved it: another agent or
    session id, working dir or approval dir, other tool definitions (fingerprints), no
    permission callback where one was saved, or a conversation that moved on since.
    Nothing was decided: fix the agent and resume again."""


class RunResumeError(ApprovalResumeError):
    """An interrupted run cannot be resumed (see :meth:`~deputy_shiny.Agent.resume_run`):
    the agent has no ``store``, there is no such interrupted run of this agent and session,
    another process holds it (it is live, or being resumed), it ended, it waits for an
    approval (decide that with ``resume_approval``), or this agent's conversation moved
    on since it started. Nothing was resumed. ``status`` is the run's status, if known."""

    def __init__(self, message: str, *, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


class SessionError(PersistenceError):
    """A saved session cannot be loaded into this agent: its run_context disagrees with
    the agent's on an ID field (keys ending in ``id``). Nothing is loaded; the agent is
    left as it was."""


class ContextPolicyError(ConfigurationError):
    """A :class:`~deputy_shiny.context.ContextPolicy` is malformed, or
    ``set_context_policy`` tried to change ``offload_dir`` (results already saved are
    read back from there: keep it, or start a new Agent)."""


class CompactionError(DeputyError):
    """Compaction could not write a summary: the model (and every
    ``summary_fallback_models`` entry) failed and the fallback is ``"error"``. The
    conversation is unchanged; use ``fallback="text"`` for a plain digest instead."""


class ToolResultReferenceError(DeputyError):
    """A ``deputy://tool-result/...`` reference cannot be resolved: malformed, forged or
    unknown, outside the agent's ``offload_dir``, or saved by another session."""


# --------------------------------------------------------------------------- internal signals
# Raised and caught inside the library; they never reach an app, so they are not
# exported from ``deputy_shiny``.


class ProviderFailed(Exception):
    """Raised inside the engine when a model request failed; carries the typed
    :class:`ProviderError` that the run reports (internal: never reaches callers)."""

    def __init__(self, error: ProviderError) -> None:
        super().__init__(str(error))
        self.error = error


class Interrupted(Exception):
    """Raised inside the engine when the run was interrupted; carries the stop reason.

    Raised by :class:`~deputy_shiny._util.interrupt.Interrupter` at the await a run is
    parked on; the engine turns it into the run's stop reason.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class AddressRefused(Exception):
    """A URL's host is (or resolves to) an address the policy does not allow.

    Raised by the web tools' network guard before any connection is made; the web
    tools turn it into a tool error. ``str(exc)`` says what was found (``"localhost
    resolves to 127.0.0.1, a loopback address"``); ``rule`` is the short reason (``"a
    loopback address"``).
    """

    def __init__(
        self, message: str, *, host: str, address: IPv4Address | IPv6Address, rule: str
    ) -> None:
        super().__init__(message)
        self.host = host
        self.address = address
        self.rule = rule


class StrictYamlError(ValueError):
    """:func:`~deputy_shiny._util.yaml.strict_yaml_load` refused or could not parse a text.

    Internal: callers wrap it in their own error (e.g. :class:`AgentDefinitionError`),
    naming the file.

    Attributes:
        line: The 1-based line of the problem, when known.
        problem: The message without the line.
    """

    def __init__(self, problem: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {problem}" if line is not None else problem)
        self.problem = problem
        self.line = line


class PromptClosed(Exception):
    """The kit's modal prompt ended without an answer (session ended, run stopped).

    Raised to the code waiting on a Shiny kit prompt (approval or ask_user form).
    """


class ScriptedModelExhausted(DeputyError):
    """A :class:`~deputy_shiny.testing.ScriptedModel` got a request after all its replies were used.

    It reaches a caller of ``litellm.acompletion`` wrapped in
    ``litellm.APIConnectionError`` (litellm wraps every non-litellm exception);
    ``deputy_shiny.models._provider.deputy_error_cause`` finds it again.

    Examples:
        >>> issubclass(ScriptedModelExhausted, DeputyError)
        True
    """


class AttachmentRefused(DeputyError):
    """An uploaded file was not accepted; nothing of it was saved or sent.

    Attributes:
        name: The file's name as the browser gave it.
        rule: ``type`` (not a kind the chat accepts), ``mismatch`` (the name says
            another kind than the content), ``markup`` (HTML, SVG or XML), ``bomb`` (a
            DOCX/XLSX that would unpack past the limit), ``invalid`` (a damaged file),
            ``size`` / ``message_size`` / ``conversation_size`` (over a cap), ``images``
            (the model does not take images).
    """

    def __init__(self, message: str, *, name: str, rule: str) -> None:
        super().__init__(message)
        self.name = name
        self.rule = rule


class AttachmentsRefused(DeputyError):
    """A message's attachments were refused (each :class:`AttachmentRefused` says why);
    none of them was saved or sent."""

    def __init__(self, refusals: list[AttachmentRefused]) -> None:
        self.refusals = refusals
        super().__init__(self.note())

    def note(self) -> str:
        """The one note the chat shows.

        Examples:
            >>> AttachmentsRefused([AttachmentRefused("a.svg is markup.", name="a.svg",
            ...                     rule="markup")]).note()
            'Not sent. a.svg is markup. Your message is back in the input box.'
        """
        reasons = " ".join(str(r) for r in self.refusals)
        return f"Not sent. {reasons} Your message is back in the input box."
