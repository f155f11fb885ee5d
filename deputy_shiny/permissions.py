"""Permissions: what an agent's tool calls may do, decided before anything runs.

Registration is not authorization: every call, to a built-in, custom or MCP tool,
goes through one evaluation, in order, and the first DENY ends it:

1. a malformed tool name or arguments that fail the schema: an error result;
2. tool gating (case-insensitive): a tool on the denylist, or missing from a non-empty
   allowlist, is a hard DENY (``ask_user`` included), and so is the model calling the
   ``permission_prompt_tool_name`` tool;
3. the path policy for built-in file tools (see :mod:`deputy_shiny._paths`): hard DENY;
4. the mode and the capability flags, by tool kind and effective annotations
   (the table in :func:`mode_decision`): a soft DENY;
5. approval rules (``approval_tools``, ``approval_effects``) turn ALLOW into ASK;
6. ``can_use_tool(tool_name, tool_input, context)``: ``PermissionResultAllow()``
   changes nothing, ``PermissionResultDeny(message)`` denies (with ``interrupt=True`` it
   also ends the run after this call), ``PermissionResultPending()`` asks; an exception
   or any other return value denies;
7. ``PermissionRequest`` hooks (soft DENY or ASK only) may return
   ``PermissionResultAllow``; they never lift a hard DENY;
8. ``PreToolUse`` hooks: "deny" denies, "ask" asks, "allow" changes nothing; an
   exception or a timeout denies;
9. ASK goes to the ``permission_prompt_tool_name`` tool when one is named, else to the
   agent's ``approval_handler``, else DENY ("no one can approve").

Steps 1-6 live here (:func:`evaluate`); the engine adds the hooks and approvals.

Only tools that deputy_shiny itself built count as built-in: a custom or MCP tool
named ``read_file`` is a custom tool, judged by its annotations, which are claims.

Examples:
    >>> from deputy_shiny.permissions import Permissions, permissions_readonly
    >>> permissions_readonly().mode
    'readonly'
    >>> Permissions(web=True).model_copy(update={"run_bash": True}).run_bash
    True
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

from pydantic import ConfigDict, Field, field_validator, model_validator

from ._paths import PathDenied, confine
from ._util import sync as _sync
from ._util.config import FrozenConfig
from .errors import ConfigurationError, PermissionsError, ToolArgumentsError
from .identity import CallIdentity
from .tools import Tool, tool_metadata
from .tools._tool import BUILTIN_PACKAGE, EffectiveAnnotations, ToolMetadata

PermissionMode = Literal["standard", "plan", "readonly", "full"]
"""``standard`` (the default): reads and writes in the working dir, no code or web
unless the flags allow; ``plan``: look but don't touch; ``readonly``: reads (and the
built-in web tools when ``web=True``), nothing that writes; ``full``: everything the
flags allow, custom tools included."""

ApprovalEffect = Literal["write", "destructive", "open_world"]
Decision = Literal["allow", "deny", "ask"]

MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)
"""Every permission mode (the order error messages list them in)."""

NARROWER: dict[str, frozenset[str]] = {
    "full": frozenset({"standard", "plan", "readonly"}),
    "standard": frozenset({"readonly"}),
    "plan": frozenset({"readonly"}),
    "readonly": frozenset(),
}
"""Which narrower modes each mode may switch to (``set_permission_mode`` only narrows)."""

MODES_WIDEST_FIRST: tuple[PermissionMode, ...] = tuple(
    sorted(MODES, key=lambda mode: -len(NARROWER[mode]))
)
"""The modes from the widest to the narrowest: ``full``, ``standard``, ``plan``,
``readonly`` (the order a mode picker lists them in)."""


def allowed_modes(mode: str) -> list[PermissionMode]:
    """``mode`` and the modes it may narrow to, widest first (empty for an unknown mode).

    Examples:
        >>> allowed_modes("full")
        ['full', 'standard', 'plan', 'readonly']
        >>> allowed_modes("plan")
        ['plan', 'readonly']
    """
    narrower = NARROWER.get(mode, frozenset())
    return [m for m in MODES_WIDEST_FIRST if m == mode or m in narrower]


# Arguments that hold paths (or path patterns) in the built-in file tools.
PATH_ARGUMENTS = ("path", "pattern")

BUILTIN_TOOL_NAMES = frozenset(
    {
        "read_file",
        "read_markdown",
        "write_file",
        "edit_file",
        "multi_edit",
        "list_files",
        "glob_files",
        "grep_files",
        "run_python",
        "run_bash",
        "read_csv",
        "web_fetch",
        "web_search",
        "ask_user",
        "delegate",
    }
)
"""The built-in tools' names (and the lead's ``delegate``): none may be the permission
prompt tool, whose answer decides approvals."""


class Permissions(FrozenConfig):
    """The policy every tool call is checked against (frozen; revise with ``model_copy``).

    Attributes:
        mode: ``"standard"``, ``"plan"``, ``"readonly"`` or ``"full"``.
        file_read: Built-in read tools may read inside the working dir (and write dirs).
        file_write: False, True (the working dir) or a list of absolute, existing
            directories that write tools may write in.
        run_python / run_bash: Allow the code tools (they run sandboxed; off by default).
        web: Allow the built-in web tools (in every mode, readonly included) and
            open-world custom tools (not in readonly mode).
        install_packages: Recorded for policies and hooks that govern package
            installs; no built-in tool installs packages by itself.
        tool_allowlist: Tool gating, as in deputy. Empty (the default) restricts
            nothing; a non-empty allowlist denies every tool not on it (case-insensitive,
            a hard DENY at step 2, whatever the mode; list ``ask_user`` too if the agent
            may ask). Being on it also admits the custom tools a mode admits only by
            explicit entry (a tool that may modify, in standard mode; read-only tools in
            readonly mode). It never lifts a mode's DENY or a capability flag.
        tool_denylist: Tools always denied (case-insensitive), whatever else says.
        approval_tools: Tools that always need a human's approval.
        approval_effects: Effects that need approval: ``"write"`` (not read-only),
            ``"destructive"``, ``"open_world"``.
        can_use_tool: ``callback(tool_name, tool_input, context)``, sync or async,
            returning a ``PermissionResult*``; anything else, or an exception, denies.
        permission_prompt_tool_name: A registered tool (an MCP approval service, say)
            that decides every ASK instead of the approval handler (step 9). The
            engine calls it with ``{"tool_name", "input", "tool_use_id"}``; it answers
            the JSON object ``{"behavior": "allow", "updatedInput": {...}}`` (the edit
            is optional, and checked again like a person's) or ``{"behavior": "deny",
            "message": "..."}`` (``"interrupt": true`` also ends the run). Any other
            answer, an error, or a missing tool denies, saying why. The model may not
            call this tool itself (a hard DENY at step 2). A built-in tool's name is
            refused here: none of them answers approvals.
        working_dir: The directory the policy is for; None means the agent's.

    Examples:
        >>> Permissions(mode="plan", web=True).web
        True
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )
    _config_error: ClassVar[type[ConfigurationError]] = PermissionsError

    mode: PermissionMode = "standard"
    file_read: bool = Field(default=True, strict=True)
    file_write: bool | tuple[str, ...] = True
    run_python: bool = Field(default=False, strict=True)
    run_bash: bool = Field(default=False, strict=True)
    web: bool = Field(default=False, strict=True)
    install_packages: bool = Field(default=False, strict=True)
    tool_allowlist: tuple[str, ...] = ()
    tool_denylist: tuple[str, ...] = ()
    approval_tools: tuple[str, ...] = ()
    approval_effects: tuple[ApprovalEffect, ...] = ()
    can_use_tool: Callable[..., Any] | None = None
    permission_prompt_tool_name: str | None = None
    working_dir: str | None = None

    @field_validator("file_write", mode="before")
    @classmethod
    def _write_dirs(cls, value: object) -> object:
        if isinstance(value, bool):
            return value
        if isinstance(value, str | os.PathLike):
            value = [value]
        if not isinstance(value, list | tuple):
            raise ValueError("must be False, True or a list of absolute directories")
        dirs = []
        for item in value:
            text = os.fspath(item) if isinstance(item, str | os.PathLike) else None
            if text is None or not os.path.isabs(text):
                raise ValueError(f"{item!r} is not an absolute directory path")
            if not os.path.isdir(text):
                raise ValueError(f"{text!r} does not exist or is not a directory")
            dirs.append(os.path.realpath(text))
        if not dirs:
            return False
        return tuple(dirs)

    @field_validator("tool_allowlist", "tool_denylist", "approval_tools", mode="before")
    @classmethod
    def _names(cls, value: object) -> object:
        if isinstance(value, str):
            raise ValueError("must be a list of tool names, not a single string")
        if not isinstance(value, list | tuple | set | frozenset):
            raise ValueError("must be a list of tool names")
        names = []
        for item in value:
            if not isinstance(item, str) or not item.strip():
                raise ValueError(f"{item!r} is not a tool name")
            names.append(item.strip())
        return tuple(names)

    @field_validator("approval_effects", mode="before")
    @classmethod
    def _effects(cls, value: object) -> object:
        if isinstance(value, str):
            raise ValueError('must be a list, e.g. ["write"]')
        return value

    @field_validator("can_use_tool")
    @classmethod
    def _callable(cls, value: object) -> object:
        if value is not None and not callable(value):
            raise ValueError("must be a function (tool_name, tool_input, context)")
        return value

    @field_validator("permission_prompt_tool_name", mode="before")
    @classmethod
    def _prompt_tool(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise ValueError("must be a tool name (or None)")
        name = value.strip()
        if name.lower() in BUILTIN_TOOL_NAMES:
            raise ValueError(
                f"{name!r} is a built-in tool, which cannot answer approvals; name a tool "
                'that returns {"behavior": "allow" | "deny"} (an MCP approval tool, say)'
            )
        return name

    @model_validator(mode="after")
    def _prompt_tool_not_denied(self) -> Permissions:
        prompt = self.permission_prompt_tool_name
        if prompt is not None and prompt.lower() in {n.lower() for n in self.tool_denylist}:
            raise ValueError(
                f"permission_prompt_tool_name {prompt!r} is on the tool_denylist; "
                "no one could approve anything"
            )
        return self

    @field_validator("working_dir", mode="before")
    @classmethod
    def _working_dir(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str | os.PathLike):
            raise ValueError("must be a directory path")
        text = os.fspath(value)
        if not os.path.isdir(text):
            raise ValueError(f"{text!r} does not exist or is not a directory")
        return os.path.realpath(text)

    def for_working_dir(self, working_dir: str | os.PathLike[str]) -> Permissions:
        """This policy bound to ``working_dir`` when it names none itself."""
        if self.working_dir is not None:
            return self
        return self.model_copy(update={"working_dir": os.path.realpath(working_dir)})

    def write_roots(self, working_dir: Path) -> tuple[Path, ...]:
        """The directories write tools may write in (before the mode is applied)."""
        if self.file_write is True:
            return (Path(self.working_dir or working_dir),)
        if self.file_write is False:
            return ()
        return tuple(Path(d) for d in self.file_write)

    def sandbox_roots(self, working_dir: Path) -> tuple[Path, ...]:
        """Every directory a file tool may touch at all: the working dir and write dirs."""
        base = Path(self.working_dir or working_dir)
        return (base, *(r for r in self.write_roots(working_dir) if r != base))


def _mode_default(mode: PermissionMode, working_dir: str | os.PathLike[str] | None) -> Permissions:
    return Permissions(
        mode=mode, working_dir=None if working_dir is None else os.fspath(working_dir)
    )


def permissions_standard(working_dir: str | os.PathLike[str] | None = None) -> Permissions:
    """Standard mode: read and write in the working dir; no code, no web.

    Examples:
        >>> permissions_standard().run_bash
        False
    """
    return _mode_default("standard", working_dir)


def permissions_plan(working_dir: str | os.PathLike[str] | None = None) -> Permissions:
    """Plan mode: read and research; no writes, no code, no custom tools that modify.

    As in deputy, planning may look things up: ``web`` is on, so the built-in
    ``web_fetch`` and ``web_search`` and custom tools declared read-only but open-world
    (an MCP search, say) are allowed. Turn it off with
    ``permissions_plan().model_copy(update={"web": False})``.

    Examples:
        >>> plan = permissions_plan()
        >>> plan.mode, plan.web
        ('plan', True)
    """
    return Permissions(
        mode="plan", web=True, working_dir=None if working_dir is None else os.fspath(working_dir)
    )


def permissions_readonly(working_dir: str | os.PathLike[str] | None = None) -> Permissions:
    """Read-only mode: built-in reads only; no writes or code, and web only if you add it.

    The built-in ``web_fetch``/``web_search`` only read, so ``web=True`` allows them in
    readonly mode too (open-world custom tools stay denied).

    Examples:
        >>> permissions_readonly().file_write
        False
    """
    return Permissions(
        mode="readonly",
        file_write=False,
        working_dir=None if working_dir is None else os.fspath(working_dir),
    )


def permissions_full(working_dir: str | os.PathLike[str] | None = None) -> Permissions:
    """Full mode with every capability on: writes, Python, bash, web, package installs.

    Examples:
        >>> permissions_full().run_python
        True
    """
    return Permissions(
        mode="full",
        file_write=True,
        run_python=True,
        run_bash=True,
        web=True,
        install_packages=True,
        working_dir=None if working_dir is None else os.fspath(working_dir),
    )


def narrow_mode(current: Permissions, mode: str) -> Permissions:
    """The same policy in a narrower ``mode``; widening raises ConfigurationError.

    full -> any mode; standard -> readonly; plan -> readonly; the same mode is a no-op.

    Examples:
        >>> narrow_mode(permissions_full(), "plan").mode
        'plan'
    """
    if mode not in MODES:
        raise PermissionsError(f"Unknown permission mode {mode!r}; use one of {', '.join(MODES)}")
    if mode == current.mode:
        return current
    if mode not in NARROWER[current.mode]:
        allowed = ", ".join(sorted(NARROWER[current.mode])) or "none"
        raise PermissionsError(
            f"Cannot switch from {current.mode!r} to {mode!r}: permissions only narrow "
            f"(from {current.mode!r}: {allowed}). Create a new Agent for wider permissions."
        )
    return current.model_copy(update={"mode": mode})


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class PermissionResultAllow:
    """A callback's or hook's "no objection" (it never overrides a DENY by itself)."""


@dataclass(frozen=True)
class PermissionResultDeny:
    """A callback's DENY, with the message the model sees.

    Attributes:
        message: Why; the model sees it in the call's error result.
        interrupt: True also ends the run right after this call, as in deputy: the
            denied call still gets its error result, later calls of the same response
            are not run, the model gets no further request, and the run stops with
            stop reason ``interrupted`` and ``message`` as its stop message.

    Examples:
        >>> PermissionResultDeny("Not in production", interrupt=True).interrupt
        True
    """

    message: str = "Denied by the permission callback."
    interrupt: bool = False


@dataclass(frozen=True)
class PermissionResultPending:
    """A callback's ASK: a human must approve this call."""

    reason: str = "The permission callback asks for approval."


PermissionResult = PermissionResultAllow | PermissionResultDeny | PermissionResultPending


@dataclass(frozen=True)
class PermissionContext(CallIdentity):
    """What ``can_use_tool`` and permission hooks learn about a call.

    Attributes:
        tool_metadata: :func:`~deputy_shiny.tools.tool_metadata` of the tool.
        tool_annotations: The annotations as supplied (missing ones absent).
        mode: The permission mode in force.
        working_dir: The agent's working directory.
        agent_id / session_id / run_id / call_id: Who is calling (None outside a run).
        run_context: The run's context.
    """

    tool_metadata: ToolMetadata
    tool_annotations: dict[str, bool]
    mode: str
    working_dir: Path
    run_context: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PermissionDecision:
    """The outcome of evaluating one call.

    Attributes:
        decision: ``"allow"``, ``"deny"`` or ``"ask"``.
        reason: Why, in words a UI can show and a model can act on.
        step: Which step decided: ``arguments``, ``denylist``, ``allowlist``,
            ``permission_prompt``, ``path_policy``, ``mode``, ``approval_rules``,
            ``can_use_tool``, ``permission_request_hook``, ``pre_tool_use_hook``,
            ``approval`` (or ``allowed`` when nothing objected).
        hard: A hard DENY (tool gating, path policy, bad arguments) that nothing lifts.
        arguments: The validated arguments (None when they failed).
        interrupt: A ``can_use_tool`` DENY with ``interrupt=True``: the run ends after
            this call.
    """

    decision: Decision
    reason: str
    step: str
    hard: bool = False
    arguments: dict[str, Any] | None = None
    interrupt: bool = False

    @property
    def allowed(self) -> bool:
        return self.decision == "allow"


def _deny(
    reason: str, step: str, *, hard: bool = False, arguments: Any = None
) -> PermissionDecision:
    return PermissionDecision("deny", reason, step, hard=hard, arguments=arguments)


# ---------------------------------------------------------------- tool kinds


ToolKind = Literal["read", "write", "code", "web", "ask", "custom"]


def tool_kind(t: Tool) -> ToolKind:
    """How the mode table sees a tool: a built-in by the kind it records, else ``custom``.

    Each built-in factory records its kind on the tool's source
    (:func:`~deputy_shiny.tools._tool.builtin_source`); only tools whose source is
    deputy_shiny's own package count. Custom and MCP tools have no kind: the mode table
    judges them by their annotations.

    Examples:
        >>> from deputy_shiny.tools import tool, tool_read_file
        >>> tool_kind(tool_read_file()), tool_kind(tool(lambda: 1, name="one", description="One."))
        ('read', 'custom')
    """
    source = t.source
    if source.type != "package" or source.package != BUILTIN_PACKAGE or source.kind is None:
        return "custom"
    return source.kind


# ---------------------------------------------------------------- steps 1-4


def tool_gating(name: str, permissions: Permissions) -> PermissionDecision | None:
    """Step 2: a hard DENY for a tool on the denylist or off a non-empty allowlist.

    Both lists compare names case-insensitively. An empty allowlist restricts nothing;
    a non-empty one admits only the tools it names, ``ask_user`` included.

    Examples:
        >>> tool_gating("ask_user", Permissions(tool_allowlist=["read_file"])).step
        'allowlist'
        >>> tool_gating("READ_FILE", Permissions(tool_allowlist=["read_file"])) is None
        True
    """
    lowered = name.lower()
    if lowered in {n.lower() for n in permissions.tool_denylist}:
        return _deny(f"{name} is on the tool denylist.", "denylist", hard=True)
    prompt = permissions.permission_prompt_tool_name
    if prompt is not None and lowered == prompt.lower():
        # Its answer approves other calls: a model (or a prompt injection) calling it
        # could only probe or spam the approver, so only the engine calls it.
        return _deny(
            f"{name} decides approvals (permission_prompt_tool_name); the model may not call it.",
            "permission_prompt",
            hard=True,
        )
    allowlist = {n.lower() for n in permissions.tool_allowlist}
    if allowlist and lowered not in allowlist:
        return _deny(
            f"{name} is not on the tool allowlist ({', '.join(permissions.tool_allowlist)}), "
            "so it may not be used.",
            "allowlist",
            hard=True,
        )
    return None


def check_paths(
    t: Tool, arguments: dict[str, Any], permissions: Permissions, working_dir: Path
) -> PermissionDecision | None:
    """Step 3: every path argument of a built-in file tool stays inside the sandbox."""
    if tool_kind(t) not in ("read", "write"):
        return None
    base = Path(permissions.working_dir or working_dir)
    roots = permissions.sandbox_roots(working_dir)
    for key in PATH_ARGUMENTS:
        value = arguments.get(key)
        if value is None:
            continue
        try:
            confine(str(value), base, roots, what="read" if tool_kind(t) == "read" else "write")
        except PathDenied as denied:
            return _deny(
                f"{denied} (path rule: {denied.rule})",
                "path_policy",
                hard=True,
                arguments=arguments,
            )
    return None


def mode_decision(
    t: Tool, arguments: dict[str, Any], permissions: Permissions, working_dir: Path
) -> PermissionDecision:
    """Step 4: the mode table, by tool kind and effective annotations.

    ============================  ==============  ========  ==============  ========
    tool                          standard        plan      readonly        full
    ============================  ==============  ========  ==============  ========
    built-in read tools           file_read       file_read file_read       file_read
    write_file/edit/multi_edit    file_write      DENY      DENY            allow
    run_python / run_bash         their flag      DENY      DENY            their flag
    web_fetch / web_search        web             web       web             web
    ask_user                      allow           allow     allow           allow
    custom read-only, closed      allow           allow     allowlisted     allow
    custom read-only, open-world  web             web       DENY            web
    custom that may modify        allowlisted     DENY      DENY            allow
                                  (+ web if open)
    ============================  ==============  ========  ==============  ========
    """
    mode = permissions.mode
    kind = tool_kind(t)
    name = t.name

    def allow(reason: str) -> PermissionDecision:
        return PermissionDecision("allow", reason, "mode", arguments=arguments)

    def deny(reason: str) -> PermissionDecision:
        return _deny(reason, "mode", arguments=arguments)

    if kind == "ask":
        return allow("Asking the user is always allowed.")
    if kind == "read":
        # Capability flags always apply; full mode's constructor simply turns them on.
        if permissions.file_read:
            return allow("File reading is allowed.")
        return deny(f"{name} needs file_read, which these permissions turn off.")
    if kind == "write":
        if mode in ("plan", "readonly"):
            return deny(f"{mode} mode does not allow {name}.")
        target = arguments.get("path")
        roots = permissions.write_roots(working_dir)
        if not roots:
            return deny(f"{name} needs file_write, which these permissions turn off.")
        if target is not None:
            try:
                confine(
                    str(target), Path(permissions.working_dir or working_dir), roots, what="write"
                )
            except PathDenied:
                return deny(
                    f"{name} may only write in {', '.join(str(r) for r in roots)}; "
                    f"{target!r} is not there."
                )
        return allow("File writing is allowed there.")
    if kind == "code":
        if mode in ("plan", "readonly"):
            return deny(f"{mode} mode does not allow {name}.")
        flag = permissions.run_python if name == "run_python" else permissions.run_bash
        if flag:
            return allow(f"{name} is allowed.")
        return deny(f"{name} needs {name}=True in the permissions.")
    if kind == "web":
        # The built-in web tools only read, so readonly mode allows them like the others.
        if permissions.web:
            return allow("Web access is allowed.")
        return deny(f"{name} needs web=True in the permissions.")
    return _custom_decision(t, permissions, allow, deny)


def _custom_decision(
    t: Tool,
    permissions: Permissions,
    allow: Callable[[str], PermissionDecision],
    deny: Callable[[str], PermissionDecision],
) -> PermissionDecision:
    effective: EffectiveAnnotations = tool_metadata(t)["effective_annotations"]
    mode = permissions.mode
    name = t.name
    allowlisted = name.lower() in {n.lower() for n in permissions.tool_allowlist}
    read_only = effective["read_only_hint"]
    open_world = effective["open_world_hint"]
    if read_only and not open_world:
        if mode != "readonly" or allowlisted:
            return allow(f"{name} is declared read-only and closed-world.")
        return deny(
            f"readonly mode allows custom tools only through tool_allowlist; {name} is not there."
        )
    if read_only:
        if mode == "readonly":
            return deny(f"readonly mode does not allow open-world tools such as {name}.")
        if permissions.web:
            return allow(f"{name} reaches outside systems, and web access is allowed.")
        return deny(f"{name} reaches outside systems (open-world); that needs web=True.")
    # May modify (not declared read-only, or declared destructive).
    if mode in ("plan", "readonly"):
        return deny(f"{mode} mode does not allow {name}: it may modify things.")
    if mode == "full":
        return allow(f"full mode allows {name}.")
    if not allowlisted:
        return deny(
            f"{name} may modify things (it is not declared read-only), so standard mode "
            "needs it in tool_allowlist."
        )
    if open_world and not permissions.web:
        return deny(f"{name} reaches outside systems (open-world); that needs web=True.")
    return allow(f"{name} is in tool_allowlist.")


def approval_rule(t: Tool, permissions: Permissions) -> str | None:
    """Step 5: the reason this call needs approval, or None."""
    if t.name.lower() in {n.lower() for n in permissions.approval_tools}:
        return f"{t.name} always needs approval (approval_tools)."
    effects = set(permissions.approval_effects)
    if not effects:
        return None
    effective = tool_metadata(t)["effective_annotations"]
    kind = tool_kind(t)
    writes = not effective["read_only_hint"] or kind in ("write", "code")
    if "write" in effects and writes:
        return f"{t.name} may modify things, and writes need approval (approval_effects)."
    if "destructive" in effects and effective["destructive_hint"] and writes:
        return f"{t.name} may destroy data, which needs approval (approval_effects)."
    if "open_world" in effects and effective["open_world_hint"]:
        return f"{t.name} reaches outside systems, which needs approval (approval_effects)."
    return None


def parse_for_permissions(t: Tool, tool_input: object) -> dict[str, Any] | PermissionDecision:
    """Step 1: the validated arguments, or a hard DENY saying what is wrong with them."""
    try:
        raw = tool_input if isinstance(tool_input, str | dict) or tool_input is None else None
        if raw is None:
            raise ToolArgumentsError("The arguments must be a JSON object.")
        return t.parse_arguments(raw)
    except ToolArgumentsError as exc:
        return _deny(str(exc), "arguments", hard=True)


async def call_can_use_tool(
    callback: Callable[..., Any], name: str, arguments: dict[str, Any], context: PermissionContext
) -> PermissionResult | Exception:
    """Run ``can_use_tool``; its result, or the exception/type error that means DENY."""
    try:
        outcome = callback(name, arguments, context)
        if inspect.isawaitable(outcome):
            outcome = await outcome
    except Exception as exc:
        return exc
    if isinstance(outcome, PermissionResultAllow | PermissionResultDeny | PermissionResultPending):
        return outcome
    return TypeError(
        f"can_use_tool returned {type(outcome).__name__}; it must return "
        "PermissionResultAllow(), PermissionResultDeny(message) or PermissionResultPending()"
    )


def _can_use_tool_decision(
    outcome: PermissionResult | Exception, arguments: dict[str, Any]
) -> PermissionDecision | None:
    if isinstance(outcome, PermissionResultAllow):
        return None
    if isinstance(outcome, PermissionResultDeny):
        return PermissionDecision(
            "deny",
            outcome.message,
            "can_use_tool",
            arguments=arguments,
            interrupt=outcome.interrupt is True,
        )
    if isinstance(outcome, PermissionResultPending):
        return PermissionDecision("ask", outcome.reason, "can_use_tool", arguments=arguments)
    return _deny(
        f"The permission callback failed ({type(outcome).__name__}: {outcome}), so the call "
        "is denied.",
        "can_use_tool",
        arguments=arguments,
    )


async def evaluate(
    permissions: Permissions,
    t: Tool,
    tool_input: object,
    working_dir: str | os.PathLike[str],
    *,
    context: PermissionContext | None = None,
    callback_denies_only: bool = False,
) -> PermissionDecision:
    """Steps 1-6 for one call (no hooks, no approval handler).

    ``callback_denies_only`` is the re-check after an approval with edited input: the
    callback may still deny, but its ASK no longer counts (the human just approved).
    """
    # A realpath of a local directory takes microseconds: not worth a thread hop per call.
    base = Path(os.path.realpath(permissions.working_dir or working_dir))  # noqa: ASYNC240
    parsed = parse_for_permissions(t, tool_input)
    if isinstance(parsed, PermissionDecision):
        return parsed
    gated = tool_gating(t.name, permissions)
    if gated is not None:
        return PermissionDecision("deny", gated.reason, gated.step, hard=True, arguments=parsed)
    path_denial = check_paths(t, parsed, permissions, base)
    if path_denial is not None:
        return path_denial
    decision = mode_decision(t, parsed, permissions, base)
    if decision.decision == "deny":
        return decision
    approval = None if callback_denies_only else approval_rule(t, permissions)
    if approval is not None:
        decision = PermissionDecision("ask", approval, "approval_rules", arguments=parsed)
    if permissions.can_use_tool is not None:
        ctx = context or permission_context(t, permissions, base)
        outcome = await call_can_use_tool(permissions.can_use_tool, t.name, parsed, ctx)
        verdict = _can_use_tool_decision(outcome, parsed)
        if verdict is not None and not (callback_denies_only and verdict.decision == "ask"):
            return verdict
    if decision.decision == "allow":
        return PermissionDecision("allow", decision.reason, "allowed", arguments=parsed)
    return decision


def permission_context(
    t: Tool, permissions: Permissions, working_dir: Path, **ids: Any
) -> PermissionContext:
    """The context a permission callback receives for a call to ``t``."""
    meta = tool_metadata(t)
    return PermissionContext(
        tool_metadata=meta,
        tool_annotations=dict(meta["annotations"]),
        mode=permissions.mode,
        working_dir=working_dir,
        **ids,
    )


async def permissions_check_async(
    permissions: Permissions,
    tool: Tool,
    tool_input: dict[str, Any] | str,
    working_dir: str | os.PathLike[str] | None = None,
) -> PermissionDecision:
    """Evaluate a call against the policy without running anything (steps 1-6).

    Examples:
        >>> import asyncio
        >>> from deputy_shiny.tools import tool_write_file
        >>> decision = asyncio.run(permissions_check_async(
        ...     permissions_plan(), tool_write_file(), {"path": "a.txt", "content": "x"}, "."))
        >>> (decision.decision, decision.step)
        ('deny', 'mode')
    """
    if not isinstance(permissions, Permissions):
        raise PermissionsError(
            f"permissions must be a Permissions, not {type(permissions).__name__}"
        )
    if not isinstance(tool, Tool):
        raise PermissionsError(f"tool must be a Tool, not {type(tool).__name__}")
    base = working_dir if working_dir is not None else permissions.working_dir or os.getcwd()
    return await evaluate(permissions, tool, tool_input, base)


def permissions_check(
    permissions: Permissions,
    tool: Tool,
    tool_input: dict[str, Any] | str,
    working_dir: str | os.PathLike[str] | None = None,
) -> PermissionDecision:
    """Blocking :func:`permissions_check_async` (for scripts and tests).

    Examples:
        >>> from deputy_shiny.tools import tool_read_file
        >>> permissions_check(permissions_readonly(), tool_read_file(), {"path": "../x"}, ".").step
        'path_policy'
    """
    return _sync.run_sync(
        permissions_check_async(permissions, tool, tool_input, working_dir), "permissions_check"
    )


def native_web_refusal(permissions: Permissions, name: str) -> str | None:
    """Why a provider-native web tool may not be registered (None: it may).

    Provider-native tools run on the provider's servers, so no call can be checked:
    they are authorized once, at registration. The policy must grant web access (and
    not be readonly), list the tool in ``tool_allowlist``, not deny it, and have no
    ``can_use_tool`` callback (it could never see the calls).

    Examples:
        >>> native_web_refusal(Permissions(web=True, tool_allowlist=["web_search"]), "web_search")
        >>> native_web_refusal(Permissions(web=True), "web_search")
        'Provider-native web_search needs an explicit tool_allowlist entry.'
    """
    lowered = name.lower()
    if lowered in {n.lower() for n in permissions.tool_denylist}:
        return f"{name} is on the tool denylist."
    if permissions.mode == "readonly" or not permissions.web:
        return f"Provider-native {name} needs web=True (and a mode other than readonly)."
    if lowered not in {n.lower() for n in permissions.tool_allowlist}:
        return f"Provider-native {name} needs an explicit tool_allowlist entry."
    if permissions.can_use_tool is not None:
        return (
            f"Provider-native {name} cannot be checked by can_use_tool (the provider runs it); "
            "use the universal web tools when a callback must see each request."
        )
    return None


def is_soft_denial(decision: PermissionDecision) -> bool:
    """A DENY that a PermissionRequest hook may lift (not tool gating, path or arguments)."""
    return decision.decision == "deny" and not decision.hard


__all__ = [
    "MODES",
    "ApprovalEffect",
    "PermissionContext",
    "PermissionDecision",
    "PermissionMode",
    "PermissionResult",
    "PermissionResultAllow",
    "PermissionResultDeny",
    "PermissionResultPending",
    "Permissions",
    "narrow_mode",
    "permissions_check",
    "permissions_check_async",
    "permissions_full",
    "permissions_plan",
    "permissions_readonly",
    "permissions_standard",
    "tool_kind",
]
