"""Import time of the package: ``import deputy_shiny`` in fresh interpreters.

Each sample is a new ``python -c`` process that times its own import with
``time.perf_counter`` (wall) and ``time.process_time`` (CPU, steadier on a busy
machine), so interpreter start-up is not counted. The cases alternate, sample by
sample, to share any drift:

* ``pydantic``: ``import pydantic`` plus one model class, the baseline;
* ``import deputy_shiny``: the package root;
* ``from deputy_shiny import Agent``: what an app writes first;
* ``Agent + testing``: ``Agent(ScriptedModel([...]))`` made, as a test starts.

Bytecode is cached first: ``PYTHONDONTWRITEBYTECODE`` is dropped and every process
shares a ``PYTHONPYCACHEPREFIX`` that one warm-up run per case fills, so no sample pays
for compiling. With ``--compare TREE`` the package's cases also run from another
checkout (say, the main branch before a change), interleaved with this tree's, so a
before/after table comes from one run.

It prints each case's median of ``--samples`` (default 5) in milliseconds, wall (and
the fastest sample) and CPU, and the whole ``python -c`` process's wall time (start-up
and exit too); then the machine's load; last the ratio ``import deputy_shiny`` /
pydantic (wall medians). The target is under 0.3 s for ``import deputy_shiny``.

Usage: .venv/bin/python benchmarks/import_time.py [--samples N] [--compare TREE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASES = {
    "pydantic": "import pydantic\nclass M(pydantic.BaseModel):\n    x: int = 0\nM()\n",
    "import deputy_shiny": "import deputy_shiny\n",
    "from deputy_shiny import Agent": "from deputy_shiny import Agent\n",
    "Agent + testing": (
        "from deputy_shiny import Agent\nfrom deputy_shiny.testing import ScriptedModel\n"
        "Agent(ScriptedModel(['x']))\n"
    ),
}

TIMED = (
    "import time\n_t, _c = time.perf_counter(), time.process_time()\n{body}"
    "print(time.perf_counter() - _t, time.process_time() - _c)\n"
)


def tree_env(tree: Path, cache: str) -> dict[str, str]:
    """The environment of a process that imports the package from ``tree``, bytecode cached."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    # The tree first, as the tests run it (a worktree beside an editable install).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    return env


def sample(body: str, env: dict[str, str]) -> tuple[float, float, float]:
    """Wall and CPU seconds one fresh interpreter spends on ``body``, and its process's wall.

    It runs in the tree that ``env`` names first (``python -c`` puts its working
    directory first on the path, so a run elsewhere could import another checkout).
    """
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", TIMED.format(body=body)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=env["PYTHONPATH"].split(os.pathsep)[0],
    )
    process = time.perf_counter() - started
    wall, cpu = (float(x) for x in out.stdout.strip().splitlines()[-1].split())
    return wall, cpu, process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--compare", type=Path, metavar="TREE", help="another checkout to time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="import-time-") as cache:
        runs = [(name, body, tree_env(ROOT, cache)) for name, body in CASES.items()]
        if args.compare is not None:
            other = tree_env(args.compare.resolve(), cache)
            runs += [
                (f"{name} [{args.compare}]", body, other)
                for name, body in CASES.items()
                if name != "pydantic"
            ]
        for _, body, env in runs:
            sample(body, env)  # fills the bytecode cache
        samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _, _ in runs}
        for _ in range(args.samples):
            for name, body, env in runs:
                samples[name].append(sample(body, env))
    walls = {}
    for name, values in samples.items():
        wall, cpu, process = (statistics.median(column) for column in zip(*values, strict=True))
        walls[name] = wall
        fastest = min(value[0] for value in values)
        print(
            f"{name:46s} wall {wall * 1000:6.1f} ms (min {fastest * 1000:6.1f})"
            f"  cpu {cpu * 1000:6.1f} ms  whole process {process * 1000:6.1f} ms"
        )
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print(f"import deputy_shiny / pydantic: {walls['import deputy_shiny'] / walls['pydantic']:.2f}")


if __name__ == "__main__":
    main()
