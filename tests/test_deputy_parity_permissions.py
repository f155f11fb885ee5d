"""The rest of deputy's permissions (#37, rows 20-23, 36, 37, 47): each ports deputy's
example (its reference, its tests/testthat) and checks what a user porting R code sees."""

from __future__ import annotations

import asyncio
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, tool
from deputy_shiny.errors import (
    DeputyError,
    HookExecutionError,
    PermissionDeniedError,
    PermissionsError,
)
from deputy_shiny.hooks import HookContext, HookMatcher, HookRegistry
from deputy_shiny.permissions import (
    PermissionResultAllow,
    PermissionResultDeny,
    Permissions,
    permissions_check,
)
from deputy_shiny.sandbox import Sandbox
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import (
    NativeWebFetch,
    NativeWebSearch,
    Tool,
    tool_read_file,
    tool_run_bash,
    tool_run_python,
    tool_web_fetch,
    tools_file,
    tools_web,
)
from tests.helpers import local_tool

UNCONFINED = Sandbox(kind="none")  # the fake installer below touches nothing else


def _call(name: str, args: dict[str, Any]) -> ScriptedReply:
    return ScriptedReply(tool_calls=[ScriptedToolCall(name, args, id="c1")])


def _tool_end(agent: Agent) -> Any:
    result = agent.last_run()
    assert result is not None
    return next(e for e in result.events if e.type == "tool_end")


def _permission_event(agent: Agent) -> Any:
    result = agent.last_run()
    assert result is not None
    return next(e for e in result.events if e.type == "permission")


@pytest.fixture
def fake_pip(tmp_path: Path) -> Path:
    """``./bin/pip``: records that it ran (an installer the check must catch by name)."""
    script = tmp_path / "bin" / "pip"
    script.parent.mkdir()
    script.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/../installed.txt"\necho done\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return tmp_path / "installed.txt"


# --------------------------------------------------------------------------- row 20


@pytest.mark.parametrize(
    ("tool_name", "arguments"),
    [
        ("run_bash", {"command": "./bin/pip install rich"}),
        # a prompt-injected command hides the install behind a harmless start
        ("run_bash", {"command": "ls; bash -c 'cd . && ./bin/pip install rich'"}),
        ("run_bash", {"command": "echo $(./bin/pip install rich)"}),
        (
            "run_python",
            {"code": "import subprocess\nsubprocess.run(['./bin/pip', 'install', 'x'])"},
        ),
        ("run_python", {"code": "import os\ncmd = './bin/pip install x'\nos.system(cmd)"}),
    ],
)
async def test_install_packages_false_denies_an_install_and_nothing_runs(
    tmp_path: Path, fake_pip: Path, tool_name: str, arguments: dict[str, Any]
) -> None:
    # deputy: install_package is denied with "Package installation is not allowed" unless
    # Permissions(install_packages = TRUE); here the code tools are the ones that install.
    agent = Agent(
        ScriptedModel([_call(tool_name, arguments), "fine"]),
        tools=[tool_run_bash(UNCONFINED), tool_run_python(UNCONFINED)],
        permissions=Permissions(run_bash=True, run_python=True),
        working_dir=tmp_path,
    )
    await agent.run_async("set up the environment")
    end = _tool_end(agent)
    assert end.is_error
    assert "would install packages (pip install)" in end.output
    assert "install_packages=True" in end.output
    permission = _permission_event(agent)
    assert (permission.decision, permission.step) == ("deny", "mode")
    assert not fake_pip.exists()  # the installer never ran
    agent.close()


async def test_install_packages_true_lets_the_same_install_run(
    tmp_path: Path, fake_pip: Path
) -> None:
    agent = Agent(
        ScriptedModel([_call("run_bash", {"command": "./bin/pip install rich"}), "fine"]),
        tools=[tool_run_bash(UNCONFINED)],
        permissions=Permissions(run_bash=True, install_packages=True),
        working_dir=tmp_path,
    )
    await agent.run_async("install rich")
    end = _tool_end(agent)
    assert not end.is_error, end.output
    assert fake_pip.read_text() == "install rich\n"


@pytest.mark.parametrize(
    "command",
    ["pip list", "echo 'pip install rich'", "npm test", "grep install setup.py", "uv run x.py"],
)
def test_commands_that_only_mention_installers_are_not_installs(command: str) -> None:
    decision = permissions_check(
        Permissions(run_bash=True), tool_run_bash(), {"command": command}, "."
    )
    assert decision.decision == "allow", decision.reason


