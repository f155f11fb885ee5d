"""The kit warms litellm up as the app starts: no app has to call warm_up()."""

from __future__ import annotations

import subprocess
import sys

from tests.test_warm_up import python

CHECK = """
import sys, time
import deputy_shiny.shiny as kit
assert 'litellm' not in sys.modules, 'importing the kit must stay cheap'
{build}
deadline = time.monotonic() + 120  # a cold import on a busy CI machine
while 'litellm' not in sys.modules or kit._warm._thread.is_alive():
    assert time.monotonic() < deadline, 'litellm was not imported in the background'
    time.sleep(0.05)
from deputy_shiny.models import _litellm
assert _litellm._module is not None  # imported through the kit's configuration
print(kit._warm._thread.name, kit._warm.warm_up_in_background() is kit._warm._thread)
"""


def run(build: str) -> str:
    code = CHECK.replace("{build}", build)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_building_the_chat_ui_imports_litellm_in_a_worker_thread() -> None:
    # No model request and no warm_up() call: the UI alone, as a static app.py builds it.
    assert run("kit.agent_chat_ui('chat')") == "deputy-shiny-warm-up True"


def test_an_express_app_warms_up_at_its_first_session() -> None:
    # Express builds no UI before a session: the server binding starts it (a stub
    # session, as Shiny makes when it renders an Express app's UI).
    build = (
        "from shiny.session import session_context\n"
        "from shiny.express._stub_session import ExpressStubSession\n"
        "with session_context(ExpressStubSession()):\n"
        "    kit.agent_chat_server('chat', agent_factory=lambda ctx: None)\n"
    )
    assert run(build) == "deputy-shiny-warm-up True"


def test_an_app_module_serves_only_once_warm() -> None:
    # Built as app.py is imported (no event loop running), the UI returns once the
    # warm-up is done, so shiny run serves a process whose first reply is warm. Built on
    # a running loop (a UI function called per request) it only starts the warm-up.
    code = (
        "import asyncio, sys\n"
        "import deputy_shiny.shiny as kit\n"
        "async def per_request():\n"
        "    kit.agent_chat_ui('chat')\n"
        "    return kit._warm._thread.is_alive()\n"
        "print('on a loop, still warming:', asyncio.run(per_request()))\n"
        "kit.agent_chat_ui('chat')\n"
        "print('at import, still warming:', kit._warm._thread.is_alive())\n"
    )
    assert python(code).splitlines() == [
        "on a loop, still warming: True",
        "at import, still warming: False",
    ]


def test_every_reactive_value_the_kit_makes_is_named() -> None:
    """A Value made without ``name=`` walks ``inspect.stack()`` to guess one, which is
    slow once litellm fills ``sys.modules``: every session pays it at start."""
    import ast
    from pathlib import Path

    kit = Path(__file__).resolve().parent.parent / "deputy_shiny" / "shiny"
    unnamed = [
        f"{path.name}:{node.lineno}"
        for path in sorted(kit.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"value", "Value"}
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "reactive"
        and not any(k.arg == "name" for k in node.keywords)
    ]
    assert unnamed == []
