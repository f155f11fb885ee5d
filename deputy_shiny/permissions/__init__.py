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

import dataclasses
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .._paths import PathDenied, confine
from .._util import sync as _sync
from ..errors import PermissionsError, ToolArgumentsError
from ..identity import CallIdentity
from ..tools import Tool, tool_metadata
from ..tools._tool import BUILTIN_PACKAGE, EffectiveAnnotations, ToolMetadata
from ._installs import install_in_call
from ._policy import (
    BUILTIN_TOOL_NAMES,  # noqa: F401 (re-exported)
    MODES,
    MODES_WIDEST_FIRST,  # noqa: F401 (re-exported)
    NARROWER,  # noqa: F401 (re-exported)
    ApprovalEffect,
    PermissionMode,
    Permissions,
    allowed_modes,  # noqa: F401 (re-exported)
    narrow_mode,
    permissions_full,
    permissions_plan,
    permissions_readonly,
    permissions_standard,
)

Decision = Literal["allow", "deny", "ask"]

# Arguments that hold paths (or path patterns) in the built-in file tools.
PATH_ARGUMENTS = ("path", "pattern")


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class PermissionResultAllow:
    """A callback's or hook's "no objection" (it never overrides a DENY by itself).

    Attributes:
        message: Optional words for the record, as deputy's ``message``: when set, the
            call's ``permission`` event (and the decision's ``reason``) carries it
            instead of the built-in text.

    Examples:
        >>> PermissionResultAllow(message="Approved by the audit policy").message
        'Approved by the audit policy'
        >>> PermissionResultAllow().message is None
        True
    """

    message: str | None = None

    def __post_init__(self) -> None:
        if self.message is not None and not isinstance(self.message, str):
            raise PermissionsError(
                f"PermissionResultAllow(message=) must be a str or None, not "
                f"{type(self.message).__name__}"
            )


_DEFAULT_DENY = "Denied by the permission callback."


@dataclass(frozen=True, init=False)
class PermissionResultDeny:
    """A callback's DENY, with the message the model sees.

    deputy spells the message ``reason=``; both spellings work and mean the same text
    (``reason`` is also readable as an attribute).

    Attributes:
        message: Why; the model sees it in the call's error result.
        interrupt: True also ends the run right after this call, as in deputy: the
            denied call still gets its error result, later calls of the same response
            are not run, the model gets no further request, and the run stops with
            stop reason ``interrupted`` and ``message`` as its stop message.

    Examples:
        >>> PermissionResultDeny("Not in production", interrupt=True).interrupt
        True
        >>> PermissionResultDeny(reason="File write not allowed").message
        'File write not allowed'
    """

    message: str
    interrupt: bool

    def __init__(
        self,
        message: str | None = None,
        interrupt: bool = False,
        *,
        reason: str | None = None,
    ) -> None:
        if message is not None and reason is not None and message != reason:
            raise PermissionsError(
                "PermissionResultDeny takes the text once: message= or reason= (deputy's "
                "name), not both"
            )
        text = message if message is not None else reason
        if text is None:
            text = _DEFAULT_DENY
        if not isinstance(text, str):
            raise PermissionsError(
                f"PermissionResultDeny's message must be a str, not {type(text).__name__}"
            )
        if not isinstance(interrupt, bool):
            raise PermissionsError(
                f"PermissionResultDeny(interrupt=) must be True or False, not {interrupt!r}"
            )
        object.__setattr__(self, "message", text)
        object.__setattr__(self, "interrupt", interrupt)

    @property
    def reason(self) -> str:
        """The message, under deputy's name."""
        return self.message


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

    A ``run_python`` or ``run_bash`` call that runs a package installer also needs
    ``install_packages`` (a best-effort reading of the code: see
    :mod:`deputy_shiny.permissions._installs`).
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
        if not flag:
            return deny(f"{name} needs {name}=True in the permissions.")
        installer = None if permissions.install_packages else install_in_call(name, arguments)
        if installer is not None:
            return deny(
                f"{name} would install packages ({installer}); that needs "
                "install_packages=True in the permissions."
            )
        return allow(f"{name} is allowed.")
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
        allowed = decision.decision == "allow"
        if allowed and isinstance(outcome, PermissionResultAllow) and outcome.message:
            # deputy's PermissionResultAllow(message=): the words the record shows. An
            # allow never lifts an ASK, so only an allowed call takes them.
            decision = dataclasses.replace(decision, reason=outcome.message)
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
