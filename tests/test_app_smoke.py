"""The reference app starts with `shiny run` and serves its page: the chat, the sidebar
pieces, the static files, and the demo banner whenever the demo model runs."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets

ROOT = Path(__file__).resolve().parent.parent
KEY_VARIABLES = ("DEPUTY_MODEL", "OPENAI_API_KEY")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


@pytest.fixture
def start_app() -> Iterator[Callable[..., str]]:
    """Start app.py with `shiny run` and these environment overrides; return its URL."""
    servers: list[subprocess.Popen[bytes]] = []

    def start(**overrides: str) -> str:
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
        env.update(overrides)
        server = subprocess.Popen(
            [sys.executable, "-m", "shiny", "run", "app.py", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        servers.append(server)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url, timeout=1).close()
                return url
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    raise AssertionError(
                        "app did not start: "
                        + (server.stderr.read() if server.stderr else b"").decode()
                    ) from None
                time.sleep(0.2)

    yield start
    for server in servers:
        server.terminate()
        server.wait(timeout=10)


def _wait_for_page(url: str, *needles: str, within: float = 30.0) -> str:
    """The page once it contains every needle (the model check runs in the background)."""
    deadline = time.monotonic() + within
    while True:
        page = _get(url)
        if all(n in page for n in needles) or time.monotonic() > deadline:
            return page
        time.sleep(0.25)


def test_app_serves_the_chat_sidebar_and_demo_banner(start_app: Callable[..., str]) -> None:
    url = start_app()
    page = _get(url)
    # The banner is in the page itself, before any JavaScript runs.
    assert "Offline demo model." in page
    assert "not from an LLM" in page
    # The chat (the kit's module "chat"), with its stop button enabled.
    assert 'id="chat-chat"' in page
    # The sidebar: model in use, permission mode, workspace, usage meter.
    assert 'id="sidebar"' in page
    assert 'id="model-info"' in page and '<code class="deputy-model-name">deputy/demo' in page
    assert 'id="mode-mode"' in page and "Permission mode" in page
    assert 'id="workspace-files"' in page and ">Workspace<" in page
    assert 'id="usage-meter"' in page and ">Usage<" in page
    assert "Shell commands run in a sandbox" in page  # bubblewrap is installed here
    for asset in ("app.css", "favicon.svg"):
        with urllib.request.urlopen(f"{url}/{asset}", timeout=5) as response:
            assert response.status == 200


def test_a_model_without_its_api_key_falls_back_to_the_demo(
    start_app: Callable[..., str],
) -> None:
    url = start_app(DEPUTY_MODEL="openai/gpt-4.1-mini")
    page = _wait_for_page(url, "Offline demo model.")
    assert "DEPUTY_MODEL is openai/gpt-4.1-mini, but OPENAI_API_KEY is not set" in page
    assert '<code class="deputy-model-name">deputy/demo' in page


def test_a_model_with_its_api_key_is_used(start_app: Callable[..., str]) -> None:
    url = start_app(DEPUTY_MODEL="openai/gpt-4.1-mini", OPENAI_API_KEY="sk-test-not-real")
    page = _wait_for_page(url, "Through litellm")
    assert '<code class="deputy-model-name">openai/gpt-4.1-mini' in page
    assert "Offline demo model." not in page


def test_without_bubblewrap_the_app_starts_and_leaves_bash_out(
    start_app: Callable[..., str], tmp_path: Path
) -> None:
    # A PATH with no bwrap on it: the app must still start, say why bash is off, and
    # never fall back to running commands unconfined.
    url = start_app(PATH=str(tmp_path))
    page = _get(url)
    assert "Shell commands are off on this server" in page
    assert "apt-get install bubblewrap" in page
    assert "Shell commands run in a sandbox" not in page
    script = (
        "import app\n"
        "import pathlib, tempfile\n"
        "from deputy_shiny.shiny import AgentChatContext, SessionMcp\n"
        "ctx = AgentChatContext(session_id='s', working_dir=pathlib.Path(tempfile.mkdtemp()),"
        " ask_user=lambda questions, context: [], approval_handler=None, mcp=SessionMcp(None))\n"
        "print(sorted(app.build_agent(ctx, 'deputy/demo').get_tools()))"
    )
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    env["PATH"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "run_bash" not in done.stdout and "write_file" in done.stdout


async def _first_values(url: str, init: dict[str, Any]) -> dict[str, Any]:
    """The output values a websocket session (Shiny's protocol) has once its usage meter
    (shown) rendered: the outputs that exist at start render in that same flush."""
    ws_url = url.replace("http://", "ws://") + "/websocket/"
    async with websockets.connect(ws_url, max_size=None) as ws:
        shown = {".clientdata_output_usage-meter_hidden": False, **init}
        await ws.send(json.dumps({"method": "init", "data": shown}))
        values: dict[str, Any] = {}
        async with asyncio.timeout(60):
            while "usage-meter" not in values:
                values.update(json.loads(await ws.recv()).get("values", {}))
        return values


def test_a_page_built_after_the_model_check_costs_sessions_nothing_to_follow_it(
    start_app: Callable[..., str],
) -> None:
    # Once the check has settled, the page shows the model as plain markup and a
    # session keeps no outputs for it (an idle session's memory: benchmarks/idle_memory.py).
    url = start_app()
    page = _wait_for_page(url, '<div id="banner">')
    assert '<div id="banner">' in page and "Offline demo model." in page
    assert '<div id="model-info">' in page
    assert '<code class="deputy-model-name">deputy/demo' in page
    values = asyncio.run(_first_values(url, {}))
    assert "banner" not in values and "model-info" not in values
    # A page built while the check ran has the outputs, and its browser says so as the
    # session starts: that session still follows the check to the end.
    pending_page = {
        ".clientdata_output_banner_hidden": False,
        ".clientdata_output_model-info_hidden": False,
    }
    values = asyncio.run(_first_values(url, pending_page))
    assert "Offline demo model." in values["banner"]["html"]
    assert "deputy/demo" in values["model-info"]["html"]
