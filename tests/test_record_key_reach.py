"""The record key is out of the model's reach when the working directory holds it.

People run ``deputy`` from ``$HOME``, where the default record key lives
(``~/.local/state/deputy_shiny/record.key``). Attacked as a prompt-injected model would:
every file tool, through the whole engine (permission step 3) and called directly (the
tool's own check), by relative and absolute path, through a symlink planted in the
working directory, by walks (list, glob, grep); and sandboxed ``run_bash``/``run_python``
on a root server and on a normal user's server. None returns a byte of the key.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, Permissions, Sandbox, sandbox_unavailable_reason
from deputy_shiny._util.metadata import environment_secrets, validate_run_context
from deputy_shiny._util.redact import redact
from deputy_shiny.errors import RunContextError, SandboxUnavailableError, ToolInvocationError
from deputy_shiny.persistence import keys
from deputy_shiny.sandbox import prepare_workspace
from deputy_shiny.shiny import KitPersistence
from deputy_shiny.shiny._conversations import token_key
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import ToolContext, tool_context, tools_code, tools_file

from .test_sandbox_privileges import NORMAL_UID, run

KEY_DIR = Path(".local", "state", "deputy_shiny")


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fake ``$HOME`` holding the default record key (made as the server makes it),
    in /tmp so that another uid can be given it."""
    home = Path(tempfile.mkdtemp(prefix="deputy-home-", dir="/tmp")).resolve()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.delenv("DEPUTY_RECORD_KEY", raising=False)
    monkeypatch.setattr(keys, "_cache", {})
    keys.record_key()
    (home / "notes.txt").write_text("hello\n")
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def key_text(home: Path) -> str:
    return (home / KEY_DIR / "record.key").read_text().strip()


def leaked(home: Path, text: str) -> bool:
    """Any part of the key, or the key file listed (a denial may quote the path asked)."""
    key = key_text(home)
    listed = "record.key" in text and "server's own keys" not in text
    return key[:16] in text or key[-16:] in text or listed


ATTACKS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": ".local/state/deputy_shiny/record.key"}),
    ("read_file", {"path": "ABS/.local/state/deputy_shiny/record.key"}),
    ("read_file", {"path": "planted"}),  # a symlink in the working directory to the key
    ("read_markdown", {"path": ".local/state/deputy_shiny/record.key"}),
    ("grep_files", {"pattern": "[0-9a-f]{32}", "path": ".local"}),
    ("grep_files", {"pattern": ".", "path": ".local/state/deputy_shiny/record.key"}),
    ("grep_files", {"pattern": "[0-9a-f]{32}", "glob": ".*"}),
    ("glob_files", {"pattern": "**/*", "path": ".local"}),
    ("glob_files", {"pattern": ".local/**/*.key"}),
    ("list_files", {"path": ".local/state", "recursive": True, "include_hidden": True}),
    ("list_files", {"path": ".local/state/deputy_shiny"}),
    ("list_files", {"path": ".", "recursive": True, "include_hidden": True}),
    ("write_file", {"path": ".local/state/deputy_shiny/record.key", "content": "00" * 32}),
]


def resolved(arguments: dict[str, Any], home: Path) -> dict[str, Any]:
    return {
        k: v.replace("ABS", str(home)) if isinstance(v, str) else v for k, v in arguments.items()
    }


async def test_no_file_tool_reaches_the_key_through_the_engine(home: Path) -> None:
    (home / "planted").symlink_to(home / KEY_DIR / "record.key")
    before = key_text(home)
    calls = [
        ScriptedToolCall(name, resolved(arguments, home), id=f"c{i}")
        for i, (name, arguments) in enumerate(ATTACKS)
    ]
    agent = Agent(
        ScriptedModel([ScriptedReply(tool_calls=calls), "done"]),
        tools=tools_file(),
        working_dir=home,
        permissions=Permissions(mode="full"),
    )
    try:
        result = await agent.run_async("go")
    finally:
        agent.close()
    ends = [e for e in result.events if e.type == "tool_end"]
    assert len(ends) == len(ATTACKS)
    by_id = {e.call_id: str(e.output) for e in ends}
    outputs = {f"{c.name} {json.dumps(c.arguments)}": by_id[str(c.id)] for c in calls}
    assert {k: v for k, v in outputs.items() if leaked(home, v)} == {}
    assert key_text(home) == before  # and nothing overwrote it
    # The home directory itself stays usable: only the secret is out of reach.
    assert any("notes.txt" in v for v in outputs.values())


