"""Durable approvals survive crashes: processes killed (SIGKILL) at every stage of an
approval's life, then resumed and read in other processes.

Zero double executions (the tool's log has at most one line per approval) and zero
lost approvals (each ends decided: completed, stopped or indeterminate, never gone).
The processes come from tests/approval_crash_child.py, which imports litellm once and
forks one process per step, so each store takes a few seconds. Every test runs on each
store: files in an ``approval_dir``, and a ``SqlStore`` on SQLite and on the session's
PostgreSQL server (one database for the whole module). The kit's path too, on
PostgreSQL: app processes (tests/kit_crash_child.py) killed while an approval waits or
resumes, and a new process on the same store that shows and finishes it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, approval_read
from deputy_shiny.errors import ApprovalDecidedError
from deputy_shiny.persistence import SqlStore
from deputy_shiny.testing import ScriptedModel

ROOT = Path(__file__).resolve().parent.parent
KILLED = signal.SIGKILL.value


@dataclass
class Crashed:
    """One store's crash run: where, the summary, and how to reach its approvals."""

    root: Path
    summary: dict[str, Any]
    url: str | None  # None: files in an approval_dir

    def read(self, folder: Path) -> Any:
        ref = (folder / "path.txt").read_text()
        if self.url is None:
            return approval_read(ref)
        return approval_read(ref, store=SqlStore(self.url))

    def agent(self, folder: Path) -> Agent:
        where: dict[str, Any] = (
            {"approval_dir": folder / "approvals"}
            if self.url is None
            else {"store": SqlStore(self.url)}
        )
        return Agent(
            ScriptedModel([]),
            working_dir=folder,
            agent_id="crash-agent",
            session_id="crash-session",
            **where,
        )


STORES = ("dir", "sqlite", "postgresql")


@pytest.fixture(scope="module")
def crashes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Crashed]]:
    """Every store's crash run, from one harness interpreter (one litellm import)."""
    roots = {name: tmp_path_factory.mktemp(f"crash-{name}") for name in STORES}
    urls: dict[str, str | None] = {
        "dir": None,
        "sqlite": f"sqlite+aiosqlite:///{roots['sqlite'] / 'store.db'}",
        "postgresql": request.getfixturevalue("postgres_server").database(),
    }
    args = [str(a) for name in STORES for a in (roots[name], urls[name] or "-")]
    # Records are authenticated with the server's record key. No key is given here: the
    # first process to need one creates the key file in a fresh state directory, and
    # every other process (the forked children, this one) reads the same file.
    state = tmp_path_factory.mktemp("state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(state))
        patch.delenv("DEPUTY_RECORD_KEY", raising=False)
        summaries = _harness("tests.approval_crash_child", args)
        key_file = state / "deputy_shiny" / "record.key"
        assert key_file.is_file() and key_file.stat().st_mode & 0o777 == 0o600
        yield {
            name: Crashed(roots[name], summary, urls[name])
            for name, summary in zip(STORES, summaries, strict=True)
        }


def _harness(module: str, args: list[str]) -> Any:
    """Run a crash harness (one interpreter) in this environment; its JSON summary."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(params=STORES)
def crashed(request: pytest.FixtureRequest, crashes: dict[str, Crashed]) -> Crashed:
    return crashes[request.param]


def _executions(folder: Path) -> list[str]:
    log = folder / "effects.log"
    return log.read_text().splitlines() if log.exists() else []


def _resume_here(crashed: Crashed, folder: Path) -> None:
    """One more try, from this (yet another) process: always refused."""
    agent = crashed.agent(folder)
    with pytest.raises(ApprovalDecidedError):
        agent.resume_approval((folder / "path.txt").read_text(), "approve")


@pytest.mark.parametrize(
    ("stage", "status", "runs"),
    [
        ("pending", "completed", 1),  # killed right after the record was written
        ("resuming", "stopped", 0),  # killed after deciding, before the tool started
        ("executing", "indeterminate", 1),  # killed inside the tool: never run again
        ("continuing", "stopped", 1),  # killed in the model request after the tool
    ],
)
def test_a_kill_at_each_stage_loses_nothing_and_runs_nothing_twice(
    crashed: Crashed, stage: str, status: str, runs: int
) -> None:
    folder = crashed.root / stage
    steps = crashed.summary[stage]
    assert steps["pause"] == KILLED
    assert steps["resume"] == (0 if stage == "pending" else KILLED)
    assert steps["again"] == 0  # the second resumer ended normally: it was refused
    assert (folder / "again.txt").read_text() == f"decided:{status}"

    record = crashed.read(folder)
    assert record.status == status
    assert record.decision is not None and record.decision.approved
    assert len(_executions(folder)) == runs
    _resume_here(crashed, folder)
    assert len(_executions(folder)) == runs  # still: nothing ran twice
    if stage == "executing":
        assert record.note and "not run again" in record.note
        assert [e["event"] for e in record.effects][-2:] == ["executing", "indeterminate"]


def test_two_processes_resuming_at_once_run_the_tool_once(crashed: Crashed) -> None:
    folder = crashed.root / "race"
    assert crashed.summary["race"]["resumers"] == [0, 0]
    outcomes = sorted((folder / name).read_text() for name in ("one.txt", "two.txt"))
    assert outcomes[1] == "ok:complete"
    assert outcomes[0].startswith("decided:")
    assert len(_executions(folder)) == 1
    assert crashed.read(folder).status == "completed"


KIT_STAGES = [
    # (stage, the modal shows again in the new process, final status, tool runs)
    ("pending", True, "completed", 1),  # killed with the modal on screen
    ("resuming", False, "stopped", 0),  # killed after the approval, before the tool
    ("executing", False, "indeterminate", 1),  # killed inside the tool: never run again
    ("continuing", False, "stopped", 1),  # killed in the model request after the tool
]


@pytest.fixture(scope="module")
def kit_crashes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any]]:
    """Every stage's kill and finish through the kit, from one harness interpreter."""
    root = tmp_path_factory.mktemp("kit-crash")
    url = request.getfixturevalue("postgres_server").database()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("kit-state")))
        patch.delenv("DEPUTY_RECORD_KEY", raising=False)
        return root, _harness("tests.kit_crash_child", [str(root), url])


@pytest.mark.parametrize(("stage", "shown", "status", "runs"), KIT_STAGES)
def test_a_kit_process_killed_with_an_approval_waiting_or_resuming_loses_nothing(
    kit_crashes: tuple[Path, dict[str, Any]], stage: str, shown: bool, status: str, runs: int
) -> None:
    root, summary = kit_crashes
    assert summary[stage] == {"ask": KILLED, "finish": 0}, summary[stage]
    seen = json.loads((root / f"{stage}.json").read_text())
    assert seen["shown"] is shown  # a waiting approval shows again, decided there
    assert not seen["showing"] and not seen["waiting"]  # and nothing waits after
    if stage == "pending":
        assert seen["said"].endswith("Sent.")  # the resumed run went on in the new process
    assert seen["again"] == f"decided:{status}"  # decided once, whoever tries again
    assert seen["status"] == status
    log = root / f"{stage}.log"
    assert len(log.read_text().splitlines() if log.exists() else []) == runs
    assert seen["effects"].count("decided") == 1
