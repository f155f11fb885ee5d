"""Records the directory code saved keep loading: an approval waiting in an
``approval_dir``, a file checkpoint journal in a ``checkpoint_dir`` and a tool result
offloaded to an ``offload_dir``, as the code before one storage path (issue #35) wrote
them (tests/fixtures/legacy_dirs, made once with that code and this test's record key).

The saved records name the folder they were made in (``/tmp/deputy-legacy``): the
approval and the journal belong to its working directory, so the test puts them back
there.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from deputy_shiny import Agent, approval_read, tool, tool_annotations
from deputy_shiny._engine.offload import ToolResultStore
from deputy_shiny.permissions import Permissions
from deputy_shiny.testing import ScriptedModel
from deputy_shiny.tools import tool_write_file

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "legacy_dirs"
WHERE = Path("/tmp/deputy-legacy")  # where they were saved (their records say so)
MANIFEST = json.loads((FIXTURE / "manifest.json").read_text())


@pytest.fixture
def legacy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The saved folders, back where they were saved, under the key they were saved with."""
    monkeypatch.setenv("DEPUTY_RECORD_KEY", "5a" * 32)
    shutil.rmtree(WHERE, ignore_errors=True)
    shutil.copytree(FIXTURE, WHERE)
    (WHERE / "work").mkdir()
    yield WHERE
    shutil.rmtree(WHERE, ignore_errors=True)


def send(to: str) -> str:
    "Send a message."
    return f"sent to {to}"


send.__module__ = "__main__"  # as in the script that saved it: the same tool definition


def test_a_saved_approval_loads_and_is_decided_once(legacy: Path) -> None:
    path = legacy / "approvals" / MANIFEST["approval"]
    assert approval_read(path).request.arguments == {"to": "ops"}
    agent = Agent(
        ScriptedModel(["Sent."]),
        tools=[tool(send, annotations=tool_annotations(open_world_hint=False))],
        approval_dir=legacy / "approvals",
        working_dir=legacy / "work",
        agent_id="legacy-agent",
        session_id="legacy-session",
        permissions=Permissions(tool_allowlist=("send",), approval_tools=("send",)),
    )
    pending = agent.pending_approval()
    assert pending is not None and pending.request.tool_name == "send"
    result = agent.resume_approval(pending.source.path, "approve")
    assert result.response == "Sent."
    assert agent.pending_approval() is None


def test_a_saved_checkpoint_journal_loads_and_rewinds(legacy: Path) -> None:
    (legacy / "work" / "a.txt").write_text("new a\n")
    agent = Agent(
        ScriptedModel([]),
        tools=[tool_write_file()],
        working_dir=legacy / "work",
        enable_file_checkpointing=True,
        checkpoint_dir=legacy / "checkpoints",
        agent_id="legacy-agent",
        session_id="legacy-session",
    )
    assert [c.id for c in agent.list_checkpoints()] == [MANIFEST["checkpoint"]]
    assert agent.rewind_files(MANIFEST["checkpoint"]).restored_changes == 1
    assert (legacy / "work" / "a.txt").read_text() == "old a\n"


def test_a_saved_offloaded_result_loads(legacy: Path) -> None:
    results = ToolResultStore(legacy / "offloads", "legacy-session")
    assert results.resolve(MANIFEST["offload"]) == "x" * 5000 + "end"
