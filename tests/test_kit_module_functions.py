"""The kit's module functions keep their signature and docstring, and a bare call of any
kit server in a Shiny Express app body renders nothing (issue #23)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from shiny import reactive
from shiny.express._run import run_express
from shiny.express._stub_session import ExpressStubSession
from shiny.session import session_context

import deputy_shiny.shiny as kit

COMPONENTS = ("components.sidebar", "components.usage_meter", "components.workspace")


def module_functions() -> list[tuple[str, Callable[..., Any]]]:
    """Every public ``*_server`` / ``*_ui`` function of the kit and of components/."""
    found = [(f"deputy_shiny.shiny.{n}", getattr(kit, n)) for n in kit.__all__]
    for name in COMPONENTS:
        mod = importlib.import_module(name)
        found += [(f"{name}.{n}", getattr(mod, n)) for n in vars(mod) if not n.startswith("_")]
    unique: dict[int, tuple[str, Callable[..., Any]]] = {}
    for name, fn in found:
        if name.endswith(("_server", "_ui")) and inspect.isfunction(fn):
            unique.setdefault(id(fn), (name, fn))  # components re-export some
    return list(unique.values())


def test_every_kit_module_function_is_found() -> None:
    names = [name.rsplit(".", 1)[1] for name, _ in module_functions()]
    assert {"agent_chat_server", "agent_chat_ui", "permission_mode_server"} <= set(names)
    assert {"workspace_server", "usage_meter_ui", "model_section_server"} <= set(names)
    assert len(names) == len(set(names)) == 18


@pytest.mark.parametrize(("name", "fn"), module_functions(), ids=[n for n, _ in module_functions()])
def test_a_module_function_keeps_its_signature_and_docstring(
    name: str, fn: Callable[..., Any]
) -> None:
    own = fn.__wrapped__  # type: ignore[attr-defined]
    own_parameters = list(inspect.signature(own).parameters.values())
    if name.endswith("_server"):
        assert [p.name for p in own_parameters[:3]] == ["input", "output", "session"]
        own_parameters = own_parameters[3:]
    parameters = list(inspect.signature(fn).parameters.values())
    assert parameters[0].name == "id"
    assert parameters[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert parameters[1:] == own_parameters
    assert inspect.signature(fn).return_annotation == inspect.signature(own).return_annotation
    assert fn.__doc__ and fn.__doc__ == own.__doc__
    assert fn.__name__ == own.__name__ == name.rsplit(".", 1)[1]


def test_help_shows_the_real_parameters() -> None:
    shown = str(inspect.signature(kit.agent_chat_server))
    assert shown.startswith("(id: 'str', agent_factory:")
    assert "*args" not in shown and "persistence" in shown


EXPRESS_APP = """
from shiny.express import ui
from deputy_shiny import Agent
from deputy_shiny.shiny import agent_chat_server, permission_mode_server, permission_mode_ui
from deputy_shiny.testing import ScriptedModel

permission_mode_ui("mode")
agent_chat_server("chat", lambda ctx: Agent(ScriptedModel(["hi"])))
permission_mode_server("mode", lambda: None)
"""


def test_bare_server_calls_render_nothing_in_express(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(EXPRESS_APP)
    with session_context(ExpressStubSession()):
        page = run_express(app, "express_bare_calls").tagify()
    html = page.get_html_string()  # raised "Invalid tag item type: reactive.Value"
    assert 'id="mode-mode"' in html
    assert "AgentChatHandle" not in html and "Value" not in html


def test_the_returned_values_still_work_in_core() -> None:
    with session_context(ExpressStubSession()):
        mode = kit.permission_mode_server("mode", lambda: None)
    assert isinstance(mode, reactive.Value)
    with reactive.isolate():
        mode.set("plan")
        assert mode() == "plan"
