"""Saved sessions: round trips, what is never saved, and damaged or conflicting files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import (
    Agent,
    ContextPolicy,
    DeputyError,
    HookMatcher,
    PersistenceError,
    permissions_full,
    permissions_plan,
)
from deputy_shiny.errors import AgentBusyError, PersistenceCorruptError, SessionError
from deputy_shiny.persistence.files import record_mac
from deputy_shiny.persistence.sessions import (
    SessionSection,
    register_session_section,
    session_sections,
)
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

from .helpers import local_tool


def big_output(n: int = 0) -> str:
    """Return a large result."""
    return "".join(f"line {i} of result {n}\n" for i in range(8000))


def snapshot(agent: Agent) -> dict[str, Any]:
    """Everything a load may change."""
    return {
        "turns": agent.get_turns(),
        "context": agent.get_context_turns(include_system_prompt=True),
        "prompt": agent.get_system_prompt(),
        "summary": agent._conversation.summary,
        "usage": agent.usage(),
        "run_context": agent.run_context,
        "compaction": agent.last_compaction(),
    }


async def rich_agent(tmp_path: Path, **kwargs: Any) -> Agent:
    """An agent whose conversation has an offloaded result, a compaction and a cleared
    result."""
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ScriptedToolCall("big_output", {"n": 1})]),
            "Read the big result.",
            ScriptedReply(tool_calls=[ScriptedToolCall("big_output", {"n": 2})]),
            "Again.",
            "A third answer.",
        ]
    )
    agent = Agent(
        model,
        tools=[local_tool(big_output)],
        system_prompt="Be brief.",
        run_context={"user_id": "u1", "team": "blue"},
        context_policy=ContextPolicy(offload_dir=tmp_path / "offload", max_tokens=None),
        **kwargs,
    )
    await agent.run_async("Fetch one")
    await agent.run_async("Fetch two")
    await agent.run_async("Third")
    await agent.compact_async(keep_last=6, summary="We fetched two results.")
    assert agent.microcompact(keep_last=2) == 1
    return agent


async def test_a_session_round_trips_the_whole_conversation(tmp_path: Path) -> None:
    agent = await rich_agent(tmp_path)
    path = agent.save_session(tmp_path / "session.json")
    before = snapshot(agent)

    other_dir = tmp_path / "elsewhere"
    loaded = Agent(
        ScriptedModel([]),
        context_policy=ContextPolicy(offload_dir=other_dir, max_tokens=None),
        run_context={"user_id": "u1"},
    ).load_session(path)
    after = snapshot(loaded)
    assert after == {**before, "run_context": {"user_id": "u1", "team": "blue"}}
    assert len(loaded.get_turns()) > len(loaded.get_context_turns()) - 1
    # Offloaded results come back under the new agent's session and offload_dir.
    reference = next(
        r.output for t in loaded.get_turns() for r in t.tool_results if "deputy://" in r.output
    )
    assert loaded.resolve_tool_result(reference) == big_output(1)
    assert len(list((other_dir / "records" / "tool_result").iterdir())) == 2
    # Without an offload_dir they are kept in memory, and saved again from there.
    memory = Agent(ScriptedModel([]), context_policy=ContextPolicy(max_tokens=None))
    memory.load_session(path)
    assert memory.resolve_tool_result(reference) == big_output(1)
    memory.save_session(tmp_path / "again.json")
    again = Agent(ScriptedModel([])).load_session(tmp_path / "again.json")
    assert snapshot(again)["turns"] == before["turns"]
    assert again.resolve_tool_result(reference) == big_output(1)


async def test_the_file_holds_no_tools_permissions_hooks_or_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-key-123")
    agent = await rich_agent(
        tmp_path,
        permissions=permissions_full(),
        hooks=[HookMatcher("Stop", lambda context: None)],
    )
    path = agent.save_session(tmp_path / "session.json")
    text = path.read_text()
    document = json.loads(text)
    payload = document["payload"]
    assert document["deputy_shiny"] == "session" and document["version"] == 1
    assert set(payload) == {"metadata", "sections"}
    # Of the permissions, only the mode's name (restored only as a narrowing).
    sections = payload["sections"]
    assert set(sections) == {"conversation", "run_context", "tool_results", "permission_mode"}
    assert sections["permission_mode"] == "full"
    metadata = payload["metadata"]
    assert {"saved_at", "deputy_shiny_version", "provider", "model"} <= set(metadata)
    for word in ("sk-very-secret", "permissions", "hooks", "run_bash", "tool_schemas", "Stop"):
        assert word not in text
    assert '"big_output"' in text  # only as the name on a tool call and its result
    assert (path.stat().st_mode & 0o777) == 0o600


async def test_damaged_files_raise_and_leave_the_agent_as_it_was(tmp_path: Path) -> None:
    source = await rich_agent(tmp_path)
    path = source.save_session(tmp_path / "session.json")
    good = path.read_bytes()
    target = Agent(
        ScriptedModel([]), system_prompt="Mine.", run_context={"user_id": "u1"}
    ).add_turn("Hello", "Hi")
    before = snapshot(target)

    def resign(edit: Any) -> bytes:
        """An edit signed with the server's key (a key holder, or a bug): every section
        is still checked."""
        document = json.loads(good)
        edit(document["payload"])
        document["hmac"] = record_mac("session", 1, document["payload"])
        return json.dumps(document).encode()

    def bad_turn(payload: dict[str, Any]) -> None:
        payload["sections"]["conversation"]["turns"][0]["role"] = "wizard"

    def unknown_section(payload: dict[str, Any]) -> None:
        payload["sections"]["approvals"] = {}

    def secret_context(payload: dict[str, Any]) -> None:
        payload["sections"]["run_context"]["api_key"] = "sk-x"

    def bad_start(payload: dict[str, Any]) -> None:
        payload["sections"]["conversation"]["context_start"] = 10_000

    def forged_result(payload: dict[str, Any]) -> None:
        results = payload["sections"]["tool_results"]
        results["../../etc/passwd"] = next(iter(results.values()))

    def no_conversation(payload: dict[str, Any]) -> None:
        del payload["sections"]["conversation"]

    cases = {
        "truncated": good[: len(good) // 2],
        "flipped": good.replace(b"Fetch one", b"Fetch ONE"),
        "empty": b"",
        "not json": b"\x00\xff garbage",
        "other kind": good.replace(b'"deputy_shiny": "session"', b'"deputy_shiny": "note"'),
        "bad turn": resign(bad_turn),
        "unknown section": resign(unknown_section),
        "secret in run_context": resign(secret_context),
        "context_start out of range": resign(bad_start),
        "forged tool result id": resign(forged_result),
        "no conversation": resign(no_conversation),
    }
    for name, data in cases.items():
        broken = tmp_path / f"broken-{name.replace(' ', '_')}.json"
        broken.write_bytes(data)
        with pytest.raises(PersistenceCorruptError):
            target.load_session(broken)
        assert snapshot(target) == before, name
    with pytest.raises(PersistenceError):
        target.load_session(tmp_path / "missing.json")
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(PersistenceCorruptError):
        target.load_session(link)
    assert snapshot(target) == before


async def test_conflicting_run_context_ids_are_refused(tmp_path: Path) -> None:
    source = Agent(ScriptedModel([]), run_context={"user_id": "u1", "mood": "calm"})
    path = source.add_turn("Hi", "Hello").save_session(tmp_path / "s.json")
    other = Agent(ScriptedModel([]), run_context={"user_id": "u2"})
    before = snapshot(other)
    with pytest.raises(SessionError, match="user_id"):
        other.load_session(path)
    assert snapshot(other) == before
    merged = Agent(ScriptedModel([]), run_context={"team": "red"}).load_session(path)
    assert merged.run_context == {"team": "red", "user_id": "u1", "mood": "calm"}


async def test_loading_or_saving_during_a_run_is_an_error(tmp_path: Path) -> None:
    path = Agent(ScriptedModel([])).add_turn("Hi", "Hello").save_session(tmp_path / "s.json")
    agent = Agent(ScriptedModel([ScriptedReply(text="a slow reply", delay=0.05)]))
    task = asyncio.ensure_future(agent.run_async("Go"))
    await asyncio.sleep(0.02)
    with pytest.raises(AgentBusyError):
        await agent.load_session_async(path)
    with pytest.raises(AgentBusyError):
        await agent.save_session_async(tmp_path / "t.json")
    await task
    await agent.load_session_async(path)
    assert [t.text for t in agent.get_turns()] == ["Hi", "Hello"]
    saved = await agent.save_session_async(tmp_path / "t.json")
    assert saved.exists()


def test_other_parts_add_sections(tmp_path: Path) -> None:
    store: dict[str, Any] = {}

    def save(agent: Agent) -> Any:
        return {"marks": store.get(agent.agent_id, [])}

    def load(agent: Agent, data: Any) -> Any:
        marks = list(data["marks"])

        def commit() -> None:
            store[agent.agent_id] = marks

        return commit

    section = SessionSection("test_marks", save, load)
    register_session_section(section)
    try:
        with pytest.raises(Exception, match="registered"):
            register_session_section(section)
        source = Agent(ScriptedModel([]))
        store[source.agent_id] = ["a", "b"]
        path = source.save_session(tmp_path / "s.json")
        target = Agent(ScriptedModel([])).load_session(path)
        assert store[target.agent_id] == ["a", "b"]
        assert "test_marks" in [s.name for s in session_sections()]
    finally:
        from deputy_shiny.persistence import sessions

        sessions._SECTIONS.pop("test_marks", None)
    # Without the section registered, such a file is refused.
    with pytest.raises(PersistenceCorruptError, match="test_marks"):
        Agent(ScriptedModel([])).load_session(path)


def test_file_checkpoints_travel_with_the_session(tmp_path: Path) -> None:
    from deputy_shiny import DeputyError, tool_write_file
    from deputy_shiny.permissions import Permissions
    from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

    work = tmp_path / "work"
    work.mkdir()

    def writes(content: str) -> ScriptedReply:
        call = ScriptedToolCall("write_file", {"path": "a.txt", "content": content})
        return ScriptedReply(tool_calls=[call])

    first = Agent(
        ScriptedModel([writes("one"), "ok", writes("two"), "ok"]),
        tools=[tool_write_file()],
        working_dir=work,
        permissions=Permissions(mode="full"),
        enable_file_checkpointing=True,
    )
    first.run_sync("write one")
    first.run_sync("write two")
    checkpoints = first.list_checkpoints()
    assert len(checkpoints) == 2
    path = first.save_session(tmp_path / "s.json")

    second = Agent(
        ScriptedModel([]), working_dir=work, enable_file_checkpointing=True
    ).load_session(path)
    assert [c.id for c in second.list_checkpoints()] == [c.id for c in checkpoints]
    second.rewind_files(checkpoints[1].id)  # back to before "two"
    assert (work / "a.txt").read_text() == "one"

    off = Agent(ScriptedModel([]), working_dir=work)
    with pytest.raises(DeputyError, match="checkpointing off"):
        off.load_session(path)
    assert off.get_turns() == []  # nothing loaded


def test_a_narrowed_permission_mode_comes_back_but_never_widens(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    Agent(ScriptedModel([])).add_turn("hi", "hello").set_permission_mode("readonly").save_session(
        path
    )
    assert Agent(ScriptedModel([])).load_session(path).get_permission_mode() == "readonly"
    # A file that says "full" gives a standard agent nothing: the mode only narrows.
    Agent(ScriptedModel([]), permissions=permissions_full()).add_turn("a", "b").save_session(path)
    assert Agent(ScriptedModel([])).load_session(path).get_permission_mode() == "standard"
    # From full, a saved plan narrows; a mode the agent cannot narrow to is left alone.
    Agent(ScriptedModel([]), permissions=permissions_plan()).add_turn("a", "b").save_session(path)
    full = Agent(ScriptedModel([]), permissions=permissions_full()).load_session(path)
    assert full.get_permission_mode() == "plan"
    assert Agent(ScriptedModel([])).load_session(path).get_permission_mode() == "standard"


def test_an_unknown_saved_permission_mode_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    Agent(ScriptedModel([])).add_turn("hi", "hello").save_session(path)
    document = json.loads(path.read_text())
    document["payload"]["sections"]["permission_mode"] = "root"
    document["hmac"] = record_mac("session", 1, document["payload"])  # signed: still checked
    path.write_text(json.dumps(document))
    target = Agent(ScriptedModel([]))
    with pytest.raises(DeputyError):
        target.load_session(path)
    assert target.get_turns() == [] and target.get_permission_mode() == "standard"