@pytest.mark.parametrize(
    ("command", "installer"),
    [
        ("sudo apt-get install -y jq", "apt-get install"),
        ("apt install jq", "apt install"),
        ("uv pip install polars", "uv pip install"),
        ("python3 -m pip install -U rich", "pip install"),
        ("npm i left-pad", "npm i"),
        ("pip3 install rich", "pip3 install"),
        ("env X=1 npm install", "npm install"),
        ("python -c \"import os; os.system('pip install x')\"", "pip install"),
    ],
)
def test_each_installer_is_named_in_the_denial(command: str, installer: str) -> None:
    decision = permissions_check(
        Permissions(run_bash=True), tool_run_bash(), {"command": command}, "."
    )
    assert decision.decision == "deny"
    assert f"({installer})" in decision.reason


def test_an_install_hidden_below_what_is_read_is_denied_and_odd_code_never_crashes() -> None:
    perms = Permissions(run_bash=True, run_python=True)
    hidden = "echo " + "$(" * 20 + "pip install evil" + ")" * 20
    decision = permissions_check(perms, tool_run_bash(), {"command": hidden}, ".")
    assert decision.decision == "deny" and "too deeply" in decision.reason
    # Code Python itself cannot compile runs nothing: allowed (the tool reports the error).
    for code in ["1+" * 200_000 + "1", "os.system(", "(" * 10_000]:
        assert permissions_check(perms, tool_run_python(), {"code": code}, ".").allowed


# --------------------------------------------------------------------------- row 21


def test_full_mode_allows_everything_as_deputy() -> None:
    # deputy's "full mode allows everything": run_bash (even rm -rf /, which only a hook
    # stops) and an unknown tool, with no capability flag given.
    full = Permissions(mode="full")
    assert permissions_check(full, tool_run_bash(), {"command": "rm -rf /"}, ".").allowed
    assert permissions_check(full, tool_run_python(), {"code": "1"}, ".").allowed
    assert permissions_check(full, tool_web_fetch(), {"url": "https://example.org"}, ".").allowed
    assert permissions_check(full, tool_run_bash(), {"command": "pip install x"}, ".").allowed

    def dangerous_tool() -> str:
        """Unannotated: may modify, destroy and reach the world."""
        return "done"

    assert permissions_check(full, tool(dangerous_tool), {}, ".").allowed
    assert (full.run_bash, full.run_python, full.web, full.install_packages) == (True,) * 4


def test_full_mode_keeps_a_flag_turned_off_on_purpose() -> None:
    # The kept difference: deputy's full mode ignores the flags; an explicit False here
    # still denies, and the message says which flag.
    decision = permissions_check(
        Permissions(mode="full", run_bash=False), tool_run_bash(), {"command": "ls"}, "."
    )
    assert (decision.decision, decision.step) == ("deny", "mode")
    assert "run_bash=True" in decision.reason
    no_installs = Permissions(mode="full", install_packages=False)
    denied = permissions_check(no_installs, tool_run_bash(), {"command": "pip install x"}, ".")
    assert "install_packages=True" in denied.reason


# --------------------------------------------------------------------------- rows 22-23


def test_permission_results_have_deputys_fields() -> None:
    # deputy's tests: PermissionResultAllow(message = "test message"),
    # PermissionResultDeny(reason = "test reason", interrupt = TRUE).
    allow = PermissionResultAllow(message="test message")
    assert allow.message == "test message"
    deny = PermissionResultDeny(reason="test reason", interrupt=True)
    assert (deny.reason, deny.message, deny.interrupt) == ("test reason", "test reason", True)
    assert PermissionResultDeny("kept") == PermissionResultDeny(message="kept")
    with pytest.raises(PermissionsError, match="message= or reason="):
        PermissionResultDeny("one", reason="another")
    with pytest.raises(PermissionsError, match="str"):
        PermissionResultDeny(reason=42)  # type: ignore[arg-type]


async def test_a_deny_reason_reaches_the_model_and_an_allow_message_the_record(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "secret.txt").write_text("s3cret")

    def policy(tool_name: str, tool_input: dict[str, Any], context: Any) -> Any:
        if tool_input["path"] == "secret.txt":
            return PermissionResultDeny(reason="custom read denial")
        return PermissionResultAllow(message="Tool approved by custom callback")

    async def run(path: str) -> Agent:
        agent = Agent(
            ScriptedModel([_call("read_file", {"path": path}), "ok"]),
            tools=[tool_read_file()],
            permissions=Permissions(can_use_tool=policy),
            working_dir=tmp_path,
        )
        await agent.run_async("read")
        return agent

    denied = await run("secret.txt")
    assert _tool_end(denied).is_error
    assert "custom read denial" in _tool_end(denied).output
    assert "s3cret" not in _tool_end(denied).output
    allowed = await run("notes.txt")
    assert "hello" in _tool_end(allowed).output and not _tool_end(allowed).is_error
    assert _permission_event(allowed).reason == "Tool approved by custom callback"


