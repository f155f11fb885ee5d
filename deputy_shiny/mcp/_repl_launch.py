"""Start mcp-repl as a child, so it is never a session leader (Linux; stdlib only).

Run as a script (``python -I _repl_launch.py mcp-repl --interpreter python ...``), not
imported: it must start fast and import nothing of deputy_shiny.

Why: the MCP SDK starts a stdio server with ``start_new_session=True``, which makes
the server a session leader without a controlling terminal. mcp-repl 0.3.0 opens its
Python worker's pseudo-terminal without ``O_NOCTTY``, so on Linux that terminal becomes
the server's controlling terminal; the worker's own ``TIOCSCTTY`` then fails with
EPERM, the terminal hangs up, and the kernel kills the server with SIGHUP before it
answers ``initialize``. As the child of this launcher (the session leader), mcp-repl
is not a session leader and opening a terminal never makes it its controlling one.

The launcher keeps no copy of stdin or stdout (the server's end of the MCP pipes is
the child's alone), passes SIGTERM, SIGINT and SIGHUP on to the child, and exits with
its status. It shares the child's process group, so stopping the group stops both.
"""

import contextlib
import os
import signal
import sys


def main(argv: list[str]) -> int:
    """Run ``argv`` as a child process and return its exit status."""
    if not argv:
        sys.stderr.write("usage: _repl_launch.py COMMAND [ARGS...]\n")
        return 2
    pid = os.fork()
    if pid == 0:  # the child: become the server
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            sys.stderr.write(f"cannot start {argv[0]!r}: {exc}\n")
        os._exit(127)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
