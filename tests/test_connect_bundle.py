"""Your own app on Posit Connect: ``deputy connect-bundle`` readies a fresh Core app and a
fresh Express app, made outside this repository; ``rsconnect write-manifest`` bundles
each with the package; a fresh environment built from the written requirements alone
serves both, and each chat answers over the websocket.

The environment is built with uv, as ``tests/test_deploy.py`` builds the reference app's.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deputy_shiny.deploy import BLOCK_START, MARKER, connect_bundle
from deputy_shiny.errors import ConfigurationError
from deputy_shiny.models.demo import INTRO
from tests.test_deploy import _env, _free_port, _run, _uv, _wait_serving, first_reply, serve

__all__ = ["serve"]  # the fixture, shared with the reference app's deploy test

BIN = Path(sys.executable).parent

CORE_APP = """\
from shiny import App, Inputs, Outputs, Session, ui

from deputy_shiny import Agent, Permissions, tool_list_files, tool_write_file
from deputy_shiny.shiny import AgentChatContext, agent_chat_server, agent_chat_ui


def make_agent(ctx: AgentChatContext) -> Agent:
    return Agent(
        "deputy/demo",
        tools=[tool_list_files(), tool_write_file()],
        working_dir=ctx.working_dir,
        approval_handler=ctx.approval_handler,
        permissions=Permissions(approval_effects=["write"]),
    )


app_ui = ui.page_fillable(agent_chat_ui("chat"))


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent_chat_server("chat", make_agent)


app = App(app_ui, server)
"""

EXPRESS_APP = """\
from shiny.express import ui

from deputy_shiny import Agent, tool_list_files
from deputy_shiny.shiny import agent_chat_server, agent_chat_ui

ui.page_opts(title="My agent", fillable=True)
agent_chat_ui("chat")
agent_chat_server(
    "chat", lambda ctx: Agent("deputy/demo", tools=[tool_list_files()], **ctx.agent_options())
)
"""

# A developer's own requirements: a pin of their own (kept), and what `pip freeze` wrote
# for the package installed from a clone (dropped: the copy replaces it).
OWN_REQUIREMENTS = """\
# my app
htmltools==0.7.0
deputy_shiny @ file:///home/me/src/deputy_shiny
"""


def _bundle_from_manifest(app: Path, destination: Path) -> dict[str, object]:
    """The deploy page's write-manifest command in ``app``; copy what it names (what Connect
    unpacks) to ``destination``; the manifest."""
    _run([str(BIN / "rsconnect"), "write-manifest", "shiny", "."], app)
    manifest = json.loads((app / "manifest.json").read_text())
    files = manifest["files"]
    assert isinstance(files, dict)
    for name in files:
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(app / name, destination / name)
    return dict(manifest)


def test_a_core_and_an_express_app_of_your_own_deploy_from_their_requirements_alone(
    tmp_path: Path, serve: list[subprocess.Popen[bytes]]
) -> None:
    apps = {"core": CORE_APP, "express": EXPRESS_APP}
    bundles: dict[str, Path] = {}
    entrypoints: dict[str, str] = {}
    for kind, source in apps.items():
        app = tmp_path / "src" / kind
        app.mkdir(parents=True)
        (app / "app.py").write_text(source)
        if kind == "core":
            (app / "requirements.txt").write_text(OWN_REQUIREMENTS)
        said = _run([str(BIN / "deputy"), "connect-bundle", str(app)], tmp_path)
        assert "Copied deputy_shiny" in said and "rsconnect deploy shiny" in said
        assert "--entrypoint" not in said  # app:app would break an Express app on Connect
        python = f"{sys.version_info.major}.{sys.version_info.minor}"
        assert (app / ".python-version").read_text() == python + "\n"
        requirements = (app / "requirements.txt").read_text()
        assert "file://" not in requirements and "deputy_shiny @" not in requirements
        assert "\nlitellm==" in requirements and "\nshiny==" in requirements
        manifest = _bundle_from_manifest(app, bundles.setdefault(kind, tmp_path / "bundle" / kind))
        files = manifest["files"]
        assert isinstance(files, dict)
        assert "deputy_shiny/shiny/www/deputy_shiny.js" in files and "app.py" in files
        assert not [name for name in files if "__pycache__" in name]
        # What Connect runs: app.py's `app` (Core), or shiny's wrapper of app.py (Express).
        entrypoint = "app" if kind == "core" else "shiny.express.app:app_2e_py"
        assert manifest["metadata"] == {"appmode": "python-shiny", "entrypoint": entrypoint}
        python_wanted = f"~={sys.version_info.major}.{sys.version_info.minor}.0"
        assert manifest["environment"] == {"python": {"requires": python_wanted}}
        entrypoints[kind] = entrypoint if ":" in entrypoint else f"{entrypoint}:app"
    core_requirements = (tmp_path / "src" / "core" / "requirements.txt").read_text()
    assert core_requirements.startswith("# my app\nhtmltools==0.7.0\n")  # the app's own line

    # One fresh environment from the requirements alone (the same pins for both apps).
    venv = tmp_path / "env"
    _uv("venv", "--quiet", "--python", sys.executable, str(venv), cwd=tmp_path)
    fresh = venv / "bin" / "python"
    _uv("pip", "install", "--quiet", "--python", str(fresh), "-r", "requirements.txt",
        cwd=bundles["express"])  # fmt: skip
    _uv("pip", "install", "--quiet", "--python", str(fresh), "-r", "requirements.txt",
        cwd=bundles["core"])  # fmt: skip

    # Connect's start: `shiny run` of each manifest's entrypoint, no key: the demo model.
    ports = {}
    for kind, bundle in bundles.items():
        ports[kind] = port = _free_port()
        log = tmp_path / f"{kind}.log"
        with log.open("wb") as sink:
            server = subprocess.Popen(
                [str(fresh), "-m", "shiny", "run", entrypoints[kind], "--port", str(port)],
                cwd=bundle,
                env=_env(),
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        serve.append(server)
        page = _wait_serving(f"http://127.0.0.1:{port}/", server, log, within=180)
        assert 'id="chat-chat"' in page

    async def both() -> list[str]:
        return list(await asyncio.gather(*(first_reply(p, "hello") for p in ports.values())))

    for reply in asyncio.run(both()):
        assert reply.startswith(INTRO[:40]), reply[:200]


def test_the_bundle_never_overwrites_a_folder_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("")
    own = tmp_path / "deputy_shiny"
    own.mkdir()
    (own / "mine.py").write_text("x = 1\n")
    with pytest.raises(ConfigurationError, match="was not written by"):
        connect_bundle(tmp_path)
    assert (own / "mine.py").read_text() == "x = 1\n"
    with pytest.raises(ConfigurationError, match="no such folder"):
        connect_bundle(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigurationError, match="no app here"):
        connect_bundle(empty)


def test_running_it_again_replaces_its_own_copy_and_block(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("")
    (tmp_path / "requirements.txt").write_text("pandas==2.2.3\nshiny==1.8.0\n")
    first = connect_bundle(tmp_path)
    assert (tmp_path / "deputy_shiny" / MARKER).is_file()
    assert first.kept == ["shiny"]  # the app pins shiny itself: its line stays
    (tmp_path / "deputy_shiny" / "stale.py").write_text("")
    second = connect_bundle(tmp_path)
    assert not (tmp_path / "deputy_shiny" / "stale.py").exists()
    text = second.requirements.read_text()
    assert text.count(BLOCK_START) == 1 and text.startswith("pandas==2.2.3\nshiny==1.8.0\n")
    assert second.pinned == first.pinned
    assert not [line for line in first.pinned if line.startswith("shiny==")]
