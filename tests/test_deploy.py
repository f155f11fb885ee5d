"""A deploy as Posit Connect makes it: the deploy page's ``rsconnect write-manifest`` command,
run as written on a copy of the tracked files, bundles the app and the package and
nothing else; a fresh environment built from the written requirements alone runs
``app.py`` from the bundled files on the demo model, which answers over the websocket;
and the package builds a wheel that installs beside those requirements.

The environment is built with uv (rsconnect-python's own dependency): pip takes over a
minute for the same file here, uv a few seconds (its cache is reused across runs).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets

from deputy_shiny.models.demo import INTRO
from tests.test_deploy_files import deploy_command

ROOT = Path(__file__).resolve().parent.parent
# What the bundle is: the app, its UI pieces and static files, the package, and the
# requirements Connect installs (everything else in the tree stays out).
BUNDLE_TOP = {"app.py", "components", "www", "deputy_shiny", "requirements.txt"}
CHAT_INPUT = "chat-chat_user_input:shinychat.userInput"
# The environment of the app and of uv: no provider key (the demo model runs), nothing
# of this test run's Python (the fresh environment must stand on its own).
DROPPED = ("DEPUTY_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PYTHONPATH", "VIRTUAL_ENV")


def _env(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    # uv must never fetch a Python build: the fresh environment uses this one's.
    env.update(UV_PYTHON_DOWNLOADS="never", UV_NO_PROGRESS="1", **overrides)
    return env


def _run(argv: list[str], cwd: Path, timeout: float = 240) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{argv[:4]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _uv(*args: str, cwd: Path) -> str:
    return _run([sys.executable, "-m", "uv", *args], cwd)


def tracked_copy(destination: Path) -> Path:
    """The tracked files of this tree (as a clean clone has them) under ``destination``."""
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listing.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the work tree is gone
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


def developer_leftovers(tree: Path) -> None:
    """What ./scripts/test leaves in a working tree, which the bundle must leave out."""
    for name in (
        ".pytest_cache/v/cache/lastfailed",
        ".mypy_cache/3.11/app.data.json",
        ".ruff_cache/CACHEDIR.TAG",
        "deputy_shiny.egg-info/PKG-INFO",
        ".venv/bin/python",
    ):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text("")


def write_manifest(tree: Path) -> dict[str, object]:
    """Run the deploy page's write-manifest command, as written, in ``tree``; the manifest."""
    argv = deploy_command("rsconnect write-manifest shiny .")
    rsconnect = Path(sys.executable).parent / "rsconnect"
    _run([str(rsconnect), *argv[1:]], tree)
    manifest = json.loads((tree / "manifest.json").read_text())
    assert isinstance(manifest, dict)
    return manifest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def serve() -> Iterator[list[subprocess.Popen[bytes]]]:
    servers: list[subprocess.Popen[bytes]] = []
    yield servers
    for server in servers:
        server.terminate()
        server.wait(timeout=10)


def _wait_serving(url: str, server: subprocess.Popen[bytes], log: Path, within: float) -> str:
    deadline = time.monotonic() + within
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return str(response.read().decode())
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise AssertionError(
                    f"the deployed app did not start:\n{log.read_text()}"
                ) from None
            time.sleep(0.2)


async def first_reply(port: int, text: str) -> str:
    """Open a session as a browser does, send ``text`` to the chat, return the reply.

    The first reply waits for the app's litellm warm-up: in a fresh environment every
    module is compiled on first import (here 15 s after the page served at load 5, 40 s at
    load 11).
    """
    url = f"ws://127.0.0.1:{port}/websocket/"
    origin = f"http://127.0.0.1:{port}"
    async with (
        asyncio.timeout(180),
        websockets.connect(url, origin=websockets.Origin(origin), max_size=None) as ws,
    ):
        await ws.send(json.dumps({"method": "init", "data": {}}))
        message = {"method": "update", "data": {CHAT_INPUT: {"text": text, "attachments": []}}}
        await ws.send(json.dumps(message))
        reply = ""
        while True:
            raw = await ws.recv()
            raw = raw.decode() if isinstance(raw, bytes) else raw
            if "shinyChatMessage" not in raw:
                continue
            action = json.loads(raw)["custom"]["shinyChatMessage"].get("action", {})
            kind = action.get("type")
            content = str(action.get("content") or "")
            if kind == "chunk":
                reply = content if action.get("operation") == "replace" else reply + content
            elif kind == "message":
                reply = content
            if kind in ("chunk_end", "message") and reply:
                return reply


