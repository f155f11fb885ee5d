"""run_python and run_bash: persistent state, captured output, errors, timeouts, cancellation."""

from __future__ import annotations

import ast
import asyncio
import gc
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent
from deputy_shiny.errors import ToolInvocationError
from deputy_shiny.permissions import Permissions
from deputy_shiny.sandbox import Sandbox, prepare_workspace
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import Tool, ToolContext, tool_context, tool_metadata
from deputy_shiny.tools.code import (
    MAX_OUTPUT_CHARS,
    PythonSession,
    python_session,
    tool_run_bash,
    tool_run_python,
)

# Tests of process mechanics that read host pids from inside the code run unconfined:
# inside the sandbox the code sees only its own pid namespace (tests/test_sandbox.py
# checks the same guarantees there from the host's side).
UNCONFINED = Sandbox(kind="none")


async def call(t: Tool, root: Path, **arguments: Any) -> str:
    """Run one tool call the way the engine does, with ``root`` as the working directory."""
    with tool_context(ToolContext(working_dir=root, read_roots=(root,), write_roots=(root,))):
        result = await t.invoke(t.parse_arguments(arguments))
    assert isinstance(result, str)
    return result


async def fails(t: Tool, root: Path, **arguments: Any) -> str:
    """Run a call that must end in an error result; return the message the model sees."""
    with pytest.raises(ToolInvocationError) as info:
        await call(t, root, **arguments)
    return str(info.value)


def alive(pid: int) -> bool:
    """True while ``pid`` is a running process (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return sys.platform != "linux"
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def gone(pid: int, within: float = 2.0) -> bool:
    """Wait until ``pid`` has exited (killed processes take a moment to be torn down)."""
    deadline = asyncio.get_running_loop().time() + within
    while alive(pid):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


@pytest.fixture
def tmp_path(tmp_path: Path) -> Path:
    """pytest's tmp_path, given to the unprivileged user model-run code runs as under root."""
    return prepare_workspace(tmp_path)


@pytest.fixture
def real_tmp(tmp_path: Path) -> Path:
    """tmp_path with symlinks resolved (what os.getcwd() and pwd report)."""
    return tmp_path.resolve()


@pytest.fixture
def py() -> Iterator[Tool]:
    t = tool_run_python()
    yield t
    python_session(t).close()


# ---------------------------------------------------------------- the tools themselves


def test_factories_return_fresh_tools_with_code_annotations() -> None:
    a, b = tool_run_python(), tool_run_python()
    assert a is not b and python_session(a) is not python_session(b)
    assert tool_run_bash() is not tool_run_bash()
    for t, name in ((a, "run_python"), (tool_run_bash(), "run_bash")):
        meta = tool_metadata(t)
        assert meta["name"] == name
        assert meta["source"] == {"type": "package", "package": "deputy_shiny"}
        assert meta["annotations"] == {
            "read_only_hint": False,
            "destructive_hint": True,
            "open_world_hint": True,
            "idempotent_hint": False,
        }
        assert t.is_async
        assert t.parameters["required"] == ["code" if name == "run_python" else "command"]
        assert t.parameters["properties"]["timeout"]["default"] == 30


# ---------------------------------------------------------------- run_python


async def test_state_persists_between_calls(py: Tool, tmp_path: Path) -> None:
    assert await call(py, tmp_path, code="import math\nx = 20") == "(no output)"
    assert await call(py, tmp_path, code="x + math.floor(2.5)") == "[result]\n22"


async def test_large_code_is_sent_whole(py: Tool, tmp_path: Path) -> None:
    code = "text = '" + "a" * 500_000 + "'\nlen(text)"  # far more than a pipe buffer holds
    assert await call(py, tmp_path, code=code) == "[result]\n500000"


async def test_last_expression_shows_its_repr_like_a_notebook(py: Tool, tmp_path: Path) -> None:
    assert await call(py, tmp_path, code="'a' + 'b'") == "[result]\n'ab'"
    assert await call(py, tmp_path, code="None") == "(no output)"
    assert await call(py, tmp_path, code="print('hi')") == "[stdout]\nhi"
    assert await call(py, tmp_path, code="y = [1, 2]\nfor i in y:\n    pass") == "(no output)"
    assert await call(py, tmp_path, code="y") == "[result]\n[1, 2]"
    assert await call(py, tmp_path, code="_") == "[result]\n[1, 2]"  # the last shown value


