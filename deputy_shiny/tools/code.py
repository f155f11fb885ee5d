"""Model-run code: a persistent Python session (``run_python``) and bash (``run_bash``).

Code a model writes is untrusted even when a person approved it, so both tools run it
through a :class:`~deputy_shiny.sandbox.Sandbox` (bubblewrap by default): the agent's
working directory read-write, the system and the Python runtime read-only, no network,
a scrubbed environment without the server's secrets, and nothing of other sessions.
Without bubblewrap a call is an error result naming the fix; pass
``Sandbox(kind="none")`` to run unconfined on purpose. Registering the tools is not
authorising them: the agent's permissions decide whether a call may run
(``run_python`` / ``run_bash`` flags).

``run_python`` keeps one Python process per agent (:class:`PythonSession`, held in the
agent's :class:`~deputy_shiny.tools.ToolState`), started on the agent's first call in
its working directory, inside its sandbox, with the same interpreter as the host
(``sys.executable -u``). One tool object shared by several agents gives each its own
session; a session stops when its agent is closed. Variables and imports survive
between calls. The code's stdout and stderr are captured from the process's own file
descriptors (so output of C extensions and child processes is captured too); requests
and replies travel on separate private pipes, so nothing the code prints can corrupt
them. The cell's last expression is shown by its ``repr``, as in a notebook.

Decisions:

* An exception raised by the code is an **error result** (the tool raises
  :class:`~deputy_shiny.errors.ToolInvocationError`, so ``tool_end.is_error`` is True
  and the model sees the traceback together with the output printed before it). The
  session keeps its state: what ran before the error stays defined.
* A non-zero exit status of a bash command is a **normal result** that reports the
  code (``grep`` and ``diff`` exit 1 without failing); a timeout is an error.
* A timeout, a cancelled call (the user pressed stop) or a session that died stops the
  whole process group at once; for ``run_python`` the state is lost and the next
  call starts a fresh process. ``bash`` commands run in their own process group, and
  whatever they leave behind in it is stopped when the call returns (start a service
  with ``setsid cmd > log 2>&1 &`` to keep it running).
* Output is capped at :data:`MAX_OUTPUT_CHARS`: the beginning and the end are kept,
  and a note says how much was cut. Timeouts are between 0 and :data:`MAX_TIMEOUT`
  seconds.
* The session process is stopped by :meth:`PythonSession.close` (the agent's
  ``close()``), when the session is garbage collected, and when the interpreter exits
  (``weakref.finalize``); it also exits by itself when its request pipe closes (the
  host died).

The I/O with the session uses ``loop.add_reader`` only for the duration of a call, so
a tool works from any event loop (``run_sync`` and pytest create several). POSIX only.

Examples:
    >>> t = tool_run_python()
    >>> t.name, tool_run_bash().name
    ('run_python', 'run_bash')
    >>> python_session(t).pid is None  # started lazily, on an agent's first call
    True
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._util.timeouts import timeout
from ..errors import InvalidToolError, ToolInvocationError
from ..sandbox import ConfinedCommand, Sandbox
from ._context import ToolState, current_tool_context
from ._tool import Tool, builtin_source, tool, tool_annotations

__all__ = [
    "MAX_OUTPUT_CHARS",
    "MAX_TIMEOUT",
    "PythonSession",
    "python_session",
    "tool_run_bash",
    "tool_run_python",
]

MAX_OUTPUT_CHARS = 30_000
"""The most characters of output a call returns (beginning and end kept)."""

MAX_TIMEOUT = 3600.0
"""The longest timeout, in seconds, a call may ask for."""

_STREAM_HEAD = 18_000  # bytes kept from the start of one output stream
_STREAM_TAIL = 9_000  # bytes kept from its end
_REPR_LIMIT = 10_000  # characters of the last expression's repr
_PIPE_GRACE = 0.25  # seconds a finished bash command's background children may hold the pipe
_READ_SIZE = 65_536

_CODE_ANNOTATIONS = tool_annotations(
    read_only_hint=False, destructive_hint=True, open_world_hint=True, idempotent_hint=False
)


# --------------------------------------------------------------------------- output


class _Capture:
    """Bytes of one output stream, bounded: the first and the last bytes, and a count."""

    def __init__(self, head: int = _STREAM_HEAD, tail: int = _STREAM_TAIL) -> None:
        self._head_limit = head
        self._tail_limit = tail
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > self._tail_limit:
                del self._tail[: len(self._tail) - self._tail_limit]

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        cut = self.total - len(self._head) - len(self._tail)
        if cut <= 0:
            return (self._head + self._tail).decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        return f"{head}\n[... {cut:,} bytes of output cut ...]\n{tail}"


def _clip(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Keep the first two thirds and the last third of ``limit`` characters of ``text``."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut:,} characters cut ...]\n{text[-tail:]}"


def _check_timeout(timeout: float) -> float:
    if not 0 < timeout <= MAX_TIMEOUT:
        raise ToolInvocationError(
            f"timeout must be more than 0 and at most {MAX_TIMEOUT:g} seconds, got {timeout!r}."
        )
    return float(timeout)


def _exit_status(returncode: int | None, confined: bool = False) -> str:
    if returncode is None:
        return "still running"
    if confined and 128 < returncode <= 128 + 64:
        returncode = 128 - returncode  # bubblewrap reports a signal death as 128 + signal
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _drain(fd: int, capture: _Capture) -> bool:
    """Read what a non-blocking pipe holds into ``capture``; False at end of file."""
    while True:
        try:
            data = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        capture.feed(data)


async def _wait_exit(proc: subprocess.Popen[bytes], seconds: float) -> bool:
    """Wait up to ``seconds`` for ``proc`` to exit (and reap it); False on timeout.

    Uses a pidfd on the event loop where the OS has them, else polls; no thread blocks.
    """
    if proc.poll() is not None:
        return True
    loop = asyncio.get_running_loop()
    try:
        pidfd = os.pidfd_open(proc.pid)  # safe: an unreaped child's pid cannot be reused
    except (AttributeError, OSError):
        pidfd = -1
    try:
        async with timeout(seconds):
            while proc.poll() is None:
                if pidfd < 0:
                    await asyncio.sleep(0.02)
                    continue
                ready: asyncio.Future[None] = loop.create_future()
                loop.add_reader(pidfd, _resolve, ready)
                try:
                    await ready
                finally:
                    loop.remove_reader(pidfd)
    except TimeoutError:
        return False
    finally:
        if pidfd >= 0:
            os.close(pidfd)
    return True


def _kill_group(pid: int) -> None:
    """SIGKILL every process in the process group led by ``pid`` (quietly if none is left)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# --------------------------------------------------------------------------- python driver

