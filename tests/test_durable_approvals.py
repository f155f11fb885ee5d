"""Durable approvals: a call saved to wait for a person, decided later, exactly once.

Every scenario runs the real engine through litellm with a ScriptedModel or
FunctionModel; "a new process" is a fresh Agent with the same ids, dirs and tools.
The crash cases (a child process killed at each stage) are in test_approval_crash.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from deputy_shiny import (
    Agent,
    ApprovalContinuation,
    ApprovalDecision,
    ApprovalResumeError,
    ConfigurationError,
    approval_read,
    tool,
    tool_annotations,
)
from deputy_shiny.errors import ApprovalDecidedError, ApprovalMismatchError, PersistenceCorruptError
from deputy_shiny.permissions import PermissionResultAllow, PermissionResultDeny, Permissions
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.usage import UsageLimits

from .helpers import assert_consistent

LOCAL = tool_annotations(open_world_hint=False)


class Log:
    """What the tools did, in order (a double execution shows as a repeated line)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def tools(self) -> list[Any]:
        def step(name: str) -> str:
            "Do one named step."
            self.lines.append(name)
            return f"did {name}"

        def send(to: str) -> str:
            "Send a message."
            self.lines.append(f"send:{to}")
            return f"sent to {to}"

        return [tool(step, annotations=LOCAL), tool(send, annotations=LOCAL)]


def _permissions(**extra: Any) -> Permissions:
    return Permissions(tool_allowlist=("step", "send"), approval_tools=("send",), **extra)


def _agent(
    tmp_path: Path, model: Any, log: Log, *, agent_id: str = "agent-1", **extra: Any
) -> Agent:
    approvals = tmp_path / "approvals"
    approvals.mkdir(exist_ok=True)
    extra.setdefault("permissions", _permissions())
    return Agent(
        model,
        tools=log.tools(),
        working_dir=tmp_path,
        approval_dir=approvals,
        agent_id=agent_id,
        session_id="session-1",
        **extra,
    )


def _call(tool_name: str, call_id: str, /, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(tool_name, arguments, id=call_id)


def _pause(tmp_path: Path, log: Log, replies: list[Any], **extra: Any) -> tuple[Agent, str]:
    model = ScriptedModel(replies)
    agent = _agent(tmp_path, model, log, **extra)
    result = agent.run_sync("Send the report")
    assert result.stop_reason == "approval_pending"
    [event] = [e for e in result.events if e.type == "approval"]
    assert event.status == "pending_durable" and event.path
    return agent, event.path


def _tool_messages(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["tool_call_id"], m["content"]) for m in request["messages"] if m["role"] == "tool"]


# ------------------------------------------------------------------ the main path


def test_a_paused_call_is_saved_then_approved_and_run_once(tmp_path: Path) -> None:
    log = Log()
    agent, path = _pause(
        tmp_path,
        log,
        [ScriptedReply(tool_calls=[_call("send", "c1", to="ops")]), "Sent it."],
    )
    assert log.lines == []
    assert Path(path).parent == tmp_path / "approvals"
    assert len(Path(path).name.split(".")[0]) >= 32  # an unguessable name
    pending = agent.pending_approval()
    assert isinstance(pending, ApprovalContinuation)
    assert pending.status == "pending" and pending.source.path == path
    assert pending.request.tool_name == "send" and pending.request.arguments == {"to": "ops"}
    assert (pending.source.agent_id, pending.source.session_id) == ("agent-1", "session-1")
    assert set(pending.tools) == {"send", "step"} and pending.usage.requests == 1
    assert_consistent(agent)  # the live conversation stays answerable meanwhile

    result = agent.resume_approval(path, "approve")

    assert result.response == "Sent it." and result.stop_reason == "complete"
    assert log.lines == ["send:ops"]
    assert result.usage.requests == 2  # the work before the pause counts
    assert agent.usage().requests == 2  # ... and is counted once for the agent
    record = approval_read(path)
    assert record.status == "completed" and record.decision == ApprovalDecision.approve()
    assert [e["event"] for e in record.effects] == ["decided", "executing", "executed", "completed"]
    assert agent.pending_approval() is None
    assert_consistent(agent)
    with pytest.raises(ApprovalDecidedError) as refused:
        agent.resume_approval(path, "approve")
    assert refused.value.status == "completed"
    assert log.lines == ["send:ops"]