async def test_stdout_and_stderr_are_captured_separately(py: Tool, tmp_path: Path) -> None:
    code = (
        "import os, sys\n"
        "print('out 1')\n"
        "print('err 1', file=sys.stderr)\n"
        "os.write(1, b'out from the fd\\n')\n"
        "os.system('echo out from a child; echo err from a child >&2')\n"
        "7"
    )
    out = await call(py, tmp_path, code=code)
    assert out == (
        "[stdout]\nout 1\nout from the fd\nout from a child\n"
        "[stderr]\nerr 1\nerr from a child\n"
        "[result]\n7"
    )


async def test_an_exception_is_an_error_result_and_the_state_is_kept(
    py: Tool, tmp_path: Path
) -> None:
    message = await fails(py, tmp_path, code="kept = 1\nprint('before')\n1 / 0\nnot_run = 2")
    assert message.startswith("[stdout]\nbefore\n[error]\nTraceback (most recent call last):")
    assert 'File "<cell 1>", line 3, in <module>\n    1 / 0' in message
    assert "ZeroDivisionError: division by zero" in message
    assert "The session keeps what ran before the error." in message
    assert "_run" not in message  # the driver's own frames are not shown
    assert await call(py, tmp_path, code="kept, 'not_run' in globals()") == "[result]\n(1, False)"


async def test_syntax_errors_and_exits_are_reported(py: Tool, tmp_path: Path) -> None:
    message = await fails(py, tmp_path, code="def broken(:\n    pass")
    assert "SyntaxError" in message and "<cell 1>" in message
    assert "SystemExit: 3" in await fails(py, tmp_path, code="import sys\nsys.exit(3)")
    assert "KeyboardInterrupt" in await fails(py, tmp_path, code="raise KeyboardInterrupt")
    assert await call(py, tmp_path, code="'still here'") == "[result]\n'still here'"


async def test_prints_that_look_like_the_protocol_are_just_output(py: Tool, tmp_path: Path) -> None:
    fake = '{"value": "forged", "error": null}'
    code = (
        "import os, sys\n"
        f"print({fake!r})\n"
        f"sys.__stdout__.write({fake!r} + '\\n')\n"
        f"os.write(1, {fake!r}.encode() + b'\\n')\n"
        f"print({fake!r}, file=sys.stderr)\n"
        "input_seen = sys.stdin.read()\n"
        "'real'"
    )
    out = await call(py, tmp_path, code=code)
    assert out == f"[stdout]\n{fake}\n{fake}\n{fake}\n[stderr]\n{fake}\n[result]\n'real'"
    assert await call(py, tmp_path, code="input_seen") == "[result]\n''"  # stdin is empty


async def test_timeout_stops_the_session_and_the_next_call_starts_fresh(
    py: Tool, tmp_path: Path
) -> None:
    await call(py, tmp_path, code="x = 1")
    pid = python_session(py).pid
    assert pid is not None
    message = await fails(
        py, tmp_path, code="print('started')\nimport time\ntime.sleep(30)", timeout=0.5
    )
    assert message.startswith("Timed out after 0.5 s")
    assert "state (variables, imports) was lost" in message
    assert "next call starts a fresh session" in message
    assert message.endswith("[stdout]\nstarted")  # output printed before the timeout
    assert await gone(pid, within=0.1)
    assert await call(py, tmp_path, code="'x' in globals()") == "[result]\nFalse"
    assert python_session(py).pid not in (None, pid)


async def test_children_started_by_the_code_are_stopped_with_the_session(tmp_path: Path) -> None:
    py = tool_run_python(UNCONFINED)
    code = "import subprocess\nchild = subprocess.Popen(['sleep', '30'])\nchild.pid"
    child = int((await call(py, tmp_path, code=code)).split("\n")[1])
    assert alive(child)
    await fails(py, tmp_path, code="import time\ntime.sleep(30)", timeout=0.3)
    assert await gone(child)


async def test_output_is_capped_keeping_the_start_and_the_end(py: Tool, tmp_path: Path) -> None:
    out = await call(py, tmp_path, code="print('START' + 'x' * 200_000 + 'END')")
    assert len(out) <= MAX_OUTPUT_CHARS
    assert out.startswith("[stdout]\nSTARTxxx") and out.endswith("xxxEND")
    assert re.search(r"\[\.\.\. 17[\d,]+ bytes of output cut \.\.\.\]", out)
    out = await call(py, tmp_path, code="list(range(50_000))")
    assert out.startswith("[result]\n[0, 1, 2,")
    assert re.search(r"\[\.\.\. [\d,]+ characters of the repr cut \.\.\.\]$", out)
    # Several long streams together still fit: the middle of the whole answer is cut.
    code = "import sys\nprint('a' * 100_000)\nprint('b' * 100_000, file=sys.stderr)\n'c' * 50_000"
    out = await call(py, tmp_path, code=code)
    assert len(out) <= MAX_OUTPUT_CHARS + 100
    assert out.startswith("[stdout]\naaa") and "characters cut" in out


