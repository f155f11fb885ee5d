"""Adversarial permission matrix: every case must decide exactly as CONTRACTS section 4 says.

Zero escapes: no path outside the sandbox, no mode bypass, no lifted hard deny, and
no file created by a denied call.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import ConfigurationError, tool
from deputy_shiny.permissions import (
    PermissionResultAllow,
    PermissionResultDeny,
    PermissionResultPending,
    Permissions,
    narrow_mode,
    permissions_check,
    permissions_full,
    permissions_plan,
    permissions_readonly,
    permissions_standard,
)
from deputy_shiny.tools import (
    Tool,
    ToolSource,
    tool_ask_user,
    tool_edit_file,
    tool_glob_files,
    tool_grep_files,
    tool_list_files,
    tool_multi_edit,
    tool_read_csv,
    tool_read_file,
    tool_read_markdown,
    tool_run_bash,
    tool_run_python,
    tool_web_fetch,
    tool_web_search,
    tool_write_file,
)

# ---------------------------------------------------------------- fixtures


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, Path]:
    """A working dir with neighbours designed to trick prefix and symlink checks."""
    root = tmp_path / "data"
    root.mkdir()
    (root / "notes.txt").write_text("hello")
    (root / "sub").mkdir()
    (root / "sub" / "deep.txt").write_text("deep")
    sibling = tmp_path / "data2"  # shares the prefix "data"
    sibling.mkdir()
    (sibling / "secret.txt").write_text("secret")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside / "secret.txt", root / "link_out.txt")
    os.symlink(outside, root / "dir_out")
    os.symlink(tmp_path / "nowhere" / "ghost.txt", root / "dangling_out.txt")
    os.symlink(root / "notes.txt", root / "link_in.txt")
    os.symlink(root / "link_out.txt", root / "chain_out.txt")
    extra = tmp_path / "extra"
    extra.mkdir()
    return {"root": root, "sibling": sibling, "outside": outside, "tmp": tmp_path, "extra": extra}


def check(perms: Permissions, t: Tool, args: dict[str, Any], root: Path) -> tuple[str, str]:
    decision = permissions_check(perms, t, args, root)
    return decision.decision, decision.step


def custom(
    name: str = "custom_tool",
    *,
    source: ToolSource | None = None,
    hints: dict[str, bool] | None = None,
) -> Tool:
    def fn(x: str = "") -> str:
        """A custom tool."""
        return x

    return tool(fn, name=name, annotations=dict(hints) if hints else None, source=source)


# ---------------------------------------------------------------- 1. paths (read)

READ_ESCAPES = [
    "../outside/secret.txt",
    "..",
    "sub/../../outside/secret.txt",
    "./../data2/secret.txt",
    "sub/../..",
    "..\\outside\\secret.txt",
    "sub\\..\\..\\outside",
    "~/.ssh/id_rsa",
    "~root/.bashrc",
    "link_out.txt",
    "dir_out/secret.txt",
    "dir_out",
    "chain_out.txt",
    "dangling_out.txt",
    "",
    "notes\x00.txt",
    "notes\n.txt",
]


@pytest.mark.parametrize("path", READ_ESCAPES)
def test_read_escapes_are_hard_denied(sandbox: dict[str, Path], path: str) -> None:
    decision = permissions_check(
        permissions_standard(), tool_read_file(), {"path": path}, sandbox["root"]
    )
    assert decision.decision == "deny"
    assert decision.step == "path_policy"
    assert decision.hard


@pytest.mark.parametrize(
    "make_path",
    [
        lambda s: str(s["outside"] / "secret.txt"),
        lambda s: str(s["sibling"] / "secret.txt"),
        lambda s: str(s["sibling"]),
        lambda s: "/etc/passwd",
        lambda s: "/proc/self/environ",
        lambda s: "/",
        lambda s: str(s["tmp"]),
        lambda s: str(s["root"]).upper(),  # case trick: another path on Linux
        lambda s: str(s["root"]) + "/../outside/secret.txt",
    ],
)
def test_absolute_paths_outside_are_denied(
    sandbox: dict[str, Path], make_path: Callable[..., str]
) -> None:
    assert check(
        permissions_full(), tool_read_file(), {"path": make_path(sandbox)}, sandbox["root"]
    ) == (
        "deny",
        "path_policy",
    )


@pytest.mark.parametrize(
    "make_path",
    [
        lambda s: "notes.txt",
        lambda s: "./notes.txt",
        lambda s: "sub/deep.txt",
        lambda s: "sub//deep.txt",
        lambda s: "link_in.txt",
        lambda s: str(s["root"] / "notes.txt"),
        lambda s: str(s["root"]),
        lambda s: ".",
        lambda s: "new_file_that_does_not_exist.txt",
        lambda s: "%2e%2e/literal-name",  # not decoded: a file literally named so
    ],
)
def test_paths_inside_are_allowed(sandbox: dict[str, Path], make_path: Callable[..., str]) -> None:
    assert check(
        permissions_standard(), tool_read_file(), {"path": make_path(sandbox)}, sandbox["root"]
    ) == (
        "allow",
        "allowed",
    )


@pytest.mark.parametrize(
    ("factory", "args"),
    [
        (tool_read_markdown, {"path": "../outside/secret.txt"}),
        (tool_list_files, {"path": "dir_out"}),
        (tool_grep_files, {"pattern": "x", "path": "/etc"}),
        (tool_glob_files, {"pattern": "../*"}),
        (tool_glob_files, {"pattern": "/etc/*"}),
        (tool_glob_files, {"pattern": "sub/../../*"}),
        (tool_glob_files, {"pattern": "*", "path": "../outside"}),
        (tool_read_csv, {"path": "link_out.txt"}),
    ],
)
def test_every_file_tool_is_confined(
    sandbox: dict[str, Path], factory: Callable[[], Tool], args: dict
) -> None:
    assert check(permissions_full(), factory(), args, sandbox["root"]) == ("deny", "path_policy")


# ---------------------------------------------------------------- 1b. paths (write)

WRITE_ESCAPES = [
    "../outside/new.txt",
    "../data2/new.txt",
    "link_out.txt",
    "dangling_out.txt",
    "dir_out/new.txt",
    "chain_out.txt",
    "~/new.txt",
    "sub/../../new.txt",
]


@pytest.mark.parametrize("path", WRITE_ESCAPES)
@pytest.mark.parametrize("factory", [tool_write_file, tool_edit_file, tool_multi_edit])
def test_write_escapes_are_denied_for_every_write_tool(
    sandbox: dict[str, Path], path: str, factory: Callable[[], Tool]
) -> None:
    args: dict[str, Any] = {"path": path}
    if factory is tool_write_file:
        args["content"] = "pwned"
    elif factory is tool_edit_file:
        args.update(old_string="a", new_string="b")
    else:
        args["edits"] = [{"old_string": "a", "new_string": "b"}]
    assert check(permissions_full(), factory(), args, sandbox["root"]) == ("deny", "path_policy")


def test_write_dirs_confine_writes_and_extend_the_sandbox(sandbox: dict[str, Path]) -> None:
    root, extra = sandbox["root"], sandbox["extra"]
    perms = Permissions(file_write=[str(extra)])
    write = tool_write_file()
    # Writing in the working dir is no longer covered: a soft deny from the mode step.
    assert check(perms, write, {"path": "a.txt", "content": "x"}, root) == ("deny", "mode")
    assert check(perms, write, {"path": str(extra / "a.txt"), "content": "x"}, root) == (
        "allow",
        "allowed",
    )
    # Reads may use the write dirs too, but never a prefix sibling of them.
    assert check(perms, tool_read_file(), {"path": str(extra)}, root)[0] == "allow"
    assert check(perms, write, {"path": str(extra) + "2/a.txt", "content": "x"}, root) == (
        "deny",
        "path_policy",
    )


# ---------------------------------------------------------------- 2. the mode table

BUILTINS: dict[str, Callable[[], Tool]] = {
    "read_file": tool_read_file,
    "write_file": tool_write_file,
    "run_python": tool_run_python,
    "run_bash": tool_run_bash,
    "web_fetch": tool_web_fetch,
    "web_search": tool_web_search,
    "ask_user": tool_ask_user,
}
ARGS: dict[str, dict[str, Any]] = {
    "read_file": {"path": "notes.txt"},
    "write_file": {"path": "out.txt", "content": "x"},
    "run_python": {"code": "1 + 1"},
    "run_bash": {"command": "echo hi"},
    "web_fetch": {"url": "https://example.com"},
    "web_search": {"query": "deputy"},
    "ask_user": {
        "questions": [
            {
                "header": "Pick",
                "question": "Which?",
                "options": [{"label": "a", "description": "A"}, {"label": "b", "description": "B"}],
                "multi_select": False,
            }
        ]
    },
}

# (tool, mode, flags) -> decision; flags are set on top of the mode's constructor.
MODE_TABLE = [
    ("read_file", "standard", {}, "allow"),
    ("read_file", "plan", {}, "allow"),
    ("read_file", "readonly", {}, "allow"),
    ("read_file", "full", {}, "allow"),
    ("read_file", "standard", {"file_read": False}, "deny"),
    ("read_file", "full", {"file_read": False}, "deny"),
    ("write_file", "standard", {}, "allow"),
    ("write_file", "standard", {"file_write": False}, "deny"),
    ("write_file", "plan", {}, "deny"),
    ("write_file", "readonly", {}, "deny"),
    ("write_file", "readonly", {"file_write": True}, "deny"),
    ("write_file", "full", {}, "allow"),
    ("write_file", "full", {"file_write": False}, "deny"),
    ("run_python", "standard", {}, "deny"),
    ("run_python", "standard", {"run_python": True}, "allow"),
    ("run_python", "plan", {"run_python": True}, "deny"),
    ("run_python", "readonly", {"run_python": True}, "deny"),
    ("run_python", "full", {}, "allow"),
    ("run_python", "full", {"run_python": False}, "deny"),
    ("run_bash", "standard", {}, "deny"),
    ("run_bash", "standard", {"run_bash": True}, "allow"),
    ("run_bash", "standard", {"run_python": True}, "deny"),
    ("run_bash", "plan", {"run_bash": True}, "deny"),
    ("run_bash", "readonly", {"run_bash": True}, "deny"),
    ("run_bash", "full", {}, "allow"),
    ("run_bash", "full", {"run_bash": False}, "deny"),
    ("web_fetch", "standard", {}, "deny"),
    ("web_fetch", "standard", {"web": True}, "allow"),
    ("web_fetch", "plan", {"web": True}, "allow"),
    # permissions_plan() turns web on, as deputy's does; without it plan mode denies.
    ("web_fetch", "plan", {}, "allow"),
    ("web_fetch", "plan", {"web": False}, "deny"),
    # The built-in web tools only read: readonly mode allows them when web=True.
    ("web_fetch", "readonly", {"web": True}, "allow"),
    ("web_fetch", "readonly", {}, "deny"),
    ("web_fetch", "full", {}, "allow"),
    ("web_search", "standard", {}, "deny"),
    ("web_search", "standard", {"web": True}, "allow"),
    ("web_search", "plan", {"web": True}, "allow"),
    ("web_search", "plan", {}, "allow"),
    ("web_search", "plan", {"web": False}, "deny"),
    ("web_search", "full", {"web": False}, "deny"),
    ("web_search", "readonly", {"web": True}, "allow"),
    ("web_search", "readonly", {}, "deny"),
    ("ask_user", "standard", {}, "allow"),
    ("ask_user", "plan", {}, "allow"),
    ("ask_user", "readonly", {}, "allow"),
    ("ask_user", "full", {}, "allow"),
]

CONSTRUCTORS = {
    "standard": permissions_standard,
    "plan": permissions_plan,
    "readonly": permissions_readonly,
    "full": permissions_full,
}


@pytest.mark.parametrize(("name", "mode", "flags", "expected"), MODE_TABLE)
def test_mode_table_for_builtins(
    sandbox: dict[str, Path], name: str, mode: str, flags: dict[str, Any], expected: str
) -> None:
    perms = CONSTRUCTORS[mode]().model_copy(update=flags)
    decision, _step = check(perms, BUILTINS[name](), ARGS[name], sandbox["root"])
    assert decision == expected


# ---------------------------------------------------------------- 3. custom tools and annotations

RO_CLOSED = {"read_only_hint": True, "open_world_hint": False}
RO_OPEN = {"read_only_hint": True, "open_world_hint": True}
MODIFY_CLOSED = {"read_only_hint": False, "destructive_hint": False, "open_world_hint": False}
MODIFY_OPEN = {"read_only_hint": False, "open_world_hint": True}
CONTRADICTORY = {"read_only_hint": True, "destructive_hint": True, "open_world_hint": False}
UNANNOTATED: dict[str, bool] = {}
HALF = {"read_only_hint": True}  # open_world missing: counts as open-world

CUSTOM_TABLE = [
    (RO_CLOSED, "standard", {}, False, "allow"),
    (RO_CLOSED, "plan", {}, False, "allow"),
    (RO_CLOSED, "readonly", {}, False, "deny"),
    (RO_CLOSED, "readonly", {}, True, "allow"),
    (RO_CLOSED, "full", {}, False, "allow"),
    (RO_OPEN, "standard", {}, False, "deny"),
    (RO_OPEN, "standard", {"web": True}, False, "allow"),
    (RO_OPEN, "plan", {"web": True}, False, "allow"),
    (RO_OPEN, "plan", {}, False, "allow"),  # permissions_plan() has web on
    (RO_OPEN, "plan", {"web": False}, False, "deny"),
    (RO_OPEN, "readonly", {"web": True}, True, "deny"),
    (RO_OPEN, "full", {}, False, "allow"),
    (RO_OPEN, "full", {"web": False}, False, "deny"),
    (HALF, "standard", {}, False, "deny"),
    (HALF, "standard", {"web": True}, False, "allow"),
    (MODIFY_CLOSED, "standard", {}, False, "deny"),
    (MODIFY_CLOSED, "standard", {}, True, "allow"),
    (MODIFY_CLOSED, "plan", {}, True, "deny"),
    (MODIFY_CLOSED, "readonly", {}, True, "deny"),
    (MODIFY_CLOSED, "full", {}, False, "allow"),
    (MODIFY_OPEN, "standard", {}, True, "deny"),
    (MODIFY_OPEN, "standard", {"web": True}, True, "allow"),
    (MODIFY_OPEN, "standard", {"web": True}, False, "deny"),
    (UNANNOTATED, "standard", {}, False, "deny"),
    (UNANNOTATED, "standard", {"web": True}, True, "allow"),
    (UNANNOTATED, "standard", {}, True, "deny"),  # open-world by default: needs web too
    (UNANNOTATED, "plan", {"web": True}, True, "deny"),
    (UNANNOTATED, "readonly", {"web": True}, True, "deny"),
    (UNANNOTATED, "full", {}, False, "allow"),
    (CONTRADICTORY, "standard", {}, False, "deny"),
    (CONTRADICTORY, "plan", {}, True, "deny"),
    (CONTRADICTORY, "readonly", {}, True, "deny"),
]


@pytest.mark.parametrize(("hints", "mode", "flags", "allowlisted", "expected"), CUSTOM_TABLE)
def test_mode_table_for_custom_tools(
    sandbox: dict[str, Path],
    hints: dict[str, bool],
    mode: str,
    flags: dict[str, Any],
    allowlisted: bool,
    expected: str,
) -> None:
    update = {**flags, "tool_allowlist": ("custom_tool",) if allowlisted else ()}
    perms = CONSTRUCTORS[mode]().model_copy(update=update)
    assert check(perms, custom(hints=hints), {"x": "1"}, sandbox["root"])[0] == expected


@pytest.mark.parametrize("name", ["read_file", "list_files", "ask_user", "web_fetch", "write_file"])
def test_a_builtin_name_confers_nothing(sandbox: dict[str, Path], name: str) -> None:
    impostor = custom(name)  # unannotated custom tool wearing a built-in's name
    assert check(permissions_standard(), impostor, {"x": "1"}, sandbox["root"]) == ("deny", "mode")
    mcp = custom(
        name, source=ToolSource(type="mcp", server="evil", remote_name=name), hints=RO_CLOSED
    )
    assert check(permissions_readonly(), mcp, {"x": "1"}, sandbox["root"]) == ("deny", "mode")


def test_a_fake_package_source_confers_nothing(sandbox: dict[str, Path]) -> None:
    fake = custom("write_file", source=ToolSource(type="package", package="deputy_shiny_evil"))
    assert check(permissions_full(), fake, {"x": "1"}, sandbox["root"]) == ("allow", "allowed")
    assert check(permissions_plan(), fake, {"x": "1"}, sandbox["root"]) == ("deny", "mode")


# ---------------------------------------------------------------- 4. deny and allow lists


@pytest.mark.parametrize(
    "entry", ["write_file", "WRITE_FILE", "Write_File", " write_file ", "wRiTe_FiLe"]
)
def test_denylist_is_case_insensitive_and_hard(sandbox: dict[str, Path], entry: str) -> None:
    perms = permissions_full().model_copy(
        update={"tool_denylist": (entry.strip(),), "tool_allowlist": ("write_file",)}
    )
    decision = permissions_check(perms, tool_write_file(), ARGS["write_file"], sandbox["root"])
    assert (decision.decision, decision.step, decision.hard) == ("deny", "denylist", True)


def test_denylist_beats_ask_user_and_custom_tools(sandbox: dict[str, Path]) -> None:
    perms = Permissions(tool_denylist=("ask_user", "custom_tool"))
    assert check(perms, tool_ask_user(), ARGS["ask_user"], sandbox["root"]) == ("deny", "denylist")
    assert check(perms, custom(hints=RO_CLOSED), {}, sandbox["root"]) == ("deny", "denylist")


def test_denylist_does_not_match_partial_names(sandbox: dict[str, Path]) -> None:
    perms = Permissions(tool_denylist=("read",))
    assert check(perms, tool_read_file(), {"path": "notes.txt"}, sandbox["root"])[0] == "allow"


@pytest.mark.parametrize("mode", ["plan", "readonly"])
@pytest.mark.parametrize("name", ["write_file", "run_python", "run_bash"])
def test_allowlist_never_lifts_a_mode_deny(sandbox: dict[str, Path], mode: str, name: str) -> None:
    perms = CONSTRUCTORS[mode]().model_copy(
        update={"tool_allowlist": (name,), "run_python": True, "run_bash": True}
    )
    assert check(perms, BUILTINS[name](), ARGS[name], sandbox["root"])[0] == "deny"


def test_allowlist_never_replaces_a_capability_flag(sandbox: dict[str, Path]) -> None:
    perms = Permissions(tool_allowlist=("run_bash", "web_fetch"))
    assert check(perms, tool_run_bash(), ARGS["run_bash"], sandbox["root"]) == ("deny", "mode")
    assert check(perms, tool_web_fetch(), ARGS["web_fetch"], sandbox["root"]) == ("deny", "mode")


def test_empty_allowlist_adds_nothing(sandbox: dict[str, Path]) -> None:
    assert check(Permissions(tool_allowlist=()), custom(), {}, sandbox["root"])[0] == "deny"


def test_empty_allowlist_restricts_nothing(sandbox: dict[str, Path]) -> None:
    perms = permissions_full().model_copy(update={"tool_allowlist": ()})
    for name, factory in BUILTINS.items():
        assert check(perms, factory(), ARGS[name], sandbox["root"]) == ("allow", "allowed")
    assert check(perms, custom(hints=MODIFY_OPEN), {}, sandbox["root"]) == ("allow", "allowed")


# A non-empty allowlist is tool gating (step 2): a tool off it is a hard DENY in every
# mode, ask_user included; a tool on it still goes through the mode and the flags.
# (allowlist, tool, mode, flags, decision, step)
ALLOWLIST_TABLE: list[tuple[tuple[str, ...], str, str, dict[str, Any], str, str]] = [
    (("read_file",), "read_file", "standard", {}, "allow", "allowed"),
    (("READ_FILE",), "read_file", "standard", {}, "allow", "allowed"),
    (("read_file",), "ask_user", "standard", {}, "deny", "allowlist"),
    (("read_file",), "ask_user", "plan", {}, "deny", "allowlist"),
    (("read_file",), "ask_user", "readonly", {}, "deny", "allowlist"),
    (("read_file",), "ask_user", "full", {}, "deny", "allowlist"),
    (("read_file", "Ask_User"), "ask_user", "standard", {}, "allow", "allowed"),
    (("ask_user",), "ask_user", "readonly", {}, "allow", "allowed"),
    (("ask_user",), "read_file", "readonly", {}, "deny", "allowlist"),
    (("read_file",), "write_file", "standard", {}, "deny", "allowlist"),
    (("read_file",), "write_file", "full", {}, "deny", "allowlist"),
    (("read_file",), "run_python", "full", {}, "deny", "allowlist"),
    (("read_file",), "run_bash", "full", {}, "deny", "allowlist"),
    (("read_file",), "web_fetch", "full", {}, "deny", "allowlist"),
    (("read_file",), "web_search", "readonly", {"web": True}, "deny", "allowlist"),
    (("write_file",), "write_file", "full", {}, "allow", "allowed"),
    (("run_bash",), "run_bash", "full", {}, "allow", "allowed"),
    (("web_search",), "web_search", "readonly", {"web": True}, "allow", "allowed"),
    # On the list is not enough: a mode DENY and a capability flag still apply.
    (("write_file",), "write_file", "plan", {}, "deny", "mode"),
    (("write_file",), "write_file", "readonly", {"file_write": True}, "deny", "mode"),
    (("write_file",), "write_file", "standard", {"file_write": False}, "deny", "mode"),
    (("run_bash",), "run_bash", "standard", {}, "deny", "mode"),
    (("run_python",), "run_python", "full", {"run_python": False}, "deny", "mode"),
    (("web_fetch",), "web_fetch", "full", {"web": False}, "deny", "mode"),
    (("read_file",), "read_file", "full", {"file_read": False}, "deny", "mode"),
]


@pytest.mark.parametrize(
    ("allowlist", "name", "mode", "flags", "expected", "step"), ALLOWLIST_TABLE
)
def test_allowlist_gates_builtins(
    sandbox: dict[str, Path],
    allowlist: tuple[str, ...],
    name: str,
    mode: str,
    flags: dict[str, Any],
    expected: str,
    step: str,
) -> None:
    perms = CONSTRUCTORS[mode]().model_copy(update={**flags, "tool_allowlist": allowlist})
    decision = permissions_check(perms, BUILTINS[name](), ARGS[name], sandbox["root"])
    assert (decision.decision, decision.step) == (expected, step)
    assert decision.hard == (step == "allowlist")


@pytest.mark.parametrize("mode", ["standard", "plan", "readonly", "full"])
@pytest.mark.parametrize("hints", [RO_CLOSED, RO_OPEN, MODIFY_CLOSED, UNANNOTATED])
def test_allowlist_gates_custom_tools_in_every_mode(
    sandbox: dict[str, Path], mode: str, hints: dict[str, bool]
) -> None:
    perms = CONSTRUCTORS[mode]().model_copy(update={"tool_allowlist": ("other",), "web": True})
    decision = permissions_check(perms, custom(hints=hints), {"x": "1"}, sandbox["root"])
    assert (decision.decision, decision.step, decision.hard) == ("deny", "allowlist", True)
    assert "not on the tool allowlist" in decision.reason


def test_denylist_wins_over_the_allowlist(sandbox: dict[str, Path]) -> None:
    perms = Permissions(tool_allowlist=("read_file",), tool_denylist=("READ_FILE",))
    assert check(perms, tool_read_file(), ARGS["read_file"], sandbox["root"]) == (
        "deny",
        "denylist",
    )


def test_allowlist_denial_comes_before_the_path_policy_and_the_callback(
    sandbox: dict[str, Path],
) -> None:
    seen: list[str] = []

    def callback(name: str, args: dict, ctx: Any) -> PermissionResultAllow:
        seen.append(name)
        return PermissionResultAllow()

    perms = Permissions(tool_allowlist=("write_file",), can_use_tool=callback)
    decision = permissions_check(perms, tool_read_file(), {"path": "../x"}, sandbox["root"])
    assert (decision.decision, decision.step) == ("deny", "allowlist")
    assert seen == []


def test_allowlist_is_case_insensitive(sandbox: dict[str, Path]) -> None:
    perms = Permissions(tool_allowlist=("CUSTOM_TOOL",), web=True)
    assert check(perms, custom(), {}, sandbox["root"])[0] == "allow"


# ---------------------------------------------------------------- 5. approval rules


@pytest.mark.parametrize(
    ("update", "tool_name", "expected"),
    [
        ({"approval_tools": ("read_file",)}, "read_file", "ask"),
        ({"approval_tools": ("READ_FILE",)}, "read_file", "ask"),
        ({"approval_tools": ("write_file",)}, "read_file", "allow"),
        ({"approval_effects": ("write",)}, "write_file", "ask"),
        ({"approval_effects": ("write",)}, "read_file", "allow"),
        ({"approval_effects": ("destructive",)}, "write_file", "ask"),
        ({"approval_effects": ("destructive",)}, "read_file", "allow"),
        ({"approval_effects": ("open_world",), "web": True}, "web_fetch", "ask"),
        ({"approval_effects": ("open_world",)}, "read_file", "allow"),
        ({"approval_effects": ("write",), "run_bash": True}, "run_bash", "ask"),
        # Approval rules never turn a DENY into an ASK.
        ({"approval_tools": ("run_bash",)}, "run_bash", "deny"),
    ],
)
def test_approval_rules_turn_allow_into_ask(
    sandbox: dict[str, Path], update: dict[str, Any], tool_name: str, expected: str
) -> None:
    perms = permissions_standard().model_copy(update=update)
    assert check(perms, BUILTINS[tool_name](), ARGS[tool_name], sandbox["root"])[0] == expected


# ---------------------------------------------------------------- 6. can_use_tool


async def _async_allow(name: str, args: dict, ctx: Any) -> PermissionResultAllow:
    return PermissionResultAllow()


def _raises(name: str, args: dict, ctx: Any) -> Any:
    raise RuntimeError("policy service down")


@pytest.mark.parametrize(
    ("callback", "expected"),
    [
        (lambda n, a, c: PermissionResultAllow(), "allow"),
        (lambda n, a, c: PermissionResultDeny("no"), "deny"),
        (lambda n, a, c: PermissionResultPending(), "ask"),
        (_async_allow, "allow"),
        (_raises, "deny"),
        (lambda n, a, c: None, "deny"),
        (lambda n, a, c: True, "deny"),
        (lambda n, a, c: "allow", "deny"),
        (lambda n, a, c: {"behavior": "allow"}, "deny"),
        (lambda n, a, c: PermissionResultAllow, "deny"),  # the class, not an instance
        (lambda: PermissionResultAllow(), "deny"),  # wrong signature
    ],
)
def test_can_use_tool_results(
    sandbox: dict[str, Path], callback: Callable[..., Any], expected: str
) -> None:
    perms = Permissions(can_use_tool=callback)
    decision = permissions_check(perms, tool_read_file(), {"path": "notes.txt"}, sandbox["root"])
    assert decision.decision == expected
    if expected != "allow":
        assert decision.step == "can_use_tool"


def test_can_use_tool_cannot_lift_a_deny(sandbox: dict[str, Path]) -> None:
    perms = Permissions(can_use_tool=lambda n, a, c: PermissionResultAllow())
    assert check(perms, tool_run_bash(), ARGS["run_bash"], sandbox["root"]) == ("deny", "mode")
    assert check(perms, tool_read_file(), {"path": "../x"}, sandbox["root"]) == (
        "deny",
        "path_policy",
    )


def test_can_use_tool_receives_metadata_and_validated_input(sandbox: dict[str, Path]) -> None:
    seen: list[Any] = []

    def callback(name: str, args: dict, ctx: Any) -> PermissionResultAllow:
        seen.append((name, args, ctx))
        return PermissionResultAllow()

    permissions_check(
        Permissions(can_use_tool=callback), tool_read_file(), {"path": "notes.txt"}, sandbox["root"]
    )
    name, args, ctx = seen[0]
    assert name == "read_file" and args["path"] == "notes.txt"
    assert ctx.tool_metadata["name"] == "read_file"
    assert ctx.tool_annotations["read_only_hint"] is True
    assert ctx.mode == "standard"


# ---------------------------------------------------------------- 7. arguments


@pytest.mark.parametrize(
    "bad", ['{"path": ', "[1, 2]", '"a string"', '{"path": 42, "extra": 1}', "{}"]
)
def test_malformed_arguments_are_denied_before_anything_else(
    sandbox: dict[str, Path], bad: str
) -> None:
    perms = Permissions(can_use_tool=_raises)  # would deny too, but must not even run
    decision = permissions_check(perms, tool_read_file(), bad, sandbox["root"])
    assert (decision.decision, decision.step) == ("deny", "arguments")


# ---------------------------------------------------------------- 8. mode narrowing

NARROWING = [
    ("full", "full", True),
    ("full", "standard", True),
    ("full", "plan", True),
    ("full", "readonly", True),
    ("standard", "standard", True),
    ("standard", "readonly", True),
    ("standard", "plan", False),
    ("standard", "full", False),
    ("plan", "plan", True),
    ("plan", "readonly", True),
    ("plan", "standard", False),
    ("plan", "full", False),
    ("readonly", "readonly", True),
    ("readonly", "standard", False),
    ("readonly", "plan", False),
    ("readonly", "full", False),
    ("standard", "admin", False),
    ("standard", "READONLY", False),
    ("full", "", False),
]


@pytest.mark.parametrize(("start", "target", "ok"), NARROWING)
def test_mode_narrowing(start: str, target: str, ok: bool) -> None:
    perms = CONSTRUCTORS[start]()
    if ok:
        assert narrow_mode(perms, target).mode == target
    else:
        with pytest.raises(ConfigurationError):
            narrow_mode(perms, target)


def test_narrowing_keeps_the_other_settings() -> None:
    perms = permissions_full().model_copy(update={"tool_denylist": ("x",)})
    narrowed = narrow_mode(perms, "plan")
    assert narrowed.tool_denylist == ("x",) and narrowed.run_bash is True


# ---------------------------------------------------------------- 9. malformed permission values


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "admin"},
        {"mode": "bypassPermissions"},
        {"file_write": "relative/dir"},
        {"file_write": ["/definitely/not/here/xyz"]},
        {"file_write": 1},
        {"file_read": "yes"},
        {"run_bash": 1},
        {"web": "true"},
        {"tool_allowlist": "write_file"},
        {"tool_denylist": [1]},
        {"tool_denylist": [""]},
        {"approval_effects": ["delete"]},
        {"approval_effects": "write"},
        {"can_use_tool": "allow"},
        {"working_dir": "/definitely/not/here/xyz"},
        {"unknown_field": True},
    ],
)
def test_malformed_permissions_name_the_field(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Permissions(**kwargs)
    assert next(iter(kwargs)) in str(caught.value)


def test_permissions_are_frozen() -> None:
    perms = permissions_standard()
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error
        perms.run_bash = True  # type: ignore[misc]
    assert perms.model_copy(update={"run_bash": True}).run_bash and not perms.run_bash