# The program the session process runs: ``python -u -c _DRIVER <reply fd> <repr limit>``.
# It keeps the request pipe (fd 0) and the reply pipe for itself, non-inheritable, and
# points fd 0 at /dev/null; fds 1 and 2 stay the output pipes the host reads. One JSON
# line in ({"code", "cell"}), one JSON line out ({"value", "error"}).
_DRIVER = r"""
import ast, builtins, json, linecache, os, sys, traceback, types


def _main():
    reply_fd, repr_limit = int(sys.argv[1]), int(sys.argv[2])
    os.set_inheritable(reply_fd, False)
    request_fd = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.argv = [""]
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(encoding="utf-8", errors="backslashreplace")
        except Exception:
            pass
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    namespace = module.__dict__
    with os.fdopen(request_fd, "rb") as requests:
        for line in requests:
            request = json.loads(line)
            reply = _run(request["code"], request["cell"], namespace, repr_limit)
            for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                try:
                    stream.flush()
                except Exception:
                    pass
            data = (json.dumps(reply) + "\n").encode()
            while data:
                data = data[os.write(reply_fd, data):]


def _run(code, cell, namespace, repr_limit):
    filename = "<cell %d>" % cell
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    try:
        tree = ast.parse(code, filename, "exec")
    except BaseException as exc:
        return {"value": None, "error": "".join(traceback.format_exception_only(exc))}
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    try:
        exec(compile(tree, filename, "exec"), namespace)
        if last is not None:
            value = eval(compile(last, filename, "eval"), namespace)
            if value is not None:
                namespace["_"] = value
                try:
                    text = repr(value)
                except BaseException as exc:
                    text = "<repr() failed: %s: %s>" % (type(exc).__name__, exc)
                if len(text) > repr_limit:
                    cut = len(text) - repr_limit
                    text = text[:repr_limit] + "\n[... %s characters of the repr cut ...]" % (
                        format(cut, ",")
                    )
                return {"value": text, "error": None}
    except BaseException as exc:
        return {"value": None, "error": _format_error(exc)}
    return {"value": None, "error": None}


def _format_error(exc):
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == _DRIVER_FILE:
        tb = tb.tb_next
    try:
        return "".join(traceback.format_exception(type(exc), exc, tb))
    except BaseException:
        return "%s: %s" % (type(exc).__name__, exc)


_DRIVER_FILE = _main.__code__.co_filename
_main()
"""