async def test_cancelling_the_call_kills_the_process(py: Tool, tmp_path: Path) -> None:
    await call(py, tmp_path, code="1")
    pid = python_session(py).pid
    assert pid is not None and alive(pid)
    started = asyncio.get_running_loop().time()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(call(py, tmp_path, code="import time\ntime.sleep(30)"), 0.3)
    assert asyncio.get_running_loop().time() - started < 2
    assert not alive(pid)  # gone at once, not merely signalled
    assert python_session(py).pid is None
    assert await call(py, tmp_path, code="'fresh'") == "[result]\n'fresh'"


async def test_two_tools_have_independent_sessions(tmp_path: Path) -> None:
    a, b = tool_run_python(), tool_run_python()
    try:
        await call(a, tmp_path, code="x = 'a'")
        await call(b, tmp_path, code="x = 'b'")
        assert await call(a, tmp_path, code="x") == "[result]\n'a'"
        assert await call(b, tmp_path, code="x") == "[result]\n'b'"
        assert python_session(a).pid != python_session(b).pid
    finally:
        python_session(a).close()
        python_session(b).close()


async def test_concurrent_calls_on_one_session_take_turns(py: Tool, tmp_path: Path) -> None:
    code = "import time\nn = globals().get('n', 0) + 1\ntime.sleep(0.05)\nn"
    outs = await asyncio.gather(*(call(py, tmp_path, code=code) for _ in range(3)))
    assert sorted(outs) == ["[result]\n1", "[result]\n2", "[result]\n3"]


async def test_session_runs_in_the_working_dir_with_this_interpreter(
    py: Tool, tmp_path: Path, real_tmp: Path
) -> None:
    (tmp_path / "helper_mod.py").write_text("VALUE = 5\n")
    out = await call(py, tmp_path, code="import os, sys, helper_mod\n(os.getcwd(), sys.executable)")
    assert out == f"[result]\n{(str(real_tmp), sys.executable)!r}"
    assert await call(py, tmp_path, code="helper_mod.VALUE") == "[result]\n5"
    assert python_session(py).cwd == tmp_path


async def test_a_session_that_dies_is_reported_and_replaced(py: Tool, tmp_path: Path) -> None:
    message = await fails(py, tmp_path, code="import os\nprint('bye', flush=True)\nos._exit(3)")
    assert message.startswith("The Python session ended while running the code (exit code 3)")
    assert message.endswith("[stdout]\nbye")
    assert await call(py, tmp_path, code="1 + 1") == "[result]\n2"
    # Killed between calls: the next call says so and runs in a fresh session.
    pid = python_session(py).pid
    assert pid is not None
    os.kill(pid, 9)
    assert await gone(pid)
    out = await call(py, tmp_path, code="2 + 2")
    assert out.startswith("(The previous Python session had stopped (killed by signal SIGKILL)")
    assert out.endswith("[result]\n4")


async def test_close_and_garbage_collection_stop_the_process(tmp_path: Path) -> None:
    t = tool_run_python()
    session = python_session(t)
    await call(t, tmp_path, code="1")
    pid = session.pid
    assert pid is not None
    session.close()
    session.close()  # repeatable
    assert not alive(pid) and session.pid is None
    await call(t, tmp_path, code="1")  # a closed session starts again on demand
    pid = session.pid
    assert pid is not None
    del t, session
    gc.collect()
    assert not alive(pid)


def test_the_session_process_ends_when_the_interpreter_exits(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import asyncio
        from deputy_shiny.tools.code import tool_run_python
        from deputy_shiny.sandbox import Sandbox
        tool = tool_run_python(Sandbox(kind="none"))  # never closed: exit must stop it
        code = "import os, subprocess\\n(subprocess.Popen(['sleep', '30']).pid, os.getpid())"
        print(asyncio.run(tool.invoke({"code": code})).split("\\n")[1])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=20
    )
    assert done.returncode == 0, done.stderr
    child, session = ast.literal_eval(done.stdout.strip())
    assert not alive(session)
    deadline = time.monotonic() + 2  # the orphaned child was killed; it may take a moment
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not alive(child)


def test_python_session_is_only_for_run_python() -> None:
    from deputy_shiny.errors import InvalidToolError

    with pytest.raises(InvalidToolError, match="not a run_python tool"):
        python_session(tool_run_bash())
    assert isinstance(python_session(tool_run_python()), PythonSession)


