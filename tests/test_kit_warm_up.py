"""The kit warms litellm up as the app starts: no app has to call warm_up().

Each check runs in its own fresh process (litellm not yet imported, no warm-up begun),
forked from one interpreter that imported the kit once; they run at once, as they time
nothing.
"""

from __future__ import annotations

import pytest

from tests._fresh import Child, forked

SETUP = """
import sys
import deputy_shiny.shiny as kit
assert 'litellm' not in sys.modules, 'importing the kit must stay cheap'
"""

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


# An Express app builds no UI before a session: the server binding starts the warm-up
# (a stub session, as Shiny makes when it renders an Express app's UI).
EXPRESS = (
    "from shiny.session import session_context\n"
    "from shiny.express._stub_session import ExpressStubSession\n"
    "with session_context(ExpressStubSession()):\n"
    "    kit.agent_chat_server('chat', agent_factory=lambda ctx: None)\n"
)

# Built as app.py is imported (no event loop running), the UI returns once the warm-up
# is done, so shiny run serves a process whose first reply is warm. Built on a running
# loop (a UI function called per request) it only starts the warm-up.
MODULE = (
    "import asyncio, sys\n"
    "import deputy_shiny.shiny as kit\n"
    "async def per_request():\n"
    "    kit.agent_chat_ui('chat')\n"
    "    return kit._warm._thread.is_alive()\n"
    "print('on a loop, still warming:', asyncio.run(per_request()))\n"
    "kit.agent_chat_ui('chat')\n"
    "print('at import, still warming:', kit._warm._thread.is_alive())\n"
)


@pytest.fixture(scope="module")
def children() -> dict[str, Child]:
    """Each case's child, in its own fresh process."""
    cases = {
        # No model request and no warm_up() call: the UI alone, as a static app.py builds it.
        "ui": CHECK.replace("{build}", "kit.agent_chat_ui('chat')"),
        "express": CHECK.replace("{build}", EXPRESS),
        "module": MODULE,
    }
    return forked(cases, setup=SETUP, parallel=True)


def test_building_the_chat_ui_imports_litellm_in_a_worker_thread(
    children: dict[str, Child],
) -> None:
    assert children["ui"].printed().strip() == "deputy-shiny-warm-up True"


def test_an_express_app_warms_up_at_its_first_session(children: dict[str, Child]) -> None:
    assert children["express"].printed().strip() == "deputy-shiny-warm-up True"


def test_an_app_module_serves_only_once_warm(children: dict[str, Child]) -> None:
    assert children["module"].printed().splitlines() == [
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
