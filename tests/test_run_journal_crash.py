"""A run survives its process: processes SIGKILLed at each kill point of a run, the run
found and resumed in another process, on SQLite and on PostgreSQL.

No tool that is not idempotent runs twice (each tool appends to a ledger per
execution), the call that was running gets an "Interrupted" result the model sees (an
idempotent one runs again), the transcript is whole, the usage is that of a run never
interrupted, and a third process cannot resume the run again. The processes come from
tests/run_journal_crash_child.py (one interpreter, one fork per step).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
KILLED = signal.SIGKILL.value
STORES = ("sqlite", "postgresql")
INTERRUPTED = "Interrupted: the process running this tool call ended while it ran"


@dataclass
class Crashed:
    root: Path
    summary: dict[str, Any]

    def resumed(self, point: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.root / point / "resumed.json").read_text())
        return data

    def ledger(self, point: str) -> list[str]:
        path = self.root / point / "ledger"
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture(scope="module")
def crashes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Crashed]:
    roots = {name: tmp_path_factory.mktemp(f"journal-{name}") for name in STORES}
    urls = {
        "sqlite": f"sqlite+aiosqlite:///{roots['sqlite'] / 'store.db'}",
        "postgresql": request.getfixturevalue("postgres_server").database(),
    }
    args = [str(a) for name in STORES for a in (roots[name] / "points", urls[name])]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("journal-state")))
        patch.delenv("DEPUTY_RECORD_KEY", raising=False)
        done = subprocess.run(
            [sys.executable, "-m", "tests.run_journal_crash_child", *args],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=400,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    summaries = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        name: Crashed(roots[name] / "points", summary)
        for name, summary in zip(STORES, summaries, strict=True)
    }


@pytest.fixture(params=STORES)
def crashed(request: pytest.FixtureRequest, crashes: dict[str, Crashed]) -> Crashed:
    return crashes[request.param]


def _texts(turns: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """Each turn as its role and its contents' text, tool name or output."""
    return [
        (
            turn["role"],
            [c.get("text") or c.get("output") or c.get("name") or "" for c in turn["contents"]],
        )
        for turn in turns
    ]


POINTS = [
    # (kill point, ledger after both processes, requests, tool calls, the model saw)
    ("between", ["send:a", "send:b"], 2, 2, ["sent to a", "sent to b"]),
    ("tool", ["send:ops"], 2, 1, [INTERRUPTED]),
    ("idempotent", ["lookup:x", "lookup:x"], 2, 1, ["found x"]),  # safe to repeat: ran again
    ("subagent", ["send:sub"], 2, 1, [INTERRUPTED]),  # the lead's delegate call
]


@pytest.mark.parametrize(("point", "ledger", "requests", "tool_calls", "seen"), POINTS)
def test_a_run_killed_at_a_tool_resumes_elsewhere_and_runs_no_tool_twice(
    crashed: Crashed, point: str, ledger: list[str], requests: int, tool_calls: int, seen: list[str]
) -> None:
    assert crashed.summary[point] == {"run": KILLED, "resume": 0, "again": 0}
    assert crashed.ledger(point) == ledger
    resumed = crashed.resumed(point)
    assert resumed["stop_reason"] == "complete"
    assert resumed["interrupted"] is not None and resumed["interrupted"]["task"] == (
        "Please do the task"
    )
    assert [s[: len(INTERRUPTED)] for s in resumed["seen"]] == [s[: len(INTERRUPTED)] for s in seen]
    assert (resumed["usage"]["requests"], resumed["usage"]["tool_calls"]) == (requests, tool_calls)
    turns = _texts(resumed["turns"])
    assert [role for role, _ in turns] == ["user", "assistant", "user", "assistant"]
    assert turns[0] == ("user", ["Please do the task"])
    assert turns[-1] == ("assistant", ["All done."])
    assert len(turns[2][1]) == len(turns[1][1])  # every call of the response answered
    assert (crashed.root / point / "again.txt").read_text() == "refused: RunResumeError"
    assert resumed["again"] is False  # nothing left to resume


def test_interrupted_calls_are_named(crashed: Crashed) -> None:
    assert crashed.resumed("tool")["interrupted"]["interrupted_calls"] == ["send"]
    assert crashed.resumed("between")["interrupted"]["interrupted_calls"] == []


def test_a_run_killed_mid_reply_keeps_what_was_streamed_and_asks_again(crashed: Crashed) -> None:
    assert crashed.summary["streaming"] == {"run": KILLED, "resume": 0, "again": 0}
    resumed = crashed.resumed("streaming")
    partial = resumed["interrupted"]["partial_text"]
    assert len(partial) > 40 and resumed["response"].startswith(partial)
    assert resumed["usage"]["requests"] == 1  # the cut-off request is not counted twice
    turns = _texts(resumed["turns"])
    assert turns == [("user", ["Please do the task"]), ("assistant", [resumed["response"]])]


def test_a_run_killed_while_an_approval_waits_is_decided_once(crashed: Crashed) -> None:
    assert crashed.summary["approval"] == {"run": KILLED, "resume": 0, "again": 0}
    resumed = crashed.resumed("approval")
    assert resumed["interrupted"] is None  # it waits for a person, it was not interrupted
    assert resumed["stop_reason"] == "complete" and resumed["response"] == "All done."
    assert crashed.ledger("approval") == ["send:ops"]
    assert (crashed.root / "approval" / "again.txt").read_text() == (
        "refused: ApprovalDecidedError"
    )


def test_a_run_killed_during_compaction_compacts_again_and_finishes(crashed: Crashed) -> None:
    assert crashed.summary["compaction"] == {"run": KILLED, "resume": 0, "again": 0}
    resumed = crashed.resumed("compaction")
    assert resumed["stop_reason"] == "complete" and resumed["response"] == "All done."
    assert [line.split(" ")[0] for line in crashed.ledger("compaction")] == ["send:a", "send:b"]
    # both calls had ended before the compaction: their results are replayed, and the
    # model is never told one was interrupted
    assert "sent to b" in resumed["seen"]
    assert not [seen for seen in resumed["seen"] if seen.startswith(INTERRUPTED)]
    turns = _texts(resumed["turns"])
    assert [role for role, _ in turns] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    # as a run never interrupted: two responses with calls, the summary, the last one
    # (the cut summary request had not ended: it is not counted)
    assert (resumed["usage"]["requests"], resumed["usage"]["tool_calls"]) == (4, 2)
    assert "compaction" in resumed["events"]