def test_a_batch_paused_on_its_middle_call(tmp_path: Path) -> None:
    """a/b/c pausing on b: a ran before the pause, c is "Not executed", ids kept."""
    log = Log()
    replies: list[Any] = [
        ScriptedReply(
            tool_calls=[
                _call("step", "call_a", name="a"),
                _call("send", "call_b", to="ops"),
                _call("step", "call_c", name="c"),
            ]
        ),
        "Done.",
    ]
    model = ScriptedModel(replies)
    agent = _agent(tmp_path, model, log)
    result = agent.run_sync("Do it")
    assert result.stop_reason == "approval_pending"
    assert log.lines == ["a"]  # a ran (one call at a time), b waits, c never ran
    types = [(e.type, getattr(e, "call_id", None)) for e in result.events]
    assert types.index(("tool_end", "call_a")) < types.index(("permission", "call_b"))
    path = agent.pending_approval().source.path

    agent.resume_approval(path, "approve")

    assert log.lines == ["a", "send:ops"]
    answers = _tool_messages(model.requests[-1])
    assert [call_id for call_id, _ in answers] == ["call_a", "call_b", "call_c"]
    assert answers[0][1] == "did a" and answers[1][1] == "sent to ops"
    assert "Not executed" in answers[2][1]


def test_a_denial_is_told_to_the_model(tmp_path: Path) -> None:
    log = Log()
    seen: list[list[tuple[str, str]]] = []

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if not any(m["role"] == "tool" for m in messages):
            return ScriptedReply(tool_calls=[_call("send", "c1", to="ops")])
        seen.append(_tool_messages({"messages": messages}))
        return "Understood, not sending."

    agent = _agent(tmp_path, FunctionModel(reply), log)
    assert agent.run_sync("Send").stop_reason == "approval_pending"
    path = agent.pending_approval().source.path

    result = agent.resume_approval(path, ApprovalDecision.deny("not today"))

    assert result.response == "Understood, not sending." and log.lines == []
    assert seen[-1][0][0] == "c1" and "Denied by the user: not today" in seen[-1][0][1]
    assert approval_read(path).status == "completed"


def test_a_new_process_resumes_with_the_same_ids_dirs_and_tools(tmp_path: Path) -> None:
    log = Log()
    _, path = _pause(
        tmp_path, log, [ScriptedReply(tool_calls=[_call("send", "c1", to="ops")]), "x"]
    )
    model = ScriptedModel(["Sent, after the restart."])
    fresh = _agent(tmp_path, model, log)  # the restarted process: same ids, dirs, tools
    assert fresh.pending_approval().source.path == path

    result = fresh.resume_approval(path, "approve")

    assert result.response == "Sent, after the restart." and log.lines == ["send:ops"]
    assert result.usage.requests == 2 and fresh.usage().requests == 2
    assert [t.role for t in fresh.get_turns()] == ["user", "assistant", "user", "assistant"]
    assert _tool_messages(model.requests[0]) == [("c1", "sent to ops")]


# ------------------------------------------------------------------ refusals


