"""The kit warns when an agent's ask_user tool is not bound to the browser session."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent
from deputy_shiny.shiny._chat_start import _warn_unbound_ask_user
from deputy_shiny.testing import FunctionModel
from deputy_shiny.tools import tools_interactive


def _session_callback(questions: list[Any], context: Any) -> list[Any]:
    return []


def _other_callback(questions: list[Any], context: Any) -> list[Any]:
    return []


def _agent(tmp_path: Path, callback: Any) -> Agent:
    return Agent(
        FunctionModel(lambda messages, tools: "ok"),
        tools=tools_interactive(callback=callback),
        working_dir=tmp_path,
    )


def test_warns_when_ask_user_is_bound_elsewhere(tmp_path: Path) -> None:
    agent = _agent(tmp_path, _other_callback)
    with pytest.warns(UserWarning, match="not bound"):
        _warn_unbound_ask_user(agent, _session_callback)


def test_silent_when_ask_user_is_bound_to_the_session(tmp_path: Path) -> None:
    agent = _agent(tmp_path, _session_callback)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_unbound_ask_user(agent, _session_callback)


def test_silent_without_ask_user(tmp_path: Path) -> None:
    agent = Agent(FunctionModel(lambda messages, tools: "ok"), working_dir=tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_unbound_ask_user(agent, _session_callback)
