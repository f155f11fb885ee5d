"""Start-up cost of a sandboxed ``run_bash`` call against an unconfined one.

Both sides call the real ``run_bash`` tool (the same code path an agent's call takes,
minus the model) with the command ``true`` in one working directory:

* baseline: ``tool_run_bash(Sandbox(kind="none"))``: a scrubbed environment, no
  confinement;
* sandboxed: ``tool_run_bash()``: bubblewrap with fresh namespaces, the read-only
  system, the working directory bound read-write.

Calls alternate to share any drift; each side's median is compared. The last lines
printed are the added milliseconds per call (target: under 30 ms) and the ratio
sandboxed / unconfined.

Usage: .venv/bin/python benchmarks/sandbox_overhead.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from deputy_shiny import Sandbox, sandbox_unavailable_reason
from deputy_shiny.sandbox import prepare_workspace
from deputy_shiny.tools import Tool, ToolContext, tool_context, tool_run_bash


async def one_call(bash: Tool, workdir: Path) -> float:
    context = ToolContext(working_dir=workdir, read_roots=(workdir,), write_roots=(workdir,))
    with tool_context(context):
        started = time.perf_counter()
        out = await bash.invoke({"command": "true"})
        elapsed = time.perf_counter() - started
    assert out == "(no output)\n[exit code 0]", out
    return elapsed


async def main(calls: int) -> None:
    reason = sandbox_unavailable_reason()
    if reason is not None:
        raise SystemExit(reason)
    plain, confined = tool_run_bash(Sandbox(kind="none")), tool_run_bash()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = prepare_workspace(tmp)  # model-run code never runs as root
        for _ in range(5):  # warm both paths (page cache, the probe)
            await one_call(plain, workdir)
            await one_call(confined, workdir)
        base, boxed = [], []
        for _ in range(calls):
            base.append(await one_call(plain, workdir))
            boxed.append(await one_call(confined, workdir))
    b, s = statistics.median(base), statistics.median(boxed)
    print(f"calls per side:        {calls}")
    print(f"unconfined run_bash:   {b * 1000:.2f} ms (median)")
    print(f"sandboxed run_bash:    {s * 1000:.2f} ms (median)")
    print(f"added per call:        {(s - b) * 1000:.2f} ms (target < 30 ms)")
    print(f"ratio sandboxed/plain: {s / b:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    asyncio.run(main(parser.parse_args().calls))