def test_another_agent_id_dir_or_tool_definition_is_refused_and_decides_nothing(
    tmp_path: Path,
) -> None:
    log = Log()
    _, path = _pause(tmp_path, log, [ScriptedReply(tool_calls=[_call("send", "c1", to="x")])])
    other = _agent(tmp_path, ScriptedModel([]), log, agent_id="agent-2")
    with pytest.raises(ApprovalMismatchError, match="belongs to agent 'agent-1'"):
        other.resume_approval(path, "approve")

    def send(to: str, cc: str = "") -> str:
        "Send a message."
        return "sent"

    changed = _agent(tmp_path, ScriptedModel([]), log)
    changed.register_tool(tool(send, annotations=LOCAL), replace=True)
    with pytest.raises(ApprovalMismatchError, match=r"tool definitions differ \(send\)"):
        changed.resume_approval(path, "approve")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = Agent(
        ScriptedModel([]),
        tools=log.tools(),
        working_dir=tmp_path,
        approval_dir=elsewhere,
        agent_id="agent-1",
        session_id="session-1",
        permissions=_permissions(),
    )
    with pytest.raises(ApprovalResumeError, match="not in this agent's approval_dir"):
        moved.resume_approval(path, "approve")
    no_dir = Agent(ScriptedModel([]), agent_id="agent-1", session_id="session-1")
    with pytest.raises(ApprovalResumeError, match="no approval_dir"):
        no_dir.resume_approval(path, "approve")

    assert approval_read(path).status == "pending"  # still the right agent's to decide
    right = _agent(tmp_path, ScriptedModel(["ok"]), log)
    assert right.resume_approval(path, "approve").response == "ok"
    assert log.lines == ["send:x"]


def test_a_tampered_record_is_refused(tmp_path: Path) -> None:
    log = Log()
    agent, path = _pause(tmp_path, log, [ScriptedReply(tool_calls=[_call("send", "c1", to="x")])])
    text = Path(path).read_text()
    Path(path).write_text(text.replace('"to": "x"', '"to": "attacker"'))
    turns = agent.get_turns()
    with pytest.raises(PersistenceCorruptError, match="not authentic"):
        approval_read(path)
    with pytest.raises(PersistenceCorruptError, match="not authentic"):
        agent.resume_approval(path, "approve")
    assert log.lines == [] and agent.get_turns() == turns


def test_a_record_with_a_valid_hmac_is_still_checked_field_by_field(tmp_path: Path) -> None:
    """Written with the server's key (a bug, or a key holder): every field is still checked."""
    from deputy_shiny.persistence import read_document, write_document

    log = Log()
    _, path = _pause(tmp_path, log, [ScriptedReply(tool_calls=[_call("send", "c1", to="x")])])
    payload = read_document(path, "approval")
    payload["status"] = "approved-by-me"
    write_document(path, "approval", payload)
    with pytest.raises(PersistenceCorruptError, match="not a valid approval record"):
        approval_read(path)


def test_edited_input_is_checked_by_the_whole_policy(tmp_path: Path) -> None:
    def no_evil(tool_name: str, tool_input: dict[str, Any], context: Any) -> Any:
        if tool_input.get("to") == "evil":
            return PermissionResultDeny("not to evil")
        return PermissionResultAllow()

    log = Log()
    seen: list[list[tuple[str, str]]] = []

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if not any(m["role"] == "tool" for m in messages):
            return ScriptedReply(tool_calls=[_call("send", "c1", to="ops")])
        seen.append(_tool_messages({"messages": messages}))
        return "ok"

    agent = _agent(
        tmp_path, FunctionModel(reply), log, permissions=_permissions(can_use_tool=no_evil)
    )
    agent.run_sync("Send")
    path = agent.pending_approval().source.path
    agent.resume_approval(path, "approve", tool_input={"to": "evil"})
    assert log.lines == []
    assert "The edited input was refused: not to evil" in seen[-1][0][1]

    with pytest.raises(ApprovalResumeError, match="only allowed with an approval"):
        agent.resume_approval(path, "deny", tool_input={"to": "x"})


