"""The benchmark scripts still run (a few iterations, so they cannot rot)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
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