def test_the_documented_manifest_bundles_the_app_and_a_fresh_env_serves_it(
    tmp_path: Path, serve: list[subprocess.Popen[bytes]]
) -> None:
    timings: dict[str, float] = {}
    began = time.perf_counter()
    tree = tracked_copy(tmp_path / "clone")
    developer_leftovers(tree)
    manifest = write_manifest(tree)
    timings["manifest"] = time.perf_counter() - began

    # The bundle: the app and the package, none of the tests, benchmarks or tooling.
    files = manifest["files"]
    assert isinstance(files, dict)
    assert {name.split("/")[0] for name in files} == BUNDLE_TOP
    assert "deputy_shiny/shiny/www/deputy_shiny.js" in files and "app.py" in files
    # The package's own modules (about 230 now); a stray tree (a venv, node_modules) is thousands.
    assert len(files) < 400
    python = manifest["python"]
    assert isinstance(python, dict) and python["package_manager"]["package_file"] == (
        "requirements.txt"
    )
    assert manifest["environment"] == {"python": {"requires": "~=3.11.0"}}
    assert manifest["metadata"] == {"appmode": "python-shiny", "entrypoint": "app"}

    # What Connect unpacks: exactly the manifest's files.
    bundle = tmp_path / "bundle"
    for name in files:
        (bundle / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree / name, bundle / name)

    # A fresh environment from the written requirements alone.
    step = time.perf_counter()
    venv = tmp_path / "env"
    _uv("venv", "--quiet", "--python", sys.executable, str(venv), cwd=tmp_path)
    fresh = venv / "bin" / "python"
    _uv("pip", "install", "--quiet", "--python", str(fresh), "-r", "requirements.txt", cwd=bundle)
    timings["install"] = time.perf_counter() - step
    found = subprocess.run(
        [str(fresh), "-c", "import importlib.util as u; print(u.find_spec('deputy_shiny'))"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert found.stdout.strip() == "None"  # the app can only use the bundled package

    # Connect's start: `shiny run` of app.py in the bundle, no key: the demo model.
    step = time.perf_counter()
    port = _free_port()
    log = tmp_path / "app.log"
    with log.open("wb") as sink:  # a file, not a pipe: a full pipe would stall the app
        server = subprocess.Popen(
            [str(fresh), "-m", "shiny", "run", "app.py", "--port", str(port)],
            cwd=bundle,
            env=_env(DEPUTY_CONVERSATIONS_DIR=str(tmp_path / "conversations")),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    serve.append(server)
    page = _wait_serving(f"http://127.0.0.1:{port}/", server, log, within=180)
    timings["serving"] = time.perf_counter() - step
    assert 'id="chat-chat"' in page and "Offline demo model." in page
    reply = asyncio.run(first_reply(port, "hello"))
    assert reply.startswith(INTRO[:40]), reply[:200]
    timings["start and reply"] = time.perf_counter() - step

    # The package as a library: a wheel, with its static files, that installs beside
    # the requirements (nothing needs to change).
    step = time.perf_counter()
    _uv(
        "build",
        "--quiet",
        "--python",
        sys.executable,
        "--wheel",
        "--out-dir",
        str(tmp_path / "dist"),
        ".",
        cwd=tree,
    )
    (wheel,) = (tmp_path / "dist").glob("deputy_shiny-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "deputy_shiny/shiny/www/deputy_shiny.js" in names and "deputy_shiny/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "app.py"))]
    plan = _uv("pip", "install", "--dry-run", "--python", str(fresh), str(wheel), cwd=tmp_path)
    assert "Would install 1 package" in plan, plan
    timings["wheel"] = time.perf_counter() - step
    print("deploy test timings (s):", {k: round(v, 1) for k, v in timings.items()})