@pytest.mark.parametrize(("name", "arguments"), ATTACKS)
async def test_each_file_tool_refuses_the_key_on_its_own(
    home: Path, name: str, arguments: dict[str, Any]
) -> None:
    """Defence in depth: the tool itself, without the permission layer in front."""
    (home / "planted").symlink_to(home / KEY_DIR / "record.key")
    tool = next(t for t in tools_file() if t.name == name)
    context = ToolContext(working_dir=home, read_roots=(home,), write_roots=(home,))
    with tool_context(context):
        try:
            text = str(await tool.invoke(tool.parse_arguments(resolved(arguments, home))))
        except Exception as exc:  # a refusal is an error the model reads
            text = str(exc)
    assert not leaked(home, text), text


PROBE_BASH = "cat .local/state/deputy_shiny/record.key; ls -la .local/state/deputy_shiny; "
PROBE_BASH += "grep -r . .local 2>&1 | head; find . -name record.key"
PROBE_PYTHON = (
    "import pathlib\n"
    "for p in pathlib.Path('.').rglob('*'):\n"
    "    print(p)\n"
    "    try: print(p.read_text())\n"
    "    except Exception as e: print(type(e).__name__)\n"
)


@pytest.fixture
def sandboxed_home(home: Path) -> Path:
    assert sandbox_unavailable_reason() is None, sandbox_unavailable_reason()
    if os.geteuid() == 0:
        prepare_workspace(home)  # the sandbox user now owns the key file: only hiding helps
    return home


async def test_sandboxed_code_on_this_server_cannot_read_the_key(sandboxed_home: Path) -> None:
    home = sandboxed_home
    calls = [
        ScriptedToolCall("run_bash", {"command": PROBE_BASH}, id="b"),
        ScriptedToolCall("run_python", {"code": PROBE_PYTHON}, id="p"),
    ]
    agent = Agent(
        ScriptedModel([ScriptedReply(tool_calls=calls), "done"]),
        tools=tools_code(),
        working_dir=home,
        permissions=Permissions(run_bash=True, run_python=True),
    )
    try:
        result = await agent.run_async("go")
    finally:
        agent.close()
    outputs = [str(e.output) for e in result.events if e.type == "tool_end"]
    assert len(outputs) == 2 and "notes.txt" in outputs[1], outputs  # the code did run
    assert [o for o in outputs if key_text(home)[:16] in o] == []


def test_sandboxed_code_on_a_normal_users_server_cannot_read_the_key(home: Path) -> None:
    """As a normal user's server builds the sandbox (a user namespace, no cgroup), then
    started as that user, who owns the key file."""
    assert sandbox_unavailable_reason() is None, sandbox_unavailable_reason()
    if os.geteuid() != 0:  # already a normal user's server: the other test covers it
        return
    for path in [home, *home.rglob("*")]:
        os.lchown(path, NORMAL_UID, NORMAL_UID)
    out = run("normal", home, PROBE_BASH + "; cat notes.txt")
    assert "hello" in out, out  # the sandbox ran and saw the working directory
    assert key_text(home)[:16] not in out, out


def test_a_working_directory_inside_the_keys_folder_is_refused(home: Path) -> None:
    with pytest.raises(SandboxUnavailableError, match="record key"):
        Sandbox(kind="none").confine(["true"], home / KEY_DIR)


async def test_the_kits_records_folder_is_protected_too(tmp_path: Path) -> None:
    """The kit's records (its token key, every conversation) under a persistence root
    that an agent's working directory happens to hold."""
    token_key(KitPersistence(root=tmp_path / "kit"))
    context = ToolContext(working_dir=tmp_path, read_roots=(tmp_path,), write_roots=())
    tool = next(t for t in tools_file() if t.name == "read_file")
    with tool_context(context), pytest.raises(ToolInvocationError, match="server's own keys"):
        await tool.invoke(tool.parse_arguments({"path": "kit/records/.token-key"}))


def test_a_record_key_in_the_environment_counts_as_a_server_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DEPUTY_RECORD_KEY's name does not say "secret", but its value is one: refused in
    run_context and masked wherever the server's own keys are."""
    value = "ab" * 32
    monkeypatch.setenv("DEPUTY_RECORD_KEY", value)
    assert value in environment_secrets()
    with pytest.raises(RunContextError):
        validate_run_context({"note": f"key {value}"})
    assert value not in redact(f"the key is {value}")
