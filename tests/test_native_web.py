"""Provider-native web search: authorized once at registration, sent with every request."""

from __future__ import annotations

import pytest

from deputy_shiny import Agent
from deputy_shiny.errors import ToolNameConflictError
from deputy_shiny.permissions import (
    PermissionResultAllow,
    Permissions,
    PermissionsError,
    permissions_full,
)
from deputy_shiny.testing import ScriptedModel
from deputy_shiny.tools import NativeWebSearch, Tool, tools_web

SEARCH_MODEL = "openai/gpt-4o-search-preview"  # litellm knows it searches natively
ALLOWED = Permissions(web=True, tool_allowlist=("web_search",))


def test_native_search_registers_when_the_policy_allows_it() -> None:
    agent = Agent(SEARCH_MODEL, permissions=ALLOWED)
    agent.register_tools(tools_web(agent.model))
    tools = agent.get_tools()
    assert isinstance(tools["web_search"], NativeWebSearch)
    assert isinstance(tools["web_fetch"], Tool)
    assert agent._run_deps().request_extras == {
        "web_search_options": {"search_context_size": "medium"}
    }


@pytest.mark.parametrize(
    ("permissions", "why"),
    [
        (Permissions(tool_allowlist=("web_search",)), "web=True"),
        (Permissions(web=True), "tool_allowlist"),
        (permissions_full(), "tool_allowlist"),
        (
            Permissions(web=True, tool_allowlist=("web_search",), tool_denylist=("WEB_SEARCH",)),
            "denylist",
        ),
        (
            Permissions(
                web=True,
                tool_allowlist=("web_search",),
                can_use_tool=lambda n, a, c: PermissionResultAllow(),
            ),
            "can_use_tool",
        ),
        (Permissions(mode="readonly", web=True, tool_allowlist=("web_search",)), "readonly"),
    ],
)
def test_native_search_is_refused_at_registration(permissions: Permissions, why: str) -> None:
    agent = Agent(SEARCH_MODEL, permissions=permissions)
    with pytest.raises(PermissionsError, match=why):
        agent.register_tools(tools_web(agent.model))
    assert agent.get_tools() == {}  # the whole batch was refused


def test_narrowing_away_web_removes_native_search() -> None:
    agent = Agent(SEARCH_MODEL, permissions=ALLOWED)
    agent.register_tools(tools_web(agent.model))
    agent.set_permission_mode("readonly")
    assert "web_search" not in agent.get_tools()
    assert agent._run_deps().request_extras == {}


def test_native_search_cannot_follow_a_provider_switch() -> None:
    agent = Agent(SEARCH_MODEL, permissions=ALLOWED)
    agent.register_tools(tools_web(agent.model))
    with pytest.raises(Exception, match="set_tools"):
        agent.set_model("anthropic/claude-sonnet-4-5")
    with pytest.raises(ToolNameConflictError):
        agent.register_tools(tools_web(agent.model))


def test_native_search_for_another_provider_is_refused() -> None:
    agent = Agent(ScriptedModel([]), permissions=ALLOWED)
    with pytest.raises(Exception, match="openai"):
        agent.register_tool(NativeWebSearch(provider="openai", model=SEARCH_MODEL))  # type: ignore[arg-type]


async def test_native_search_options_reach_the_request() -> None:
    model = ScriptedModel(["searched"])
    chat_model = model.as_chat_model()
    agent = Agent(model, permissions=ALLOWED)
    agent.register_tool(NativeWebSearch(provider=chat_model.provider, model=chat_model.model))  # type: ignore[arg-type]
    assert await agent.chat_async("news?") == "searched"
    assert model.requests[0]["params"]["web_search_options"] == {"search_context_size": "medium"}
    assert model.requests[0]["tools"] in (None, [])