def test_the_agents_current_permissions_apply_on_resume(tmp_path: Path) -> None:
    log = Log()
    agent, path = _pause(
        tmp_path, log, [ScriptedReply(tool_calls=[_call("send", "c1", to="ops")]), "ok"]
    )
    agent.set_permission_mode("readonly")  # narrowed while the approval waited
    agent.resume_approval(path, "approve")
    assert log.lines == []
    assert "The call is now refused" in agent.get_turns()[-2].contents[0].output


def test_the_saved_permission_ceiling_applies_on_resume(tmp_path: Path) -> None:
    """Saved with a denylist; resumed by an agent without it: the denylist still holds."""
    log = Log()
    _, path = _pause(
        tmp_path,
        log,
        [ScriptedReply(tool_calls=[_call("send", "c1", to="ops")])],
        permissions=_permissions(tool_denylist=("step",)),
    )
    model = ScriptedModel([ScriptedReply(tool_calls=[_call("step", "c2", name="late")]), "end"])
    wider = _agent(tmp_path, model, log)  # no denylist now
    result = wider.resume_approval(path, "approve")
    assert log.lines == ["send:ops"]  # the approved call ran; "step" stayed denied
    [denied] = [e for e in result.events if e.type == "tool_end" and e.call_id == "c2"]
    assert denied.is_error and "saved approval" in denied.output


def test_a_callback_saved_with_the_approval_must_be_there_on_resume(tmp_path: Path) -> None:
    log = Log()
    _, path = _pause(
        tmp_path,
        log,
        [ScriptedReply(tool_calls=[_call("send", "c1", to="ops")])],
        permissions=_permissions(can_use_tool=lambda *a: PermissionResultAllow()),
    )
    bare = _agent(tmp_path, ScriptedModel([]), log)
    with pytest.raises(ApprovalMismatchError, match="can_use_tool"):
        bare.resume_approval(path, "approve")


def test_usage_before_the_pause_counts_toward_the_limits(tmp_path: Path) -> None:
    log = Log()
    step = ScriptedReply(tool_calls=[_call("step", "s", name="more")])
    agent, path = _pause(
        tmp_path,
        log,
        [ScriptedReply(tool_calls=[_call("send", "c1", to="ops")]), step, step, "end"],
        usage_limits=UsageLimits(max_requests=3),
    )
    result = agent.resume_approval(path, "approve")
    # 1 request before the pause + 2 after = the limit of 3.
    assert result.stop_reason == "request_limit" and result.usage.requests == 3
    assert approval_read(path).status == "stopped"
    # A looser per-resume limit is clamped to the saved one.
    agent2, path2 = _pause(
        tmp_path,
        log,
        [ScriptedReply(tool_calls=[_call("send", "c1", to="x")]), step, "end"],
        usage_limits=UsageLimits(max_requests=2),
        agent_id="agent-3",
    )
    limited = agent2.resume_approval(path2, "approve", usage_limits=UsageLimits(max_requests=50))
    assert limited.stop_reason == "request_limit" and limited.usage.requests == 2


def test_a_conversation_that_moved_on_is_not_overwritten(tmp_path: Path) -> None:
    log = Log()
    agent, path = _pause(
        tmp_path,
        log,
        [ScriptedReply(tool_calls=[_call("send", "c1", to="ops")]), "chatting on"],
    )
    agent.run_sync("Never mind, something else")
    with pytest.raises(ApprovalMismatchError, match="moved on"):
        agent.resume_approval(path, "approve")
    assert approval_read(path).status == "pending"


# ------------------------------------------------------------------ JSON-only tools


class Point(BaseModel):
    x: int


