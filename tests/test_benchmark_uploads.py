"""The attachment benchmark still runs (one small upload, so it cannot rot)."""

from __future__ import annotations

import re

import pytest

from tests.test_benchmarks import load


async def test_the_upload_benchmark_prints_its_line_last(
    capsys: pytest.CaptureFixture[str],
) -> None:
    upload_ms = await load("_uploads").main(iterations=1, megabytes=1)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == f"upload of a 1 MB PDF to the model's turn: {upload_ms:.0f} ms"
    assert re.fullmatch(r"the same message without the attachment, .*: \d+ ms", lines[-2])
    assert upload_ms > 0
