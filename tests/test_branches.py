"""Branches of a conversation (editing a past message): the tree, the journal's part, the
engine's checkpoint naming the prompt's turn, and the kit's input parsing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent
from deputy_shiny.errors import CheckpointError, CheckpointPathError, PersistenceCorruptError
from deputy_shiny.messages import (
    ContentText,
    ContentToolRequest,
    ContentToolResult,
    Turn,
)
from deputy_shiny.persistence import FileJournal
from deputy_shiny.persistence.checkpoints import USER_TURN_KEY
from deputy_shiny.shiny._branches import BranchTree, exchanges, prompt_indices
from deputy_shiny.shiny._session_branches import _checkpoint_for, parse_edit, parse_navigate
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file


def _t(role: Any, text: str) -> Turn:
    return Turn(role=role, contents=[ContentText(text=text)])


def _talk(*pairs: tuple[str, str]) -> list[Turn]:
    return [turn for user, reply in pairs for turn in (_t("user", user), _t("assistant", reply))]


# ------------------------------------------------------------------ the tree


def test_tool_results_are_not_prompts_and_an_exchange_runs_to_the_next_prompt() -> None:
    call = ContentToolRequest(id="c1", name="read_file", arguments={})
    turns = [
        _t("user", "read it"),
        Turn(role="assistant", contents=[call]),
        Turn(role="user", contents=[ContentToolResult(call_id="c1", name="read_file", output="x")]),
        _t("assistant", "it says x"),
        _t("user", "thanks"),
    ]
    assert prompt_indices(turns) == [0, 4]
    assert [len(e) for e in exchanges(turns)] == [4, 1]


def test_versions_of_each_message_are_counted_where_the_branches_part() -> None:
    tree = BranchTree()
    first = _talk(("a", "A"), ("b", "B"), ("c", "C"))
    tree.keep(first, None, {})  # edited message 1 ("b")
    second = _talk(("a", "A"), ("b2", "B2"))
    assert tree.siblings(second) == {1: (1, 2)}
    tree.keep(second, None, {})  # edited message 0 ("a")
    third = _talk(("a3", "A3"))
    assert tree.siblings(third) == {0: (1, 2)}
    # Back to the first version of message 0: the branch seen last there opens.
    back = tree.pick(third, 0, "prev")
    assert back is not None and back.turns == tuple(second)
    assert tree.pick(third, 0, "next") is None  # the newest already
    tree.take(back)
    tree.keep(third, None, {}, next_id=back.id)
    assert tree.siblings(second) == {0: (0, 2), 1: (1, 2)}
    older = tree.pick(second, 1, "prev")
    assert older is not None and older.turns == tuple(first)


def test_two_edits_with_the_same_text_stay_two_versions() -> None:
    tree = BranchTree()
    tree.keep(_talk(("a", "one reply")), None, {})
    assert tree.siblings(_talk(("a", "another reply"))) == {0: (1, 2)}


def test_past_the_limit_the_branch_seen_least_recently_goes() -> None:
    tree = BranchTree(limit=2)
    for text in ("x", "y", "z"):
        tree.keep(_talk((text, text.upper())), None, {})
    assert [b.turns[0].text for b in tree.stored] == ["y", "z"]
    assert tree.siblings(_talk(("w", "W"))) == {0: (2, 3)}


def test_a_tree_comes_back_from_its_saved_data_as_it_was() -> None:
    tree = BranchTree()
    first = _talk(("a", "A"), ("b", "B"))
    files: dict[str, bytes | None] = {"notes/a.md": b"\x00one\xff", "gone.md": None}
    tree.keep(first, {"checkpoints": []}, files)
    second = _talk(("a", "A"), ("b2", "B2"))
    back = BranchTree.from_payload(json.loads(json.dumps(tree.payload())))
    assert back.siblings(second) == tree.siblings(second) == {1: (1, 2)}
    assert back.stored == tree.stored and back.current_id == tree.current_id
    back.keep(second, None, {})  # numbers go on from where the saved tree was
    assert back.current_id == 2


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data.pop("stored"),
        lambda data: data["stored"][0]["files"].update({"a.md": "not base64!"}),
        lambda data: data["stored"][0].update(turns=[{"role": "wizard"}]),
        lambda data: data["stored"][0].update(journal=["not", "a", "mapping"]),
        lambda data: data.update(current_id="x"),
    ],
)
def test_damaged_saved_branches_are_refused(damage: Any) -> None:
    tree = BranchTree()
    tree.keep(_talk(("a", "A")), None, {"a.md": b"one"})
    data = tree.payload()
    damage(data)
    with pytest.raises(PersistenceCorruptError, match="saved branches are not valid"):
        BranchTree.from_payload(data)


# ------------------------------------------------------------------ the journal's part


def test_the_journal_lists_what_a_rewind_restores_and_keeps_and_puts_back_files(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    journal = FileJournal(work)
    first = journal.checkpoint()
    journal.record(work / "notes" / "a.md")
    (work / "notes").mkdir()
    (work / "notes" / "a.md").write_text("draft")
    journal.checkpoint()
    journal.record(work / "b.md")
    (work / "b.md").write_text("bee")
    assert journal.changed_since(first.id) == ("b.md", "notes/a.md")
    kept = journal.read_files(("notes/a.md", "b.md", "gone.md"))
    assert kept == {"notes/a.md": b"draft", "b.md": b"bee", "gone.md": None}

    journal.rewind(first.id)
    assert not (work / "notes" / "a.md").exists() and not (work / "b.md").exists()
    (work / "gone.md").write_text("made since")
    journal.write_files(kept)
    assert (work / "notes" / "a.md").read_text() == "draft"
    assert (work / "b.md").read_text() == "bee" and not (work / "gone.md").exists()
    with pytest.raises(CheckpointError):
        journal.changed_since("ckpt_" + "0" * 32)


def test_kept_files_never_go_outside_the_workspace_or_through_a_link(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    journal = FileJournal(work)
    for path in ("../outside/x.md", "/etc/passwd"):
        with pytest.raises(CheckpointPathError):
            journal.write_files({path: b"evil"})
        with pytest.raises(CheckpointPathError):
            journal.read_files((path,))
    os.symlink(outside, work / "link")
    with pytest.raises(CheckpointPathError):
        journal.write_files({"ok.md": b"fine", "link/x.md": b"evil"})
    # Every path is checked before the first is written.
    assert not (work / "ok.md").exists() and list(outside.iterdir()) == []


# ------------------------------------------------------------------ the engine's part


def test_each_prompts_run_names_its_turn_in_its_checkpoint(tmp_path: Path) -> None:
    call = ScriptedToolCall("write_file", {"path": "a", "content": "1"})
    write = ScriptedReply(tool_calls=[call])
    agent = Agent(
        ScriptedModel(["hi", write, "done"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        enable_file_checkpointing=True,
    )
    agent.run_sync("first")
    agent.run_sync("second")
    journal = agent.file_checkpoints
    assert journal is not None
    assert [c.metadata.get(USER_TURN_KEY) for c in agent.list_checkpoints()] == [0, 2]
    second = agent.list_checkpoints()[1].id
    assert _checkpoint_for(journal, 2) == second and _checkpoint_for(journal, 1) is None
    assert journal.changed_since(second) == ("a",)


# ------------------------------------------------------------------ the inputs


@pytest.mark.parametrize(
    "value",
    [
        None,
        "0",
        {"index": "0", "content": "x"},
        {"index": 0.0, "content": "x"},
        {"index": False, "content": "x"},
        {"index": 0, "content": 5},
        {"index": 0},
    ],
)
def test_a_malformed_edit_input_is_no_edit(value: Any) -> None:
    assert parse_edit(value) is None


def test_a_navigation_goes_one_of_two_ways() -> None:
    assert parse_navigate({"index": 3, "direction": "prev"}) == (3, "prev")
    assert parse_navigate({"index": 3, "direction": "up"}) is None
    assert parse_navigate({"index": None, "direction": "next"}) is None