def test_tools_that_wait_must_take_json_only_arguments(tmp_path: Path) -> None:
    def place(point: Point) -> str:
        "Place a point."
        return "placed"

    model = ScriptedModel([ScriptedReply(tool_calls=[_call("place", "c1", point={"x": 1})]), "no"])
    (tmp_path / "approvals").mkdir()
    agent = Agent(
        model,
        tools=[tool(place, annotations=LOCAL)],
        working_dir=tmp_path,
        approval_dir=tmp_path / "approvals",
        permissions=Permissions(tool_allowlist=("place",), approval_tools=("place",)),
    )
    result = agent.run_sync("Place it")
    assert result.stop_reason == "complete"
    [end] = [e for e in result.events if e.type == "tool_end"]
    assert "JSON-only arguments" in end.output and "is a Point" in end.output
    assert list((tmp_path / "approvals").iterdir()) == []


def test_approval_dir_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="approval_dir"):
        Agent(ScriptedModel([]), approval_dir=tmp_path / "missing")


def test_a_live_handler_still_comes_first(tmp_path: Path) -> None:
    log = Log()

    async def approve(request: Any) -> ApprovalDecision:
        return ApprovalDecision.approve()

    model = ScriptedModel([ScriptedReply(tool_calls=[_call("send", "c1", to="ops")]), "ok"])
    agent = _agent(tmp_path, model, log, approval_handler=approve)
    assert agent.run_sync("Send").stop_reason == "complete"
    assert log.lines == ["send:ops"] and agent.pending_approval() is None


def test_the_record_is_plain_json_with_the_request_and_conversation(tmp_path: Path) -> None:
    log = Log()
    _, path = _pause(tmp_path, log, [ScriptedReply(tool_calls=[_call("send", "c1", to="ops")])])
    document = json.loads(Path(path).read_text())
    assert document["deputy_shiny"] == "approval" and document["hmac"].startswith("sha256:")
    assert "checksum" not in document  # a plain checksum anyone could recompute
    payload = document["payload"]
    assert payload["status"] == "pending"
    assert payload["request"]["call_id"] == "c1" and len(payload["request"]["request_id"]) > 30
    assert [t["role"] for t in payload["turns"]] == ["user", "assistant"]
    assert payload["permissions"]["settings"]["approval_tools"] == ["send"]
    assert Path(path).stat().st_mode & 0o777 == 0o600


# ------------------------------------------------------------------ stopping while resuming


def test_an_interrupt_while_the_tool_runs_leaves_it_indeterminate(tmp_path: Path) -> None:
    import asyncio

    started = asyncio.Event()
    runs: list[str] = []

    async def deploy(target: str) -> str:
        "Deploy somewhere."
        runs.append(target)
        started.set()
        await asyncio.sleep(30)
        return "deployed"

    (tmp_path / "approvals").mkdir()
    model = ScriptedModel([ScriptedReply(tool_calls=[_call("deploy", "c1", target="prod")])])
    agent = Agent(
        model,
        tools=[tool(deploy, annotations=LOCAL)],
        working_dir=tmp_path,
        approval_dir=tmp_path / "approvals",
        permissions=Permissions(tool_allowlist=("deploy",), approval_tools=("deploy",)),
    )

    async def main() -> Any:
        assert (await agent.run_async("Deploy")).stop_reason == "approval_pending"
        path = agent.pending_approval().source.path
        task = asyncio.ensure_future(agent.resume_approval_async(path, "approve"))
        await started.wait()
        agent.interrupt()
        result = await task
        return path, result

    path, result = asyncio.run(main())
    assert result.stop_reason == "interrupted" and runs == ["prod"]
    record = approval_read(path)
    assert record.status == "indeterminate"
    with pytest.raises(ApprovalDecidedError):
        agent.resume_approval(path, "approve")
    assert runs == ["prod"]


def test_stop_run_on_resume_denies_and_ends_the_run(tmp_path: Path) -> None:
    log = Log()
    agent, path = _pause(
        tmp_path, log, [ScriptedReply(tool_calls=[_call("send", "c1", to="ops")]), "never"]
    )
    result = agent.resume_approval(path, ApprovalDecision.stop_run("enough"))
    assert result.stop_reason == "interrupted" and log.lines == []
    assert approval_read(path).status == "stopped"
    assert_consistent(agent)