class _SessionGone(Exception):
    """The session process closed its reply pipe (it exited or was killed)."""


def _stop_process(proc: subprocess.Popen[bytes], reply_fd: int, confined: ConfinedCommand) -> None:
    """Kill the session's process group, reap the process and close the pipes."""
    _kill_group(proc.pid)
    confined.release()
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    with contextlib.suppress(OSError):
        os.close(reply_fd)


class PythonSession:
    """A persistent Python process that runs code cells; the state behind one ``run_python``.

    The process starts on the first :meth:`run`, in the working directory of that call's
    tool context, inside ``sandbox`` (default: ``Sandbox()``, bubblewrap), and lives
    until :meth:`close`, a timeout, a cancelled call, or garbage collection of the
    session (and so of its agent). After it stops, the next :meth:`run` starts a
    fresh one.

    Examples:
        >>> import asyncio
        >>> from deputy_shiny import Sandbox
        >>> session = PythonSession(Sandbox(kind="none"))
        >>> print(asyncio.run(session.run("x = 6 * 7\\nx")))
        [result]
        42
        >>> session.close()
    """

    def __init__(self, sandbox: Sandbox | None = None) -> None:
        self._sandbox = sandbox if sandbox is not None else Sandbox()
        self._proc: subprocess.Popen[bytes] | None = None
        self._reply_fd = -1
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._cells = 0
        self._lock: asyncio.Lock | None = None
        self._lock_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._cwd: Path | None = None

    @property
    def pid(self) -> int | None:
        """The process ID of the running session process, or None when none is running."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def cwd(self) -> Path | None:
        """The directory the running process was started in (None when none is running)."""
        return self._cwd if self.pid is not None else None

    def close(self) -> None:
        """Stop the process (and everything it started); the state is gone. Safe to repeat."""
        finalizer, self._finalizer = self._finalizer, None
        self._proc = None
        self._cwd = None
        if finalizer is not None:
            finalizer()

    def _start(self, cwd: Path) -> subprocess.Popen[bytes]:
        if not sys.executable:
            raise ToolInvocationError("run_python cannot find the Python interpreter.")
        reply_r, reply_w = os.pipe()
        try:
            confined = self._sandbox.confine(
                [sys.executable, "-u", "-c", _DRIVER, str(reply_w), str(_REPR_LIMIT)], cwd
            )
        except BaseException:
            os.close(reply_r)
            os.close(reply_w)
            raise
        try:
            proc = subprocess.Popen(
                confined.argv,
                cwd=confined.cwd,
                env=confined.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(reply_w, *confined.pass_fds),
                start_new_session=True,
            )
        except OSError as exc:
            os.close(reply_r)
            confined.release()
            raise ToolInvocationError(f"Could not start Python in {cwd}: {exc}") from None
        finally:
            os.close(reply_w)
            confined.started()
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        for fd in (reply_r, proc.stdin.fileno(), proc.stdout.fileno(), proc.stderr.fileno()):
            os.set_blocking(fd, False)
        self._proc = proc
        self._reply_fd = reply_r
        self._cwd = cwd
        self._finalizer = weakref.finalize(self, _stop_process, proc, reply_r, confined)
        return proc

    def _loop_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is None or self._lock_loop() is not loop:
            self._lock = asyncio.Lock()
            self._lock_loop = weakref.ref(loop)
        return self._lock

    async def run(self, code: str, timeout: float = 30) -> str:  # noqa: ASYNC109 (a tool argument)
        """Run Python code in the persistent session and return its output.

        Args:
            code: Python source to run, like a notebook cell. Variables, imports and
                functions persist between calls. If the last statement is an
                expression, its value is shown.
            timeout: Seconds to wait before stopping the session (its state is then lost).
        """
        timeout = _check_timeout(timeout)
        if not isinstance(code, str) or not code.strip():
            raise ToolInvocationError("code is empty: give the Python code to run.")
        async with self._loop_lock():
            return await self._run_locked(code, timeout)

    async def _run_locked(self, code: str, seconds: float) -> str:
        proc = self._proc
        fresh = ""
        if proc is not None and proc.poll() is not None:
            fresh = (
                f"(The previous Python session had stopped ({_exit_status(proc.returncode)}); "
                "this code ran in a fresh one.)\n"
            )
            self.close()
            proc = None
        if proc is None:
            proc = self._start(current_tool_context().working_dir)
        self._cells += 1
        request = json.dumps({"code": code, "cell": self._cells}).encode() + b"\n"
        stdout, stderr = _Capture(), _Capture()
        finished = False
        try:
            try:
                async with timeout(seconds):
                    reply = await _exchange(proc, self._reply_fd, request, stdout, stderr)
            except TimeoutError:
                self.close()
                message = (
                    f"Timed out after {seconds:g} s: the Python session was stopped and its "
                    "state (variables, imports) was lost. The next call starts a fresh "
                    "session.\n" + _sections(stdout, stderr)
                )
                raise ToolInvocationError(message.rstrip()) from None
            except _SessionGone:
                for _ in range(50):  # it is exiting: let it report its own status
                    if proc.poll() is not None:
                        break
                    await asyncio.sleep(0.01)
                self.close()
                message = (
                    f"The Python session ended while running the code "
                    f"({_exit_status(proc.returncode)}); its state was lost. The next call "
                    "starts a fresh session.\n" + _sections(stdout, stderr)
                )
                raise ToolInvocationError(message.rstrip()) from None
            finished = True
        finally:
            if not finished:  # cancelled (or an unexpected failure): stop it at once
                self.close()
        output = _sections(stdout, stderr, value=reply.get("value"))
        error = reply.get("error")
        if error:
            raise ToolInvocationError(
                _clip(
                    fresh
                    + output
                    + f"[error]\n{error.rstrip()}\n"
                    + "(The session keeps what ran before the error.)"
                )
            )
        return _clip(fresh + (output.rstrip("\n") or "(no output)"))


def _sections(stdout: _Capture, stderr: _Capture, value: str | None = None) -> str:
    parts = []
    for label, capture in (("stdout", stdout), ("stderr", stderr)):
        if capture.total:
            parts.append(f"[{label}]\n{capture.text().rstrip(chr(10))}\n")
    if value is not None:
        parts.append(f"[result]\n{value}\n")
    return _clip("".join(parts))


async def _exchange(
    proc: subprocess.Popen[bytes],
    reply_fd: int,
    request: bytes,
    stdout: _Capture,
    stderr: _Capture,
) -> dict[str, Any]:
    """Send one request and wait for its reply, capturing output meanwhile (any event loop)."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    loop = asyncio.get_running_loop()
    reply: asyncio.Future[bytes] = loop.create_future()
    buffer = bytearray()
    out_fd, err_fd, in_fd = proc.stdout.fileno(), proc.stderr.fileno(), proc.stdin.fileno()
    watched: list[int] = []

    def on_output(fd: int, capture: _Capture) -> None:
        if not _drain(fd, capture):
            loop.remove_reader(fd)

    def on_reply() -> None:
        try:
            data = os.read(reply_fd, _READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if reply.done():
            return
        if not data:
            reply.set_exception(_SessionGone())
            return
        buffer.extend(data)
        if b"\n" in buffer:
            reply.set_result(bytes(buffer[: buffer.index(b"\n")]))

    def watch(fd: int, callback: Callable[..., None], *args: Any) -> None:
        loop.add_reader(fd, callback, *args)
        watched.append(fd)

    try:
        watch(out_fd, on_output, out_fd, stdout)
        watch(err_fd, on_output, err_fd, stderr)
        watch(reply_fd, on_reply)
        await _write_all(loop, in_fd, request, reply)
        line = await reply
    finally:
        for fd in watched:
            loop.remove_reader(fd)
    # Output written before the reply is already in the pipes: collect it.
    _drain(out_fd, stdout)
    _drain(err_fd, stderr)
    try:
        decoded = json.loads(line)
    except ValueError:
        raise _SessionGone() from None
    return decoded if isinstance(decoded, dict) else {}


async def _write_all(
    loop: asyncio.AbstractEventLoop, fd: int, data: bytes, reply: asyncio.Future[bytes]
) -> None:
    """Write ``data`` to a non-blocking pipe without blocking the loop."""
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            written = 0
        except (BrokenPipeError, ConnectionResetError):
            await reply  # the reader reports how the session ended
            raise _SessionGone() from None
        view = view[written:]
        if view:
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_writer(fd, _resolve, ready)
            try:
                waiting: list[asyncio.Future[Any]] = [ready, reply]
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            finally:
                loop.remove_writer(fd)
                ready.cancel()
            if reply.done():
                reply.result()  # raises _SessionGone when the session died


class _RunPython:
    """The function behind one ``run_python`` tool: each calling agent gets its own session."""

    def __init__(self, sandbox: Sandbox | None) -> None:
        self.sandbox = sandbox

    def session(self, state: ToolState) -> PythonSession:
        return state.get(self, lambda: PythonSession(self.sandbox))

    async def run(self, code: str, timeout: float = 30) -> str:  # noqa: ASYNC109 (a tool argument)
        return await self.session(current_tool_context().state).run(code, timeout)

    # The tool's schema reads its argument descriptions from here: one text for both.
    run.__doc__ = PythonSession.run.__doc__


def python_session(t: Tool, state: ToolState | None = None) -> PythonSession:
    """The :class:`PythonSession` of a ``run_python`` tool for one agent (to read its pid).

    ``state`` is the agent's ``tool_state``; without it, the state of the calling tool
    context (outside an agent: the process's own).

    Examples:
        >>> python_session(tool_run_python()).pid is None
        True
    """
    owner = getattr(t.fn, "__self__", None)
    if not isinstance(owner, _RunPython):
        raise InvalidToolError(f"Tool {t.name!r} is not a run_python tool.")
    return owner.session(state if state is not None else current_tool_context().state)


def tool_run_python(sandbox: Sandbox | None = None) -> Tool:
    """A ``run_python`` tool: a persistent Python session per agent, inside ``sandbox``.

    Args:
        sandbox: Where the code runs (default ``Sandbox()``: bubblewrap, no network,
            a scrubbed environment). ``Sandbox(kind="none")`` runs it unconfined.

    Examples:
        >>> t = tool_run_python()
        >>> t.name, sorted(t.parameters["properties"])
        ('run_python', ['code', 'timeout'])
    """
    return tool(
        _RunPython(sandbox).run,
        name="run_python",
        description=(
            "Run Python code in a persistent Python session started in the working "
            "directory (a sandbox: the working directory is writable, there is no network "
            "unless the app allows it). Variables, imports and functions persist "
            "between calls, like notebook cells. Returns what the code printed (stdout, "
            "stderr) and the repr of the last expression; an exception returns an error "
            "with the traceback. On timeout the session is stopped and its state is lost."
        ),
        annotations=_CODE_ANNOTATIONS,
        source=builtin_source("code"),
    )


# --------------------------------------------------------------------------- bash


class _RunBash:
    """The function behind one ``run_bash`` tool (stateless: every call is a new process)."""

    def __init__(self, sandbox: Sandbox | None) -> None:
        self.sandbox = sandbox if sandbox is not None else Sandbox()

    async def run(self, command: str, timeout: float = 30) -> str:  # noqa: ASYNC109 (a tool argument)
        """Run a bash command in the working directory and return its output and exit code.

        Args:
            command: The bash command or script to run (``bash -c``); stdin is empty.
            timeout: Seconds to wait before stopping the command and every process it
                started.
        """
        timeout = _check_timeout(timeout)
        if not isinstance(command, str) or not command.strip():
            raise ToolInvocationError("command is empty: give the bash command to run.")
        confined = self.sandbox.confine(["bash", "-c", command], current_tool_context().working_dir)
        try:
            return await _run_confined(confined, timeout)
        finally:
            confined.release()


async def _run_confined(confined: ConfinedCommand, timeout: float) -> str:  # noqa: ASYNC109
    """Run a confined bash command to its end (or timeout) and report its output."""
    try:
        proc = subprocess.Popen(  # noqa: ASYNC220 (spawning does not block; waiting is async)
            confined.argv,
            cwd=confined.cwd,
            env=confined.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=confined.pass_fds,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolInvocationError(f"Could not start bash in {confined.cwd}: {exc}") from None
    finally:
        confined.started()
    assert proc.stdout is not None
    loop = asyncio.get_running_loop()
    output = _Capture()
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    eof: asyncio.Future[None] = loop.create_future()

    def on_output() -> None:
        if not _drain(fd, output):
            loop.remove_reader(fd)
            if not eof.done():
                eof.set_result(None)

    timed_out = held_open = False
    try:
        loop.add_reader(fd, on_output)
        timed_out = not await _wait_exit(proc, timeout)
        if not timed_out:
            # bash has exited; background children may still hold the output pipe.
            await asyncio.wait([eof], timeout=_PIPE_GRACE)
            held_open = not eof.done()
    finally:
        loop.remove_reader(fd)
        eof.cancel()
        _kill_group(proc.pid)  # whatever is left: on timeout, cancel, or finished
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2)  # killed: this takes a moment at most
        _drain(fd, output)
        proc.stdout.close()
    text = output.text().rstrip("\n")
    if timed_out:
        raise ToolInvocationError(
            _clip(
                f"The command timed out after {timeout:g} s and was stopped, with every "
                "process it started." + (f"\nOutput before the timeout:\n{text}" if text else "")
            )
        )
    notes = [f"[{_exit_status(proc.returncode, confined.bwrap)}]"]
    if held_open:
        notes.append(
            "[background processes still held the output open after the command finished; "
            "they were stopped]"
        )
    return _clip((text or "(no output)") + "\n" + "\n".join(notes))


def tool_run_bash(sandbox: Sandbox | None = None) -> Tool:
    """A ``run_bash`` tool: ``bash -c`` commands in the working directory, inside ``sandbox``.

    Args:
        sandbox: Where the commands run (default ``Sandbox()``: bubblewrap, no network,
            a scrubbed environment). ``Sandbox(kind="none")`` runs them unconfined.

    Examples:
        >>> t = tool_run_bash()
        >>> t.name, t.parameters["required"]
        ('run_bash', ['command'])
    """
    return tool(
        _RunBash(sandbox).run,
        name="run_bash",
        description=(
            "Run a bash command in the working directory (bash -c, stdin empty; a "
            "sandbox: the working directory is writable, there is no network unless the "
            "app allows it). Returns the combined stdout and stderr and the exit code. "
            "Processes the command leaves running in the background are stopped when it "
            "returns; on timeout the command and everything it started are stopped."
        ),
        annotations=_CODE_ANNOTATIONS,
        source=builtin_source("code"),
    )
