"""The benchmark scripts still run (a few iterations, so they cannot rot)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


async def test_mcp_calls_prints_its_ratio_last(capsys: pytest.CaptureFixture[str]) -> None:
    ratio = await load("mcp_calls").main(calls=3, rounds=1)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f"ratio agent/baseline: {ratio:.3f}" and ratio > 0


async def test_compaction_prints_its_ratio_last(capsys: pytest.CaptureFixture[str]) -> None:
    ratio = await load("compaction").main(turns=40, max_tokens=1500, reply_words=60)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == f"ratio turn 40/turn 10: {ratio:.3f}" and ratio > 0
    peak = next(line for line in lines if line.startswith("peak context tokens sent:"))
    assert int(peak.split(":")[1].split()[0]) <= 1500
    compactions = next(line for line in lines if line.startswith("compactions:"))
    assert int(compactions.split(":")[1].split()[0]) >= 1


async def test_capacity_runs_both_modes_and_every_app_holds_two_sessions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Tiny: N=2, 50 chunks 40 ms apart (a 40 ms interval keeps the scheduling delay that
    # a sleeping generator accumulates well under the 1.5x pace). This 2-core machine is
    # shared and was seen at load 9: a process then stalls for 200 ms now and then, so the
    # gap limit is loosened to 500 ms. The test checks that the benchmark works (every
    # app streams the whole text at pace, the table and ratios are printed), not the
    # machine's capacity.
    held = await load("capacity").main(
        mode="both", ladder=[2], chunks=50, interval=0.04, max_gap=0.5
    )
    assert held == {
        "provider": {"minimal": 2, "by-hand": 2, "kit": 2},
        "wire": {"minimal": 2, "chatlas": 2, "by-hand": 2, "kit": 2},
    }
    lines = capsys.readouterr().out.strip().splitlines()
    rows = {(line.split()[0], line.split()[1]): line for line in lines if "  yes" in line}
    assert sorted(rows) == sorted(
        [("provider", app) for app in ("minimal", "by-hand", "kit")]
        + [("wire", app) for app in ("minimal", "chatlas", "by-hand", "kit")]
    )
    for line in rows.values():  # N, start p50/max, burst, gap p50/p99, pace, complete, held
        assert re.fullmatch(
            r"\S+ +\S+ +2 +(\d+\.\d\ds +){3}\d+\.\dms +\d+ms +\d\.\d\d +2/2 +yes", line
        ), line
    figure = r"\d+\.\d\d"
    assert [re.sub(figure, "X", line) for line in lines[-11:]] == [
        "mode: provider",
        "ratio kit/minimal sessions held: X",
        "ratio kit/by-hand sessions held: X",
        "ratio kit/minimal start p50 at 2 sessions: X",
        "ratio kit/minimal burst time to first chunk at 2 sessions: X",
        "mode: wire",
        "ratio kit/minimal sessions held: X",
        "ratio kit/by-hand sessions held: X",
        "ratio kit/chatlas sessions held: X",
        "ratio kit/minimal start p50 at 2 sessions: X",
        "ratio kit/minimal burst time to first chunk at 2 sessions: X",
    ]
    assert lines[-10] == "ratio kit/minimal sessions held: 1.00"
    assert lines[-3] == "ratio kit/chatlas sessions held: 1.00"
