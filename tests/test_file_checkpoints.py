"""Specification of file checkpoints: journal, checkpoint, list, rewind, caps, and attacks.

Runs go through the real engine (ScriptedModel over litellm) with the built-in file
tools; attacks play a hostile model (symlinks, paths outside) and a hostile user who
edits the journal on disk or hands back a doctored saved state.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from deputy_shiny import (
    Agent,
    CheckpointError,
    ConfigurationError,
    FileCheckpoint,
    FileRewind,
    tool_edit_file,
    tool_multi_edit,
    tool_write_file,
)
from deputy_shiny.errors import AgentBusyError, CheckpointCorruptError, CheckpointPathError
from deputy_shiny.persistence import FileJournal, read_document, write_document
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from tests.helpers import local_tool


def _calls(*calls: tuple[str, dict[str, Any]]) -> ScriptedReply:
    return ScriptedReply(tool_calls=[ScriptedToolCall(name, args) for name, args in calls])


def _agent(work: Path, replies: list[Any], **kwargs: Any) -> Agent:
    kwargs.setdefault("enable_file_checkpointing", True)
    tools = kwargs.pop("tools", [tool_write_file(), tool_edit_file(), tool_multi_edit()])
    return Agent(ScriptedModel(replies), tools=tools, working_dir=work, **kwargs)


def _write(path: str, content: str) -> tuple[str, dict[str, Any]]:
    return ("write_file", {"path": path, "content": content})


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


# ------------------------------------------------------------------ the happy path


def test_a_run_checkpoints_first_and_rewind_undoes_its_writes_edits_and_creations(
    work: Path,
) -> None:
    (work / "keep.txt").write_text("alpha beta\n")
    (work / "multi.txt").write_text("one two\n")
    agent = _agent(
        work,
        [
            _calls(
                _write("new/dir/created.txt", "fresh"),
                ("edit_file", {"path": "keep.txt", "old_string": "alpha", "new_string": "A"}),
                (
                    "multi_edit",
                    {
                        "path": "multi.txt",
                        "edits": [
                            {"old_string": "one", "new_string": "1"},
                            {"old_string": "two", "new_string": "2"},
                        ],
                    },
                ),
            ),
            _calls(_write("keep.txt", "rewritten")),
            "done",
        ],
    )
    result = agent.run_sync("change things")
    assert [e.type for e in result.events][:2] == ["start", "file_checkpoint"]
    event = result.events[1]
    assert (work / "keep.txt").read_text() == "rewritten"
    assert (work / "multi.txt").read_text() == "1 2\n"
    [checkpoint] = agent.list_checkpoints()
    assert isinstance(checkpoint, FileCheckpoint)
    assert checkpoint.id == event.checkpoint_id and checkpoint.run_id == result.run_id
    assert checkpoint.changes == 4  # keep.txt twice, multi.txt, created.txt

    rewind = agent.rewind_files(checkpoint.id)
    assert isinstance(rewind, FileRewind)
    assert rewind.restored_changes == 4
    assert rewind.paths == ("keep.txt", "multi.txt", "new/dir/created.txt")
    assert (work / "keep.txt").read_text() == "alpha beta\n"
    assert (work / "multi.txt").read_text() == "one two\n"
    assert not (work / "new/dir/created.txt").exists()
    assert agent.list_checkpoints()[0].changes == 0
    assert len(agent.get_turns()) == 6  # the conversation does not change


def test_binary_contents_come_back_byte_for_byte(work: Path) -> None:
    original = bytes(range(256)) * 3 + b"\x00\xff\r\n"
    (work / "blob.bin").write_bytes(original)
    agent = _agent(work, [_calls(_write("blob.bin", "text now")), "ok"])
    agent.run_sync("overwrite")
    assert (work / "blob.bin").read_bytes() == b"text now"
    agent.rewind_files(agent.list_checkpoints()[0].id)
    assert (work / "blob.bin").read_bytes() == original


def test_each_run_and_each_checkpoint_call_marks_a_point_and_rewind_drops_later_ones(
    work: Path,
) -> None:
    agent = _agent(
        work,
        [_calls(_write("a.txt", "run 1")), "ok", _calls(_write("a.txt", "run 2")), "ok"],
    )
    agent.run_sync("first")
    manual = agent.checkpoint("between runs", {"ticket": 7})
    agent.run_sync("second")
    listed = agent.list_checkpoints()
    assert [c.name for c in listed] == [None, "between runs", None]
    assert listed[1].id == manual and listed[1].metadata == {"ticket": 7}
    assert [c.changes for c in listed] == [1, 0, 1]
    with pytest.raises(ValidationError):  # frozen records
        listed[0].name = "x"  # type: ignore[misc]

    back = agent.rewind_files(manual)
    assert (work / "a.txt").read_text() == "run 1"
    assert back.checkpoint.id == manual and back.restored_changes == 1
    assert [c.id for c in agent.list_checkpoints()] == [listed[0].id, manual]
    agent.rewind_files(listed[0].id)
    assert not (work / "a.txt").exists()
    with pytest.raises(CheckpointError, match="No checkpoint"):
        agent.rewind_files(listed[2].id)  # discarded


def test_concurrent_writes_in_one_response_are_all_journaled(work: Path) -> None:
    calls = [_write(f"f{i}.txt", f"v{i}") for i in range(8)]
    agent = _agent(work, [_calls(*calls), "ok"])
    agent.run_sync("many")
    assert agent.list_checkpoints()[0].changes == 8
    assert agent.rewind_files(agent.list_checkpoints()[0].id).restored_changes == 8
    assert list(work.iterdir()) == []


def test_other_tools_are_not_journaled(work: Path) -> None:
    def scribble(name: str) -> str:
        "Write a file behind the journal's back."
        (work / name).write_text("by a custom tool")
        return "ok"

    agent = _agent(
        work,
        [_calls(("scribble", {"name": "side.txt"}), _write("main.txt", "x")), "ok"],
        tools=[tool_write_file(), local_tool(scribble)],
    )
    agent.run_sync("go")
    assert agent.rewind_files(agent.list_checkpoints()[0].id).paths == ("main.txt",)
    assert (work / "side.txt").read_text() == "by a custom tool"


def test_checkpointing_off_by_default(work: Path) -> None:
    agent = _agent(work, [_calls(_write("a.txt", "x")), "ok"], enable_file_checkpointing=False)
    result = agent.run_sync("go")
    assert "file_checkpoint" not in [e.type for e in result.events]
    assert agent.list_checkpoints() == [] and agent.file_checkpoints is None
    with pytest.raises(CheckpointError, match="enable_file_checkpointing"):
        agent.checkpoint()
    with pytest.raises(CheckpointError):
        agent.rewind_files("ckpt_" + "0" * 32)


async def test_rewind_during_a_run_is_an_error(work: Path) -> None:
    seen: list[BaseException] = []
    holder: dict[str, Agent] = {}

    def undo() -> str:
        "Try to rewind mid-run."
        agent = holder["agent"]
        try:
            agent.rewind_files(agent.list_checkpoints()[0].id)
        except AgentBusyError as exc:
            seen.append(exc)
        return "tried"

    holder["agent"] = agent = _agent(work, [_calls(("undo", {})), "ok"], tools=[local_tool(undo)])
    await agent.run_async("go")
    assert len(seen) == 1


def test_bad_settings_are_configuration_errors(work: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="outside the working directory"):
        _agent(work, [], checkpoint_dir=work)
    with pytest.raises(ConfigurationError, match="enable_file_checkpointing"):
        _agent(work, [], enable_file_checkpointing=False, checkpoint_dir=tmp_path)
    with pytest.raises(ConfigurationError, match="whole number"):
        _agent(work, [], file_checkpoint_max_file_bytes=-1)
    with pytest.raises(CheckpointError, match="JSON"):
        _agent(work, []).checkpoint(metadata={"x": object()})


# ------------------------------------------------------------------ caps


def test_a_file_over_the_per_file_cap_refuses_the_call_and_writes_nothing(work: Path) -> None:
    (work / "big.txt").write_text("x" * 100)
    agent = _agent(
        work,
        [
            _calls(
                _write("big.txt", "small"),
                (
                    "edit_file",
                    {"path": "big.txt", "old_string": "x", "new_string": "y", "replace_all": True},
                ),
            ),
            "ok",
        ],
        file_checkpoint_max_file_bytes=50,
    )
    result = agent.run_sync("shrink it")
    ends = [e for e in result.events if e.type == "tool_end"]
    assert len(ends) == 2
    for end in ends:
        assert end.is_error
        assert "file_checkpoint_max_file_bytes" in end.output
        assert "Nothing was written" in end.output
    assert (work / "big.txt").read_text() == "x" * 100
    assert agent.list_checkpoints()[0].changes == 0


def test_a_journal_that_would_pass_its_cap_refuses_the_call(work: Path) -> None:
    (work / "a.txt").write_text("a" * 40)
    (work / "b.txt").write_text("b" * 40)
    agent = _agent(
        work,
        [_calls(_write("a.txt", "1")), _calls(_write("b.txt", "2")), "ok"],
        file_checkpoint_max_journal_bytes=60,
    )
    result = agent.run_sync("both")
    ends = [e for e in result.events if e.type == "tool_end"]
    assert [e.is_error for e in ends] == [False, True]
    assert "file_checkpoint_max_journal_bytes" in ends[1].output
    assert (work / "a.txt").read_text() == "1"
    assert (work / "b.txt").read_text() == "b" * 40
    # A new file costs nothing to journal (it is recorded as absent).
    agent.file_checkpoints.record(work / "c.txt")  # type: ignore[union-attr]


# ------------------------------------------------------------------ a hostile model


def test_a_symlink_out_of_the_workspace_is_never_written(work: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    (work / "link.txt").symlink_to(outside)
    agent = _agent(work, [_calls(_write("link.txt", "pwned")), "ok"])
    result = agent.run_sync("go")
    assert [e.is_error for e in result.events if e.type == "tool_end"] == [True]
    assert outside.read_text() == "secret"


def test_a_file_that_becomes_a_symlink_is_not_restored_through_it(
    work: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    (work / "a.txt").write_text("old")
    agent = _agent(work, [_calls(_write("a.txt", "new"), _write("created.txt", "c")), "ok"])
    agent.run_sync("go")
    (work / "a.txt").unlink()
    (work / "a.txt").symlink_to(outside)  # e.g. run_bash did this after the write
    first = agent.list_checkpoints()[0].id
    with pytest.raises(CheckpointPathError, match="symbolic link"):
        agent.rewind_files(first)
    assert outside.read_text() == "secret"
    assert (work / "created.txt").exists()  # all or nothing: nothing was touched


def test_a_directory_that_becomes_a_symlink_outside_is_refused(work: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "f.txt").write_text("theirs")
    agent = _agent(work, [_calls(_write("sub/f.txt", "mine")), "ok"])
    agent.run_sync("go")
    (work / "sub/f.txt").unlink()
    (work / "sub").rmdir()
    (work / "sub").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(CheckpointPathError):
        agent.rewind_files(agent.list_checkpoints()[0].id)
    assert (elsewhere / "f.txt").read_text() == "theirs"


def test_a_directory_replaced_by_a_file_is_handled(work: Path) -> None:
    (work / "d").mkdir()
    (work / "d/kept.txt").write_text("old")
    agent = _agent(work, [_calls(_write("d/kept.txt", "new"), _write("e/made.txt", "x")), "ok"])
    agent.run_sync("go")
    first = agent.list_checkpoints()[0].id
    for name in ("d", "e"):
        for child in (work / name).iterdir():
            child.unlink()
        (work / name).rmdir()
        (work / name).write_text("a file now")
    with pytest.raises(CheckpointPathError, match="no longer a directory"):
        agent.rewind_files(first)
    (work / "d").unlink()  # only the file to restore is in the way: e/made.txt needs deleting
    assert agent.rewind_files(first).paths == ("d/kept.txt", "e/made.txt")
    assert (work / "d/kept.txt").read_text() == "old" and (work / "e").is_file()


def test_writes_outside_the_working_dir_are_refused_while_checkpointing(
    work: Path, tmp_path: Path
) -> None:
    from deputy_shiny import Permissions

    other = tmp_path / "other"
    other.mkdir()
    agent = _agent(
        work,
        [_calls(_write(str(other / "x.txt"), "x")), "ok"],
        permissions=Permissions(file_write=[str(work), str(other)]),
    )
    result = agent.run_sync("go")
    end = next(e for e in result.events if e.type == "tool_end")
    assert end.is_error and "outside the working directory" in end.output
    assert not (other / "x.txt").exists()


# ------------------------------------------------------------------ a hostile user


def _journal_agent(work: Path, journal_dir: Path) -> Agent:
    (work / "a.txt").write_text("old a")
    agent = _agent(
        work,
        [_calls(_write("a.txt", "new a"), _write("b.txt", "new b")), "ok"],
        checkpoint_dir=journal_dir,
    )
    agent.run_sync("go")
    return agent


def _doctor_index(journal_dir: Path, change: Any) -> None:
    """Rewrite the index with the server's key (a key holder, or a bug): the fields are
    still checked one by one."""
    payload = read_document(journal_dir / "index.json", "file_checkpoint_index")
    change(payload)
    write_document(journal_dir / "index.json", "file_checkpoint_index", payload)


@pytest.mark.parametrize(
    "evil",
    [
        "../outside.txt",
        "sub/../../outside.txt",
        "/etc/passwd",
        "OUTSIDE",
        "~/x",
        "C:/x",
        "a\\..\\b",
    ],
)
def test_index_paths_outside_the_working_dir_are_refused(
    work: Path, tmp_path: Path, evil: str
) -> None:
    journal_dir = tmp_path / "journal"
    journal_dir.mkdir()
    agent = _journal_agent(work, journal_dir)
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs")
    target = str(outside) if evil == "OUTSIDE" else evil

    def point_outside(payload: dict[str, Any]) -> None:
        payload["changes"][1]["path"] = target

    _doctor_index(journal_dir, point_outside)
    with pytest.raises(CheckpointCorruptError):
        agent.rewind_files(agent.list_checkpoints()[0].id)
    assert outside.read_text() == "theirs"
    assert (work / "a.txt").read_text() == "new a"


def test_an_edited_or_truncated_index_is_refused(work: Path, tmp_path: Path) -> None:
    journal_dir = tmp_path / "journal"
    journal_dir.mkdir()
    agent = _journal_agent(work, journal_dir)
    first = agent.list_checkpoints()[0].id
    index = journal_dir / "index.json"
    good = index.read_text()
    index.write_text(good.replace('"b.txt"', '"c.txt"'))  # the HMAC no longer verifies
    with pytest.raises(CheckpointCorruptError, match="not authentic"):
        agent.rewind_files(first)
    index.write_text(good[: len(good) // 2])
    with pytest.raises(CheckpointCorruptError):
        agent.rewind_files(first)
    with pytest.raises(CheckpointCorruptError):  # a fresh agent will not pick it up either
        _agent(work, [], checkpoint_dir=journal_dir)
    index.write_text(good)
    assert agent.rewind_files(first).restored_changes == 2


def test_a_doctored_blob_is_refused_and_nothing_is_restored(work: Path, tmp_path: Path) -> None:
    journal_dir = tmp_path / "journal"
    journal_dir.mkdir()
    agent = _journal_agent(work, journal_dir)
    [blob] = (journal_dir / "blobs").iterdir()
    payload = read_document(blob, "file_checkpoint_blob")
    payload["base64"] = base64.b64encode(b"evil").decode()
    write_document(blob, "file_checkpoint_blob", payload)
    with pytest.raises(CheckpointCorruptError, match="hash"):
        agent.rewind_files(agent.list_checkpoints()[0].id)
    assert (work / "a.txt").read_text() == "new a"
    assert (work / "b.txt").read_text() == "new b"


def test_a_symlinked_index_is_refused(work: Path, tmp_path: Path) -> None:
    journal_dir = tmp_path / "journal"
    journal_dir.mkdir()
    agent = _journal_agent(work, journal_dir)
    moved = tmp_path / "real-index.json"
    (journal_dir / "index.json").rename(moved)
    (journal_dir / "index.json").symlink_to(moved)
    with pytest.raises(CheckpointCorruptError, match="symlink"):
        agent.list_checkpoints()


# ------------------------------------------------------------------ saved state


def test_checkpoint_state_round_trips_through_json_into_a_new_agent(work: Path) -> None:
    (work / "a.txt").write_bytes(b"\x00binary\xff")
    first = _agent(work, [_calls(_write("a.txt", "x"), _write("n.txt", "y")), "ok"])
    first.run_sync("go")
    state = json.loads(json.dumps(first.file_checkpoints.checkpoint_state()))  # type: ignore[union-attr]
    checkpoint_id = first.list_checkpoints()[0].id
    del first

    second = _agent(work, [])
    second.file_checkpoints.restore_checkpoint_state(state)  # type: ignore[union-attr]
    assert [c.id for c in second.list_checkpoints()] == [checkpoint_id]
    second.rewind_files(checkpoint_id)
    assert (work / "a.txt").read_bytes() == b"\x00binary\xff"
    assert not (work / "n.txt").exists()


def _state(work: Path) -> dict[str, Any]:
    agent = _agent(work, [_calls(_write("a.txt", "x")), "ok"])
    (work / "a.txt").write_text("old")
    agent.run_sync("go")
    return agent.file_checkpoints.checkpoint_state()  # type: ignore[union-attr]


@pytest.mark.parametrize("tamper", ["path", "blob", "hash", "format", "working_dir", "fields"])
def test_a_doctored_state_is_refused_and_leaves_the_journal_as_it_was(
    work: Path, tamper: str
) -> None:
    state = _state(work)
    [sha] = state["blobs"]
    if tamper == "path":
        state["changes"][0]["path"] = "../../escape.txt"
    elif tamper == "blob":
        state["blobs"][sha] = base64.b64encode(b"other").decode()
    elif tamper == "hash":
        fake = hashlib.sha256(b"other").hexdigest()
        state["blobs"] = {fake: base64.b64encode(b"other").decode()}
        state["changes"][0]["blob"] = fake
    elif tamper == "format":
        state["format"] = "something else"
    elif tamper == "working_dir":
        state["working_dir"] = "/"
    else:
        state["changes"][0]["extra"] = 1
    agent = _agent(work, [])
    before = agent.checkpoint("mine")
    with pytest.raises(CheckpointCorruptError):
        agent.file_checkpoints.restore_checkpoint_state(state)  # type: ignore[union-attr]
    assert [c.id for c in agent.list_checkpoints()] == [before]


def test_the_journal_can_be_used_on_its_own(tmp_path: Path) -> None:
    journal = FileJournal(tmp_path)
    start = journal.checkpoint()
    journal.record(tmp_path / "x.txt")
    journal.record(tmp_path / "x.txt")  # a repeat is counted, not stored again
    (tmp_path / "x.txt").write_text("x")
    assert journal.rewind(start.id).restored_changes == 2
    directory = journal.directory
    journal.close()
    assert not directory.exists()
    (tmp_path / "sub").mkdir()
    with pytest.raises(CheckpointPathError, match="outside the working directory"):
        FileJournal(tmp_path / "sub").record(tmp_path / "x.txt")


# ------------------------------------------------------------------ delegation
# A subagent writes into the lead's journal under the lead's caps (ARCHITECTURE rule 10:
# the same journal, the same limits): a delegate call never dodges a rewind or a refusal.


def _lead(work: Path, sub_replies: list[Any], **kwargs: Any) -> Any:
    from deputy_shiny import Permissions
    from deputy_shiny.delegation import AgentDefinition, LeadAgent

    writer = AgentDefinition(
        name="writer", description="Writes files.", prompt="You write.", tools=["write_file"]
    )
    delegate = ScriptedToolCall("delegate", {"agent": "writer", "task": "write"})
    kwargs.setdefault("permissions", Permissions(mode="full"))
    return LeadAgent(
        ScriptedModel([ScriptedReply(tool_calls=[delegate]), "done"]),
        tools=[tool_write_file()],
        working_dir=work,
        subagents=[writer],
        subagent_models={"writer": ScriptedModel(sub_replies)},
        enable_file_checkpointing=True,
        **kwargs,
    )


def _sub_ends(lead: Any) -> list[Any]:
    (record,) = lead.list_subagents()
    turns = lead.get_subagent_messages()[record.delegation_id]
    return [r for t in turns for r in t.tool_results]


def test_a_subagents_writes_rewind_with_the_leads_rewind_files(work: Path) -> None:
    (work / "a.txt").write_text("old a")
    lead = _lead(work, [_calls(_write("a.txt", "new a"), _write("b.txt", "new b")), "wrote"])
    result = lead.run_sync("have them written")
    assert (work / "a.txt").read_text() == "new a" and (work / "b.txt").exists()
    run_start = next(e.checkpoint_id for e in result.events if e.type == "file_checkpoint")
    # The subagent's run makes no checkpoint of its own: the lead's list is the lead's runs.
    (checkpoint,) = lead.list_checkpoints()
    assert (checkpoint.id, checkpoint.changes) == (run_start, 2)
    rewound = lead.rewind_files(run_start)
    assert rewound.restored_changes == 2 and rewound.paths == ("a.txt", "b.txt")
    assert (work / "a.txt").read_text() == "old a" and not (work / "b.txt").exists()


def test_a_write_the_lead_is_refused_is_refused_to_its_subagent(work: Path) -> None:
    (work / "big.txt").write_text("x" * 100)
    lead = _agent(
        work, [_calls(_write("big.txt", "small")), "ok"], file_checkpoint_max_file_bytes=50
    )
    (end,) = [e for e in lead.run_sync("shrink").events if e.type == "tool_end"]
    assert end.is_error and "file_checkpoint_max_file_bytes" in end.output  # the lead itself

    lead = _lead(
        work, [_calls(_write("big.txt", "small")), "tried"], file_checkpoint_max_file_bytes=50
    )
    lead.run_sync("have it shrunk")
    (refused,) = _sub_ends(lead)
    assert refused.is_error and "file_checkpoint_max_file_bytes" in str(refused.output)
    assert (work / "big.txt").read_text() == "x" * 100


def test_a_subagent_cannot_write_outside_the_leads_journal(work: Path, tmp_path: Path) -> None:
    from deputy_shiny import Permissions

    other = tmp_path / "other"
    other.mkdir()
    lead = _lead(
        work,
        [_calls(_write(str(other / "x.txt"), "x")), "tried"],
        permissions=Permissions(file_write=[str(work), str(other)]),
    )
    lead.run_sync("write over there")
    (refused,) = _sub_ends(lead)
    assert refused.is_error and "outside the working directory" in str(refused.output)
    assert not (other / "x.txt").exists()


def test_a_retained_agents_writes_join_its_owners_journal(work: Path) -> None:
    from deputy_shiny import UsageLimits

    owner = _agent(work, [])
    helper = Agent(
        ScriptedModel([_calls(_write("h.txt", "helped")), "done"]),
        tools=[tool_write_file()],
        working_dir=work,
    )
    before = owner.checkpoint("before the helper")
    handle = owner.retain_agent(helper, UsageLimits(max_requests=5))
    owner.continue_agent(handle, "write h.txt")
    assert (work / "h.txt").read_text() == "helped"
    assert owner.rewind_files(before).paths == ("h.txt",)
    assert not (work / "h.txt").exists()