def test_an_allow_message_never_lifts_an_approval_rule() -> None:
    perms = Permissions(
        approval_tools=("read_file",),
        can_use_tool=lambda *_: PermissionResultAllow(message="fine by me"),
    )
    decision = permissions_check(perms, tool_read_file(), {"path": "a.txt"}, ".")
    assert (decision.decision, decision.step) == ("ask", "approval_rules")


# --------------------------------------------------------------------------- row 36


def test_tools_file_is_deputys_bundle_plus_the_other_file_tools() -> None:
    # deputy: tools_file() is read_file, read_markdown, write_file, list_files. Here the
    # bundle is every file tool (documented): the editing and search tools are added.
    names = [t.name for t in tools_file()]
    assert names == [
        "read_file",
        "read_markdown",
        "write_file",
        "edit_file",
        "multi_edit",
        "list_files",
        "glob_files",
        "grep_files",
    ]
    assert {"read_file", "read_markdown", "write_file", "list_files"} <= set(names)
    guide = Path(__file__).resolve().parent.parent / "docs" / "guide" / "built-in-tools.md"
    assert "tools_file()" in guide.read_text() and "edit_file, multi_edit" in guide.read_text()


# --------------------------------------------------------------------------- row 47


def test_a_refused_native_tool_raises_deputys_permission_denied_error() -> None:
    agent = Agent("openai/gpt-4o-search-preview", permissions=Permissions(web=True))
    with pytest.raises(PermissionDeniedError, match="tool_allowlist") as raised:
        agent.register_tools(tools_web(agent.model))
    err = raised.value
    assert (err.tool_name, err.permission_mode) == ("web_search", "standard")
    assert isinstance(err, PermissionsError | DeputyError)


async def test_a_denied_tool_call_stays_a_tool_result(tmp_path: Path) -> None:
    agent = Agent(
        ScriptedModel([_call("run_bash", {"command": "ls"}), "ok"]),
        tools=[tool_run_bash(UNCONFINED)],
        working_dir=tmp_path,
    )
    result = await agent.run_async("list")  # no PermissionDeniedError: the model is told
    assert result.stop_reason == "complete"
    assert "run_bash=True" in _tool_end(agent).output


def test_a_failed_hook_raises_deputys_hook_error_on_request() -> None:
    def audit(tool_name: str, tool_input: Any, context: Any) -> None:
        raise OSError("audit log is full")

    registry = HookRegistry([HookMatcher("PreToolUse", audit)])
    run = asyncio.run(
        registry.run(
            "PreToolUse",
            tool_name="read_file",
            tool_input={"path": "a"},
            context=HookContext(event="PreToolUse"),
        )
    )
    with pytest.raises(HookExecutionError, match="audit log is full") as raised:
        run.raise_for_failure()
    err = raised.value
    assert (err.hook_event, err.tool_name) == ("PreToolUse", "read_file")
    assert err.callback is not None and err.callback.endswith("audit")
    assert isinstance(err.__cause__, OSError)
    ok = asyncio.run(registry.select(()).run("Stop", context=HookContext(event="Stop")))
    ok.raise_for_failure()  # nothing failed: nothing raised


# --------------------------------------------------------------------------- row 37


def test_tools_web_use_native_false_gives_the_universal_tools() -> None:
    # deputy: tools_web(chat, use_native = FALSE) forces the universal tools.
    agent = Agent(
        "openai/gpt-4o-search-preview",
        permissions=Permissions(web=True, tool_allowlist=("web_search", "web_fetch")),
    )
    agent.register_tools(tools_web(agent.model, use_native=False))
    tools = agent.get_tools()
    assert all(isinstance(t, Tool) for t in tools.values())
    assert sorted(tools) == ["web_fetch", "web_search"]
    assert agent._run_deps().request_extras == {}  # nothing provider-native is sent
    native = tools_web(agent.model)  # the default stays native where litellm says so
    assert isinstance(native[1], NativeWebSearch)
    with pytest.raises(TypeError, match="use_native"):
        tools_web(agent.model, use_native="no")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- deviations


@pytest.mark.parametrize(
    ("name", "replacement"),
    [
        ("turns", "get_turns()"),
        ("provider", "get_provider()"),
        ("print", "print(agent)"),
    ],
)
def test_a_removed_deputy_method_names_its_replacement(name: str, replacement: str) -> None:
    agent = Agent(ScriptedModel(["hi"]))
    with pytest.raises(AttributeError, match=re.escape(replacement)):
        getattr(agent, name)()
    with pytest.raises(AttributeError, match=r"no attribute 'tunrs'$"):
        agent.tunrs  # type: ignore[attr-defined]  # noqa: B018 (a typo: the plain message)


