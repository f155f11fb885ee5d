"""The reference app starts with `shiny run` and serves its page on the demo model."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def app_url() -> Iterator[str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "DEPUTY_MODEL"}
    server = subprocess.Popen(
        [sys.executable, "-m", "shiny", "run", "app.py", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url, timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        "app did not start: "
                        + (server.stderr.read() if server.stderr else b"").decode()
                    ) from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_app_serves_the_chat_with_the_demo_banner(app_url: str) -> None:
    with urllib.request.urlopen(app_url, timeout=5) as response:
        page = response.read().decode()
    assert "Offline demo model." in page
    assert "not from an LLM" in page
    assert 'id="chat"' in page
    with urllib.request.urlopen(f"{app_url}/app.css", timeout=5) as response:
        assert response.status == 200
