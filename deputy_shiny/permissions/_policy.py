"""The policy object: :class:`Permissions`, the modes, and the mode presets.

Split out of :mod:`deputy_shiny.permissions` (which re-exports all of it); the
evaluation of a call against a policy (steps 1-6) stays there.

Examples:
    >>> from deputy_shiny.permissions import Permissions, permissions_readonly
    >>> permissions_readonly().mode
    'readonly'
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

from pydantic import ConfigDict, Field, field_validator, model_validator

from .._util.config import FrozenConfig
from ..errors import ConfigurationError, PermissionsError

PermissionMode = Literal["standard", "plan", "readonly", "full"]
"""``standard`` (the default): reads and writes in the working dir, no code or web
unless the flags allow; ``plan``: look but don't touch; ``readonly``: reads (and the
built-in web tools when ``web=True``), nothing that writes; ``full``: every tool, custom
ones included, as deputy's (the capability flags default to on; one turned off still
applies)."""

ApprovalEffect = Literal["write", "destructive", "open_world"]


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


FULL_MODE_FLAGS = ("run_python", "run_bash", "web", "install_packages")
"""The capability flags that default to on in full mode (off in the other modes);
``file_read`` and ``file_write`` default to on in every mode."""


# deputy's flag names for the code tools (a port's Permissions(bash=TRUE)).
_DEPUTY_FLAGS = {"bash": "run_bash", "r_code": "run_python"}


class Permissions(FrozenConfig):
    """The policy every tool call is checked against (frozen; revise with ``model_copy``).

    Attributes:
        mode: ``"standard"``, ``"plan"``, ``"readonly"`` or ``"full"``. In full mode,
            as in deputy, every capability flag left out defaults to on
            (``Permissions(mode="full")`` runs bash); one given as False still denies.
        file_read: Built-in read tools may read inside the working dir (and write dirs).
        file_write: False, True (the working dir) or a list of absolute, existing
            directories that write tools may write in.
        run_python / run_bash: Allow the code tools (they run sandboxed; off by default).
        web: Allow the built-in web tools (in every mode, readonly included) and
            open-world custom tools (not in readonly mode).
        install_packages: Allow package installs from the code tools: without it a
            ``run_bash`` command or ``run_python`` code that runs an installer (``pip
            install``, ``uv pip install``, ``npm install``, ``apt-get install``, ...)
            is denied, naming this flag. A best-effort reading of the code (see
            :mod:`deputy_shiny.permissions._installs`); the sandbox is the boundary.
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
        >>> Permissions(mode="full").run_bash, Permissions(mode="full", run_bash=False).run_bash
        (True, False)
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

    @model_validator(mode="before")
    @classmethod
    def _full_mode_defaults(cls, data: Any) -> Any:
        # As deputy's full mode ("allow all tools"): the capability flags a caller
        # leaves out default to on. One given explicitly still applies, so
        # Permissions(mode="full", run_bash=False) denies bash (a kept difference).
        if isinstance(data, dict):
            renamed = [
                f"{old}= is {new}= here" for old, new in _DEPUTY_FLAGS.items() if old in data
            ]
            if renamed:
                raise ValueError(f"deputy's {'; '.join(renamed)}")
        if isinstance(data, dict) and data.get("mode") == "full":
            return {**dict.fromkeys(FULL_MODE_FLAGS, True), **data}
        return data

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
