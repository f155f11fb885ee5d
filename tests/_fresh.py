"""Fresh processes for checks of a process's first moments, without one interpreter each.

Warm-up and import checks need a process in which nothing has happened yet. Starting an
interpreter for each costs its start-up and imports every time (litellm's alone is
seconds of CPU). :func:`forked` starts ONE interpreter, runs a shared ``setup`` there
(the imports every case would pay the same), then forks a child per case: each child
starts from exactly that state, as a fresh process that had just run ``setup`` would.
The setup must start no thread (a forked child would inherit its locks, not the thread):
the runner checks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

RUNNER = r"""
import atexit, json, os, sys, threading, traceback
spec = json.loads(sys.argv[1])
shared = {"__name__": "__main__"}
exec(spec["setup"], shared)
assert threading.active_count() == 1, f"setup started threads: {threading.enumerate()}"

def child(name, code):
    sys.stdout.flush(); sys.stderr.flush()
    for fd, suffix in ((1, ".out"), (2, ".err")):
        path = os.path.join(spec["dir"], name + suffix)
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    status = 0
    try:
        exec(code, dict(shared))
        atexit._run_exitfuncs()  # as the process's exit would (os._exit skips them)
    except BaseException:
        traceback.print_exc()
        status = 1
    finally:
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(status)  # never back into this loop

pids = {}
for name, code in spec["cases"].items():
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        child(name, code)
    pids[name] = pid
    if not spec["parallel"]:  # one at a time: a timed case has the machine to itself
        pids[name] = os.waitpid(pid, 0)[1]
for name, pid in pids.items():
    if spec["parallel"]:
        pids[name] = os.waitpid(pid, 0)[1]
print(json.dumps({name: os.waitstatus_to_exitcode(s) for name, s in pids.items()}))
"""


@dataclass(frozen=True)
class Child:
    """One case's child process: its exit code and what it wrote."""

    name: str
    code: int
    out: str
    err: str

    def printed(self) -> str:
        """What the case printed; fails (with its traceback) if the case raised."""
        assert self.code == 0, f"case {self.name!r} failed:\n{self.err}"
        return self.out


def forked(
    cases: dict[str, str], setup: str = "", *, parallel: bool = False, timeout: float = 300
) -> dict[str, Child]:
    """Each case's code run in a child forked after ``setup`` ran once in a fresh interpreter.

    ``parallel`` runs the children at once (for checks that time nothing); otherwise
    one after the other. A case that raises is a child with a non-zero code (its
    test fails on it, the others stand); a failing ``setup`` fails the call.

    Example:
        >>> children = forked({"a": "print(x + 1)", "b": "print(x * 3)"}, setup="x = 2")
        >>> children["a"].printed(), children["b"].printed()
        ('3\\n', '6\\n')
    """
    with tempfile.TemporaryDirectory(prefix="deputy-fresh-") as directory:
        spec = {"setup": setup, "cases": cases, "parallel": parallel, "dir": directory}
        done = subprocess.run(
            [sys.executable, "-c", RUNNER, json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        codes = json.loads(done.stdout.strip().splitlines()[-1])
        folder = Path(directory)
        return {
            name: Child(
                name,
                codes[name],
                (folder / f"{name}.out").read_text(),
                (folder / f"{name}.err").read_text(),
            )
            for name in cases
        }