def test_deputys_code_flag_names_are_refused_naming_ours() -> None:
    # deputy: Permissions(bash = TRUE, r_code = TRUE)
    with pytest.raises(PermissionsError, match=r"bash= is run_bash=.*r_code= is run_python="):
        Permissions(bash=True, r_code=True)  # type: ignore[call-arg]


async def test_the_tool_loop_stop_says_how_a_polling_tool_avoids_it() -> None:
    def poll() -> str:
        """Check whether the job is done."""
        return "not yet"

    again = ScriptedReply(tool_calls=[ScriptedToolCall("poll", {})])
    agent = Agent(ScriptedModel([again, again, again, "gave up"]), tools=[local_tool(poll)])
    result = await agent.run_async("wait for the job")
    assert result.stop_reason == "tool_loop"
    assert "a polling tool should return something that changes" in (result.stop_message or "")


FETCH_MODEL = "gemini/gemini-2.5-flash"  # litellm: supports_url_context and web search
BOTH = Permissions(web=True, tool_allowlist=("web_search", "web_fetch"))


def test_tools_web_uses_native_fetch_where_litellm_says_the_model_reads_urls() -> None:
    # deputy: tools_web(chat) gives Google's native search and fetch, OpenAI's native
    # search with the universal fetch.
    agent = Agent(FETCH_MODEL, permissions=BOTH)
    agent.register_tools(tools_web(agent.model))
    tools = agent.get_tools()
    assert isinstance(tools["web_fetch"], NativeWebFetch)
    assert isinstance(tools["web_search"], NativeWebSearch)
    assert agent._run_deps().request_extras == {
        "tools": [{"url_context": {}}],
        "web_search_options": {"search_context_size": "medium"},
    }
    openai = Agent("openai/gpt-4o-search-preview", permissions=BOTH)
    openai.register_tools(tools_web(openai.model))
    assert isinstance(openai.get_tools()["web_fetch"], Tool)  # our fetch tool in its place
    assert openai._run_deps().request_extras == {
        "web_search_options": {"search_context_size": "medium"}
    }


def test_native_fetch_is_authorized_at_registration_like_native_search() -> None:
    agent = Agent(FETCH_MODEL, permissions=Permissions(web=True, tool_allowlist=("web_search",)))
    with pytest.raises(PermissionDeniedError, match="web_fetch needs an explicit tool_allowlist"):
        agent.register_tools(tools_web(agent.model))
    assert agent.get_tools() == {}
    narrowed = Agent(FETCH_MODEL, permissions=BOTH)
    narrowed.register_tools(tools_web(narrowed.model))
    narrowed.set_permission_mode("readonly")  # no provider-side call can be checked now
    assert narrowed.get_tools() == {}
    assert narrowed._run_deps().request_extras == {}


async def test_native_fetch_rides_beside_the_function_tools_in_the_request() -> None:
    model = ScriptedModel(["read it"])
    chat_model = model.as_chat_model()
    agent = Agent(
        model,
        tools=[local_tool(_add)],
        permissions=Permissions(web=True, tool_allowlist=("web_fetch", "_add")),
    )
    agent.register_tool(NativeWebFetch(provider=chat_model.provider, model=chat_model.model))  # type: ignore[arg-type]
    assert await agent.chat_async("what does https://example.org say?") == "read it"
    sent = model.requests[0]["tools"]
    assert {"url_context": {}} in sent
    assert [t["function"]["name"] for t in sent if "function" in t] == ["_add"]


def _add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_the_deputy_command_leaves_an_install_to_the_persons_approval(tmp_path: Path) -> None:
    """In the terminal every shell call asks first: a pip install is the person's to
    approve there, not refused whatever they answer (deputy's CLI lets them)."""
    import io

    from rich.console import Console

    from deputy_shiny.cli._args import parse_args
    from deputy_shiny.cli._main import build_agent
    from deputy_shiny.cli._prompts import ScriptedLines, TerminalPrompts

    prompts = TerminalPrompts(Console(file=io.StringIO()), ScriptedLines([]))
    agent, _ = build_agent(
        parse_args(["--tools", "full"]), ScriptedModel(["hi"]), prompts, tmp_path
    )
    bash = agent.get_tools()["run_bash"]
    assert isinstance(bash, Tool)
    decision = permissions_check(
        agent.permissions, bash, {"command": "pip install rich"}, str(tmp_path)
    )
    assert decision.decision == "ask", decision.reason
