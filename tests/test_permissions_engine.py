"""Permissions, hooks and approvals inside real runs: events, files on disk, what the model sees."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

import pytest

from deputy_shiny import Agent, tool, tool_annotations
from deputy_shiny.approvals import ApprovalDecision, ApprovalRequest
from deputy_shiny.hooks import (
    HookMatcher,
    HookPoint,
    HookResultPostToolUse,
    HookResultPreToolUse,
)
from deputy_shiny.permissions import (
    PermissionResultAllow,
    PermissionResultDeny,
    PermissionResultPending,
    Permissions,
    permissions_full,
    permissions_readonly,
    permissions_standard,
)
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import (
    tool_ask_user,
    tool_read_file,
    tool_web_fetch,
    tool_web_search,
    tool_write_file,
)

from .helpers import assert_consistent, wait_until


def write(path: str, content: str = "hello", id: str = "w1") -> ScriptedReply:
    return ScriptedReply(
        tool_calls=[ScriptedToolCall("write_file", {"path": path, "content": content}, id=id)]
    )


def tool_ends(agent: Agent) -> list[Any]:
    result = agent.last_run()
    assert result is not None
    return [e for e in result.events if e.type == "tool_end"]


def of_type(agent: Agent, kind: str) -> list[Any]:
    result = agent.last_run()
    assert result is not None
    return [e for e in result.events if e.type == kind]


def counter_tool() -> Any:
    calls: list[str] = []

    def bump(note: str = "") -> str:
        """Record a call (may modify things: not declared read-only)."""
        calls.append(note)
        return f"bumped {len(calls)}"

    t = tool(bump, annotations=tool_annotations(read_only_hint=False, open_world_hint=False))
    return t, calls


# ---------------------------------------------------------------- denials


async def test_denied_write_creates_nothing_and_the_model_is_told(tmp_path: Path) -> None:
    model = ScriptedModel([write("../escape.txt"), "ok"])
    agent = Agent(model, tools=[tool_write_file()], working_dir=tmp_path)
    await agent.run_async("write outside")
    end = tool_ends(agent)[0]
    assert end.is_error and end.output.startswith("Denied: ")
    assert "traversal" in end.output
    assert not (tmp_path.parent / "escape.txt").exists()
    permission = of_type(agent, "permission")[0]
    assert (permission.decision, permission.step) == ("deny", "path_policy")
    assert model.requests[1]["messages"][-1]["content"].startswith("Denied: ")
    assert_consistent(agent)


async def test_plan_mode_write_is_denied_and_nothing_written(tmp_path: Path) -> None:
    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=Permissions(mode="plan"),
    )
    await agent.run_async("go")
    assert not (tmp_path / "a.txt").exists()
    assert of_type(agent, "permission")[0].step == "mode"


async def test_allowed_write_happens(tmp_path: Path) -> None:
    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]), tools=[tool_write_file()], working_dir=tmp_path
    )
    await agent.run_async("go")
    assert (tmp_path / "a.txt").read_text() == "hello"
    assert of_type(agent, "permission")[0].decision == "allow"


async def test_narrowing_mode_takes_effect_at_the_next_call(tmp_path: Path) -> None:
    agent = Agent(
        ScriptedModel([write("a.txt"), "ok", write("b.txt", id="w2"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
    )
    await agent.run_async("one")
    agent.set_permission_mode("readonly")
    await agent.run_async("two")
    assert (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()
    assert agent.get_permission_mode() == "readonly"


# ---------------------------------------------------------------- approvals


def asking() -> Permissions:
    return permissions_standard().model_copy(update={"approval_tools": ("write_file",)})


async def test_approval_approve(tmp_path: Path) -> None:
    seen: list[ApprovalRequest] = []

    async def handler(request: ApprovalRequest) -> ApprovalDecision:
        seen.append(request)
        return ApprovalDecision.approve()

    agent = Agent(
        ScriptedModel([write("a.txt", id="call_7"), "done"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=asking(),
        approval_handler=handler,
    )
    await agent.run_async("go")
    assert (tmp_path / "a.txt").read_text() == "hello"
    request = seen[0]
    assert request.tool_name == "write_file" and request.call_id == "call_7"
    assert request.request_id != "call_7" and len(request.request_id) >= 40
    assert request.arguments["path"] == "a.txt"
    assert request.annotations["destructive_hint"] is True
    assert "content" in request.input_schema["properties"]
    assert "approval_tools" in request.reason
    statuses = [e.status for e in of_type(agent, "approval")]
    assert statuses == ["requested", "approved"]
    assert {e.request_id for e in of_type(agent, "approval")} == {request.request_id}


async def test_approval_deny_with_message(tmp_path: Path) -> None:
    async def handler(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.deny("not that file")

    model = ScriptedModel([write("a.txt"), "ok"])
    agent = Agent(
        model,
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=asking(),
        approval_handler=handler,
    )
    await agent.run_async("go")
    assert not (tmp_path / "a.txt").exists()
    assert tool_ends(agent)[0].output == "Denied: Denied by the user: not that file"
    assert [e.status for e in of_type(agent, "approval")] == ["requested", "denied"]


async def test_approval_with_edited_input_uses_the_edit(tmp_path: Path) -> None:
    async def handler(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.approve(updated_input={"path": "edited.txt", "content": "edited"})

    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=asking(),
        approval_handler=handler,
    )
    await agent.run_async("go")
    assert not (tmp_path / "a.txt").exists()
    assert (tmp_path / "edited.txt").read_text() == "edited"


@pytest.mark.parametrize(
    "edit",
    [
        {"path": "../escaped.txt", "content": "x"},
        {"path": "/etc/deputy-escape.txt", "content": "x"},
        {"path": "a.txt"},  # fails the schema: content missing
        {"path": "a.txt", "content": "x", "mode": "explode"},
    ],
)
async def test_edited_input_is_checked_again(tmp_path: Path, edit: dict[str, Any]) -> None:
    async def handler(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.approve(updated_input=edit)

    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=asking(),
        approval_handler=handler,
    )
    await agent.run_async("go")
    assert list(tmp_path.iterdir()) == []
    assert not (tmp_path.parent / "escaped.txt").exists()
    assert tool_ends(agent)[0].output.startswith("Denied: The edited input was refused")


async def test_edited_input_still_meets_the_callback_but_its_ask_counts_as_approved(
    tmp_path: Path,
) -> None:
    def callback(name: str, args: dict, ctx: Any) -> Any:
        if args.get("path") == "forbidden.txt":
            from deputy_shiny.permissions import PermissionResultDeny

            return PermissionResultDeny("never that one")
        return PermissionResultPending()

    answers = iter(
        [{"path": "forbidden.txt", "content": "x"}, {"path": "fine.txt", "content": "x"}]
    )

    async def handler(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.approve(updated_input=next(answers))

    agent = Agent(
        ScriptedModel([write("a.txt"), write("b.txt", id="w2"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=Permissions(can_use_tool=callback),
        approval_handler=handler,
    )
    await agent.run_async("go")
    assert not (tmp_path / "forbidden.txt").exists()
    assert (tmp_path / "fine.txt").exists()


async def test_approve_always_covers_the_rest_of_the_conversation(tmp_path: Path) -> None:
    asked: list[str] = []

    async def handler(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request.arguments["path"])
        return ApprovalDecision.approve_always()

    agent = Agent(
        ScriptedModel(
            [write("a.txt"), write("b.txt", id="w2"), "ok", write("c.txt", id="w3"), "ok"]
        ),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=asking(),
        approval_handler=handler,
    )
    await agent.run_async("go")
    await agent.run_async("again")
    assert asked == ["a.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt", "c.txt"]


async def test_ask_without_a_handler_is_denied(tmp_path: Path) -> None:
    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=asking(),
    )
    await agent.run_async("go")
    assert not (tmp_path / "a.txt").exists()
    assert "No one can approve this call" in tool_ends(agent)[0].output


@pytest.mark.parametrize(
    ("failure", "status"), [(TimeoutError(), "timeout"), (RuntimeError("ui crashed"), "denied")]
)
async def test_handler_failures_deny(tmp_path: Path, failure: Exception, status: str) -> None:
    async def handler(request: ApprovalRequest) -> ApprovalDecision:
        raise failure

    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=asking(),
        approval_handler=handler,
    )
    result = await agent.run_async("go")
    assert result.stop_reason == "complete"
    assert not (tmp_path / "a.txt").exists()
    assert of_type(agent, "approval")[-1].status == status


async def test_handler_returning_junk_denies(tmp_path: Path) -> None:
    async def handler(request: ApprovalRequest) -> Any:
        return True

    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=asking(),
        approval_handler=handler,
    )
    await agent.run_async("go")
    assert not (tmp_path / "a.txt").exists()


async def test_interrupt_while_waiting_for_approval(tmp_path: Path) -> None:
    waiting = asyncio.Event()

    async def handler(request: ApprovalRequest) -> ApprovalDecision:
        waiting.set()
        await asyncio.sleep(60)
        return ApprovalDecision.approve()

    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=asking(),
        approval_handler=handler,
    )
    run = asyncio.create_task(agent.run_async("go"))
    await asyncio.wait_for(waiting.wait(), 5)
    agent.interrupt("user left")
    result = await asyncio.wait_for(run, 5)
    assert result.stop_reason == "user left"
    assert not (tmp_path / "a.txt").exists()
    assert_consistent(agent)


# ---------------------------------------------------------------- hooks in the decision


async def test_permission_request_hook_lifts_a_soft_deny(tmp_path: Path) -> None:
    bump, calls = counter_tool()
    hook = HookMatcher("PermissionRequest", lambda name, args, ctx: PermissionResultAllow())
    agent = Agent(
        ScriptedModel([ScriptedReply(tool_calls=[ScriptedToolCall("bump", {})]), "ok"]),
        tools=[bump],
        working_dir=tmp_path,
        hooks=[hook],
    )
    await agent.run_async("go")
    assert calls == [""]
    steps = [(e.decision, e.step) for e in of_type(agent, "permission")]
    assert steps == [("deny", "mode"), ("allow", "permission_request_hook")]


@pytest.mark.parametrize(
    ("permissions", "path"),
    [
        (permissions_full().model_copy(update={"tool_denylist": ("write_file",)}), "a.txt"),
        (permissions_full(), "../escape.txt"),
    ],
)
async def test_permission_request_hook_cannot_lift_a_hard_deny(
    tmp_path: Path, permissions: Permissions, path: str
) -> None:
    lifted: list[str] = []

    def lift(name: str, args: dict, ctx: Any) -> PermissionResultAllow:
        lifted.append(name)
        return PermissionResultAllow()

    agent = Agent(
        ScriptedModel([write(path), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=permissions,
        hooks=[HookMatcher("PermissionRequest", lift)],
    )
    await agent.run_async("go")
    assert lifted == []
    assert list(tmp_path.iterdir()) == [] and not (tmp_path.parent / "escape.txt").exists()


@pytest.mark.parametrize(
    ("callback", "hook_timeout"),
    [
        (
            lambda name, args, ctx: HookResultPreToolUse(permission="deny", reason="hook says no"),
            None,
        ),
        (lambda name, args, ctx: 1 / 0, None),
        (lambda name, args, ctx: "allow", None),
    ],
)
async def test_pre_tool_use_deny_error_or_junk_denies(
    tmp_path: Path, callback: Any, hook_timeout: Any
) -> None:
    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        hooks=[HookMatcher("PreToolUse", callback, timeout=hook_timeout)],
    )
    await agent.run_async("go")
    assert not (tmp_path / "a.txt").exists()
    assert of_type(agent, "permission")[-1].step == "pre_tool_use_hook"
    assert of_type(agent, "hook")


async def test_pre_tool_use_timeout_denies(tmp_path: Path) -> None:
    async def slow(name: str, args: dict, ctx: Any) -> None:
        await asyncio.sleep(5)

    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        hooks=[HookMatcher("PreToolUse", slow, timeout=0.05)],
    )
    await agent.run_async("go")
    assert not (tmp_path / "a.txt").exists()


async def test_pre_tool_use_ask_goes_to_the_handler(tmp_path: Path) -> None:
    asked: list[str] = []

    async def handler(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request.reason)
        return ApprovalDecision.approve()

    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        hooks=[
            HookMatcher(
                "PreToolUse", lambda n, a, c: HookResultPreToolUse(permission="ask", reason="check")
            )
        ],
        approval_handler=handler,
    )
    await agent.run_async("go")
    assert asked == ["check"] and (tmp_path / "a.txt").exists()


async def test_pre_tool_use_updated_input_is_used_and_rechecked(tmp_path: Path) -> None:
    def redirect(name: str, args: dict, ctx: Any) -> HookResultPreToolUse:
        return HookResultPreToolUse(updated_input={**args, "path": "redirected.txt"})

    def escape(name: str, args: dict, ctx: Any) -> HookResultPreToolUse:
        return HookResultPreToolUse(updated_input={**args, "path": "../escaped.txt"})

    for hook, expected in ((redirect, ["redirected.txt"]), (escape, [])):
        work = tmp_path / hook.__name__
        work.mkdir()
        agent = Agent(
            ScriptedModel([write("a.txt"), "ok"]),
            tools=[tool_write_file()],
            working_dir=work,
            hooks=[HookMatcher("PreToolUse", hook)],
        )
        await agent.run_async("go")
        assert sorted(p.name for p in work.iterdir()) == expected
    assert not (tmp_path / "escaped.txt").exists()


async def test_pre_tool_use_pattern_limits_which_tools_it_sees(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("content")
    agent = Agent(
        ScriptedModel(
            [ScriptedReply(tool_calls=[ScriptedToolCall("read_file", {"path": "a.txt"})]), "ok"]
        ),
        tools=[tool_read_file()],
        working_dir=tmp_path,
        hooks=[
            HookMatcher(
                "PreToolUse",
                lambda n, a, c: HookResultPreToolUse(permission="deny"),
                pattern="^write",
            )
        ],
    )
    await agent.run_async("go")
    assert not tool_ends(agent)[0].is_error


# ---------------------------------------------------------------- hooks after the call


async def test_post_tool_use_can_rewrite_suppress_or_stop(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("secret content")
    read = ScriptedReply(tool_calls=[ScriptedToolCall("read_file", {"path": "a.txt"})])

    def rewrite(name: str, args: dict, ctx: Any, output: str) -> HookResultPostToolUse:
        return HookResultPostToolUse(updated_tool_output=output.replace("secret", "[redacted]"))

    model = ScriptedModel([read, "ok"])
    agent = Agent(
        model,
        tools=[tool_read_file()],
        working_dir=tmp_path,
        hooks=[HookMatcher("PostToolUse", rewrite)],
    )
    await agent.run_async("go")
    assert "[redacted] content" in tool_ends(agent)[0].output
    assert "secret" not in model.requests[1]["messages"][-1]["content"]

    suppress = HookMatcher(
        "PostToolUse", lambda n, a, c, o: HookResultPostToolUse(suppress_output=True)
    )
    agent = Agent(
        ScriptedModel([read, "ok"]),
        tools=[tool_read_file()],
        working_dir=tmp_path,
        hooks=[suppress],
    )
    await agent.run_async("go")
    assert "secret" not in tool_ends(agent)[0].output

    stop = HookMatcher(
        "PostToolUse",
        lambda n, a, c, o: HookResultPostToolUse(continue_=False, stop_reason="enough"),
    )
    model = ScriptedModel([read, "never"])
    agent = Agent(model, tools=[tool_read_file()], working_dir=tmp_path, hooks=[stop])
    result = await agent.run_async("go")
    assert result.stop_reason == "hook_requested_stop" and result.stop_message == "enough"
    assert len(model.requests) == 1
    assert_consistent(agent)


async def test_run_level_hooks_fire_and_are_recorded(tmp_path: Path) -> None:
    fired: list[tuple[str, str | None, str | None]] = []
    events: tuple[HookPoint, ...] = ("SessionEnd", "Stop", "UserPromptSubmit", "SessionStart")
    hooks = [
        HookMatcher(event, lambda ctx, event=event: fired.append((event, ctx.run_id, ctx.reason)))
        for event in events
    ]
    agent = Agent(ScriptedModel(["a", "b"]), working_dir=tmp_path, hooks=hooks)
    first = await agent.run_async("one")
    second = await agent.run_async("two")
    # As in deputy: SessionStart as each run starts, SessionEnd as each ends, after Stop.
    order = ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"]
    assert [name for name, _, _ in fired] == order + order
    assert {run_id for _, run_id, _ in fired[:4]} == {first.run_id}
    assert {run_id for _, run_id, _ in fired[4:]} == {second.run_id}
    assert [reason for name, _, reason in fired if name in ("Stop", "SessionEnd")] == [
        "complete"
    ] * 4
    # Each run records its own hook events, ending with SessionEnd before usage and stop.
    assert [e.hook_event for e in of_type(agent, "hook")] == order
    assert [e.type for e in second.events][-4:] == ["hook", "hook", "usage", "stop"]


async def test_session_end_fires_when_a_run_stops_early(tmp_path: Path) -> None:
    fired: list[tuple[str, str | None]] = []
    hooks = [
        HookMatcher(event, lambda ctx, event=event: fired.append((event, ctx.reason)))
        for event in ("SessionStart", "Stop", "SessionEnd")
    ]
    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        hooks=hooks,
        permissions=Permissions(
            can_use_tool=lambda n, a, c: PermissionResultDeny("halt", interrupt=True)
        ),
    )
    result = await agent.run_async("one")
    assert result.stop_reason == "interrupted"
    await agent.run_async("two")
    assert fired == [
        ("SessionStart", None),
        ("Stop", result.stop_reason),
        ("SessionEnd", result.stop_reason),
        ("SessionStart", None),
        ("Stop", "complete"),
        ("SessionEnd", "complete"),
    ]


async def test_can_use_tool_error_denies_in_a_run(tmp_path: Path) -> None:
    def broken(name: str, args: dict, ctx: Any) -> Any:
        raise KeyError("boom")

    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=Permissions(can_use_tool=broken),
    )
    result = await agent.run_async("go")
    assert result.stop_reason == "complete"
    assert not (tmp_path / "a.txt").exists()
    assert "permission callback failed" in tool_ends(agent)[0].output


async def test_parallel_calls_each_get_their_own_decision(tmp_path: Path) -> None:
    reply = ScriptedReply(
        tool_calls=[
            ScriptedToolCall("write_file", {"path": "ok.txt", "content": "1"}, id="a"),
            ScriptedToolCall("write_file", {"path": "../no.txt", "content": "2"}, id="b"),
        ]
    )
    agent = Agent(ScriptedModel([reply, "ok"]), tools=[tool_write_file()], working_dir=tmp_path)
    await agent.run_async("go")
    ends = {e.call_id: e for e in tool_ends(agent)}
    assert not ends["a"].is_error and ends["b"].is_error
    assert [p.name for p in tmp_path.iterdir()] == ["ok.txt"]
    await wait_until(lambda: True)


async def test_hooks_receive_the_context_of_their_event(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def record(*args: Any) -> None:
        context = args[0] if len(args) == 1 else args[2]
        seen[context.event] = context

    events: tuple[HookPoint, ...] = (
        "UserPromptSubmit",
        "Stop",
        "PermissionRequest",
        "PreToolUse",
        "PostToolUseFailure",
    )
    bump, _calls = counter_tool()

    def broken(note: str = "") -> str:
        """Always fails (read-only, closed-world)."""
        raise RuntimeError("kaput")

    failing = tool(broken, annotations=tool_annotations(read_only_hint=True, open_world_hint=False))
    reply = ScriptedReply(
        tool_calls=[
            ScriptedToolCall("bump", {}, id="c-bump"),
            ScriptedToolCall("broken", {}, id="c-broken"),
        ]
    )
    agent = Agent(
        ScriptedModel([reply, "ok"]),
        tools=[bump, failing],
        working_dir=tmp_path,
        hooks=[HookMatcher(event, record) for event in events],
        run_context={"user_id": "u1"},
    )
    await agent.run_async("please bump")
    assert seen["UserPromptSubmit"].prompt == "please bump"
    assert seen["UserPromptSubmit"].run_context == {"user_id": "u1"}
    assert seen["Stop"].reason == "complete"
    assert seen["PermissionRequest"].call_id == "c-bump"
    assert "tool_allowlist" in seen["PermissionRequest"].permission_reason
    assert seen["PostToolUseFailure"].call_id == "c-broken"
    assert "kaput" in seen["PostToolUseFailure"].error
    assert seen["PreToolUse"].session_id == agent.session_id


# ---------------------------------------------------------------- tool gating (allowlist)


async def test_allowlist_denies_every_other_tool_hard_in_a_run(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    asked: list[Any] = []
    bump, calls = counter_tool()
    lifted: list[str] = []

    def answer(questions: list[Any], context: Any) -> list[str]:
        asked.append(questions)
        return ["x"]

    def lift(name: str, args: dict, ctx: Any) -> PermissionResultAllow:
        lifted.append(name)
        return PermissionResultAllow()

    reply = ScriptedReply(
        tool_calls=[
            ScriptedToolCall("ask_user", ASK_ARGS, id="c-ask"),
            ScriptedToolCall("read_file", {"path": "notes.txt"}, id="c-read"),
            ScriptedToolCall("bump", {}, id="c-bump"),
        ]
    )
    model = ScriptedModel([reply, "done"])
    agent = Agent(
        model,
        tools=[
            tool_ask_user(callback=answer),
            tool_read_file(),
            bump,
        ],
        working_dir=tmp_path,
        # full mode would allow all three; the allowlist still gates them.
        permissions=permissions_full().model_copy(update={"tool_allowlist": ("READ_FILE",)}),
        hooks=[HookMatcher("PermissionRequest", lift)],
    )
    result = await agent.run_async("go")
    assert result.stop_reason == "complete"
    assert asked == [] and calls == [] and lifted == []  # a hard deny: no hook may lift it
    decisions = {e.call_id: (e.decision, e.step) for e in of_type(agent, "permission")}
    assert decisions == {
        "c-ask": ("deny", "allowlist"),
        "c-read": ("allow", "allowed"),
        "c-bump": ("deny", "allowlist"),
    }
    ends = {e.call_id: e for e in tool_ends(agent)}
    assert "hello" in ends["c-read"].output and not ends["c-read"].is_error
    assert ends["c-ask"].is_error and "not on the tool allowlist" in ends["c-ask"].output
    sent = {
        m["tool_call_id"]: m["content"]
        for m in model.requests[1]["messages"]
        if m["role"] == "tool"
    }
    assert sent["c-ask"].startswith("Denied: ") and sent["c-bump"].startswith("Denied: ")
    assert_consistent(agent)


# ---------------------------------------------------------------- readonly mode and the web


async def public_resolver(host: str, port: int) -> list[str]:
    """example.com as a public address, without DNS (tests never reach the network)."""
    return ["93.184.215.14"]


@pytest.mark.parametrize("web", [True, False])
async def test_readonly_mode_allows_the_builtin_web_tools_only_with_web(
    tmp_path: Path, web: bool
) -> None:
    import httpx

    searched: list[str] = []
    fetched: list[str] = []

    def backend(query: str, max_results: int) -> list[dict[str, str]]:
        searched.append(query)
        return [{"title": "Deputy", "url": "https://example.com/d", "snippet": "agents"}]

    def serve(request: httpx.Request) -> httpx.Response:
        fetched.append(str(request.url))
        return httpx.Response(200, text="plain page", headers={"content-type": "text/plain"})

    reply = ScriptedReply(
        tool_calls=[
            ScriptedToolCall("web_search", {"query": "deputy"}, id="c-search"),
            ScriptedToolCall("web_fetch", {"url": "https://example.com/d"}, id="c-fetch"),
        ]
    )
    agent = Agent(
        ScriptedModel([reply, "ok"]),
        tools=[
            tool_web_search(backend=backend),
            tool_web_fetch(transport=httpx.MockTransport(serve), resolver=public_resolver),
        ],
        working_dir=tmp_path,
        permissions=permissions_readonly().model_copy(update={"web": web}),
    )
    await agent.run_async("look it up")
    decisions = [(e.tool_name, e.decision) for e in of_type(agent, "permission")]
    expected = "allow" if web else "deny"
    assert decisions == [("web_search", expected), ("web_fetch", expected)]
    ends = {e.call_id: e for e in tool_ends(agent)}
    if web:
        assert searched == ["deputy"] and fetched == ["https://example.com/d"]
        assert "Deputy" in ends["c-search"].output and "plain page" in ends["c-fetch"].output
    else:
        assert searched == [] and fetched == []
        assert all("needs web=True" in e.output for e in ends.values())


# ---------------------------------------------------------------- PermissionResultDeny(interrupt)


@pytest.mark.parametrize("tool_mode", ["sequential", "concurrent"])
async def test_deny_with_interrupt_ends_the_run_after_the_call(
    tmp_path: Path, tool_mode: Literal["sequential", "concurrent"]
) -> None:
    bump, calls = counter_tool()

    def policy(name: str, args: dict, ctx: Any) -> Any:
        if args.get("note") == "stop":
            return PermissionResultDeny("Production is frozen", interrupt=True)
        return PermissionResultAllow()

    reply = ScriptedReply(
        tool_calls=[
            ScriptedToolCall("bump", {"note": "before"}, id="c1"),
            ScriptedToolCall("bump", {"note": "stop"}, id="c2"),
            ScriptedToolCall("bump", {"note": "after"}, id="c3"),
        ]
    )
    model = ScriptedModel([reply, "never sent"])
    agent = Agent(
        model,
        tools=[bump],
        working_dir=tmp_path,
        permissions=permissions_full().model_copy(update={"can_use_tool": policy}),
    )
    result = await agent.run_async("go", tool_mode=tool_mode)
    assert result.stop_reason == "interrupted"
    assert result.stop_message == "Production is frozen"
    stop = of_type(agent, "stop")[-1]
    assert (stop.stop_reason, stop.message) == ("interrupted", "Production is frozen")
    assert len(model.requests) == 1  # the model gets no further request
    assert calls == ["before"]  # the call before it ran; the one after did not
    denied = next(e for e in of_type(agent, "permission") if e.call_id == "c2")
    assert (denied.decision, denied.step) == ("deny", "can_use_tool")
    # The denied call still gets its error result, so the turn stays consistent.
    results = {r.call_id: r for r in agent.get_turns()[-1].tool_results}
    assert set(results) == {"c1", "c2", "c3"}
    assert results["c2"].is_error and results["c2"].output == "Denied: Production is frozen"
    assert results["c3"].is_error and not results["c1"].is_error
    assert_consistent(agent)


async def test_deny_without_interrupt_lets_the_run_go_on(tmp_path: Path) -> None:
    model = ScriptedModel([write("a.txt"), "ok"])
    agent = Agent(
        model,
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=Permissions(can_use_tool=lambda n, a, c: PermissionResultDeny("not now")),
    )
    result = await agent.run_async("go")
    assert (result.stop_reason, result.response) == ("complete", "ok")
    assert len(model.requests) == 2
    assert model.requests[1]["messages"][-1]["content"] == "Denied: not now"


async def test_interrupting_deny_of_edited_input_ends_the_run(tmp_path: Path) -> None:
    def policy(name: str, args: dict, ctx: Any) -> Any:
        if args["path"] == "prod.txt":
            return PermissionResultDeny("Never touch prod", interrupt=True)
        return PermissionResultAllow()

    async def handler(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.approve(updated_input={"path": "prod.txt", "content": "x"})

    model = ScriptedModel([write("a.txt"), "never sent"])
    agent = Agent(
        model,
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=asking().model_copy(update={"can_use_tool": policy}),
        approval_handler=handler,
    )
    result = await agent.run_async("go")
    assert (result.stop_reason, result.stop_message) == ("interrupted", "Never touch prod")
    assert len(model.requests) == 1
    assert list(tmp_path.iterdir()) == []
    assert_consistent(agent)


# ---------------------------------------------------------------- hook timeouts


async def test_hooks_default_to_a_30_second_timeout_in_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import deputy_shiny.hooks._registry as hooks_module

    waited: list[float | None] = []
    real_timeout = hooks_module.timeout

    def recording_timeout(seconds: float | None) -> Any:
        waited.append(seconds)
        return real_timeout(seconds)

    monkeypatch.setattr(hooks_module, "timeout", recording_timeout)
    default = HookMatcher("PreToolUse", lambda name, args, ctx: None)
    forever = HookMatcher("Stop", lambda ctx: None, timeout=None)
    assert default.timeout == 30.0 and forever.timeout is None
    agent = Agent(
        ScriptedModel([write("a.txt"), "ok"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        hooks=[default, forever],
    )
    await agent.run_async("go")
    assert (tmp_path / "a.txt").exists()
    assert waited == [30.0, None]  # the PreToolUse hook; the Stop hook waits forever


ASK_ARGS = {
    "questions": [
        {
            "header": "Pick",
            "question": "Which?",
            "options": [{"label": "a", "description": "A"}, {"label": "b", "description": "B"}],
            "multi_select": False,
        }
    ]
}