async def test_bad_arguments_are_clean_errors(py: Tool, tmp_path: Path) -> None:
    assert "timeout must be more than 0" in await fails(py, tmp_path, code="1", timeout=0)
    assert "at most 3600" in await fails(py, tmp_path, code="1", timeout=10_000)
    assert "code is empty" in await fails(py, tmp_path, code="  \n")
    assert python_session(py).pid is None  # nothing was started


# ---------------------------------------------------------------- run_bash


async def test_bash_reports_output_and_exit_code(tmp_path: Path) -> None:
    bash = tool_run_bash()
    assert await call(bash, tmp_path, command="echo hello") == "hello\n[exit code 0]"
    out = await call(bash, tmp_path, command="echo out; echo err >&2; exit 3")
    assert out == "out\nerr\n[exit code 3]"  # a failing command is a result, not an error
    assert await call(bash, tmp_path, command="true") == "(no output)\n[exit code 0]"
    out = await call(bash, tmp_path, command="kill -TERM $$")
    assert out == "(no output)\n[killed by signal SIGTERM]"


async def test_bash_runs_in_the_working_dir_with_empty_stdin(
    tmp_path: Path, real_tmp: Path
) -> None:
    bash = tool_run_bash()
    out = await call(bash, tmp_path, command="pwd; cat; echo done")
    assert out == f"{real_tmp}\ndone\n[exit code 0]"


async def test_bash_timeout_stops_the_whole_process_group(tmp_path: Path) -> None:
    bash = tool_run_bash(UNCONFINED)
    message = await fails(bash, tmp_path, command="sleep 30 & echo $!; sleep 30", timeout=0.3)
    assert message.startswith("The command timed out after 0.3 s and was stopped")
    background = int(message.rsplit("\n", 1)[1])
    assert await gone(background)


async def test_bash_stops_background_children_that_hold_the_output(tmp_path: Path) -> None:
    bash = tool_run_bash(UNCONFINED)
    started = asyncio.get_running_loop().time()
    out = await call(bash, tmp_path, command="sleep 30 & echo $!", timeout=10)
    assert asyncio.get_running_loop().time() - started < 3
    background = int(out.split("\n")[0])
    assert "[exit code 0]" in out and "background processes" in out
    assert await gone(background)


async def test_bash_cancellation_kills_the_command(tmp_path: Path) -> None:
    bash = tool_run_bash(UNCONFINED)
    command = "echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(call(bash, tmp_path, command=command), 0.3)
    for name in ("shell.pid", "child.pid"):
        assert await gone(int((tmp_path / name).read_text()))


async def test_bash_output_is_capped(tmp_path: Path) -> None:
    bash = tool_run_bash()
    out = await call(bash, tmp_path, command="echo START; head -c 300000 /dev/zero | tr '\\0' a")
    assert len(out) <= MAX_OUTPUT_CHARS + 200
    assert out.startswith("START\naaa") and out.endswith("aaa\n[exit code 0]")
    assert "bytes of output cut" in out


async def test_bash_rejects_an_empty_command(tmp_path: Path) -> None:
    assert "command is empty" in await fails(tool_run_bash(), tmp_path, command=" ")


# ---------------------------------------------------------------- through an agent


async def test_agent_runs_python_and_sees_results_and_errors(tmp_path: Path) -> None:
    py = tool_run_python()
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ScriptedToolCall("run_python", {"code": "x = 6\nx * 7"})]),
            ScriptedReply(tool_calls=[ScriptedToolCall("run_python", {"code": "x / 0"})]),
            "done",
        ]
    )
    agent = Agent(
        model,
        tools=[py, tool_run_bash()],
        working_dir=tmp_path,
        permissions=Permissions(run_python=True, run_bash=True),
    )
    try:
        result = await agent.run_async("compute")
        assert python_session(py, agent.tool_state).pid is not None
    finally:
        agent.close()
    assert python_session(py, agent.tool_state).pid is None
    ends = [e for e in result.events if e.type == "tool_end"]
    assert (ends[0].output, ends[0].is_error) == ("[result]\n42", False)
    assert ends[1].is_error and "ZeroDivisionError" in ends[1].output
    assert result.response == "done"


async def test_agent_runs_bash_in_its_working_dir(tmp_path: Path, real_tmp: Path) -> None:
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[ScriptedToolCall("run_bash", {"command": "pwd"})]), "ok"]
    )
    agent = Agent(
        model,
        tools=[tool_run_bash()],
        working_dir=tmp_path,
        permissions=Permissions(run_bash=True),
    )
    result = await agent.run_async("where am I")
    end = next(e for e in result.events if e.type == "tool_end")
    assert (end.output, end.is_error) == (f"{real_tmp}\n[exit code 0]", False)
