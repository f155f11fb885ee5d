"""The app's ``agent_factory``: what ``ctx.agent_options()`` passes, and a factory that fails.

A failing factory is driven through the real ``agent_chat_server`` in shiny's test
server (a real session, no browser): the chat's ``append_message`` is recorded, and a
user message is sent as shinychat's input. Before, the exception escaped the server
function, Shiny closed the session, and the browser's message just waited.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from shiny.testserver import test_server
from shinychat import Chat

from deputy_shiny import Agent
from deputy_shiny.shiny import AgentChatContext, KitPersistence, _chat_module
from deputy_shiny.shiny import _session_conversation as conversations
from deputy_shiny.shiny._chat_start import factory_failure
from deputy_shiny.shiny._mcp_session import SessionMcp
from deputy_shiny.testing import FunctionModel

USER_INPUT = "agent-chat_user_input"


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every message the kit's chats append, in order."""
    messages: list[str] = []
    new_chat = _chat_module._new_chat

    def recording() -> Chat:
        chat = new_chat()
        append = chat.append_message

        async def recorded(message: Any, **kwargs: Any) -> None:
            messages.append(str(message))
            await append(message, **kwargs)

        chat.append_message = recorded  # type: ignore[method-assign]
        return chat

    monkeypatch.setattr(_chat_module, "_new_chat", recording)
    return messages


def _typo(ctx: AgentChatContext) -> Agent:
    """An app's bug: a keyword Agent does not take."""
    return Agent(FunctionModel(lambda m, t: "hi"), tool=[])  # type: ignore[call-arg]


def _bad_setting(ctx: AgentChatContext) -> Agent:
    """An app's bug whose message quotes markup (from a setting, say)."""
    limit = int("<img src=x onerror=alert(1)> *3*")
    return Agent(FunctionModel(lambda m, t: "hi"), system_prompt=f"At most {limit}")


def _boilerplate_forgotten(ctx: AgentChatContext) -> Agent:
    """With persistence, only the working dir passed: the kit refuses the agent."""
    return Agent(FunctionModel(lambda m, t: "hi"), working_dir=ctx.working_dir)


@pytest.mark.parametrize(
    ("factory", "persistent", "expected"),
    [
        (_typo, False, "TypeError: Agent.__init__() got an unexpected keyword argument 'tool'"),
        (_bad_setting, False, "ValueError: invalid literal for int() with base 10: '<img src=x"),
        (_boilerplate_forgotten, True, "ConfigurationError: With persistence, the agent_factory"),
    ],
)
def test_a_failing_factory_is_one_escaped_line_in_the_chat_and_every_message_is_answered(
    factory: Any,
    persistent: bool,
    expected: str,
    said: list[str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    persistence = KitPersistence(tmp_path / "saved", key=lambda s: "alice") if persistent else None
    workspaces = tmp_path / "workspaces"
    handles: list[Any] = []

    def server(input: Any, output: Any, session: Any) -> None:
        handles.append(
            _chat_module.agent_chat_server(
                "agent", factory, workspace_root=workspaces, persistence=persistence
            )
        )

    with caplog.at_level(logging.ERROR, logger=_chat_module.__name__), test_server(server) as ts:
        ts.flush()
        assert ts.is_ok, ts.error  # the session stays open
        assert len(said) == 1
        ts.set_inputs(**{USER_INPUT: {"text": "hello", "attachments": []}})
        ts.flush()
        assert ts.is_ok, ts.error
        assert said == [said[0], said[0]]  # the message is answered, not left waiting
        if persistent:  # the folder was let go at once: a reload may take it
            # (Only this test's folders: the tables are the process's.)
            assert not [d for d in conversations._in_use if tmp_path in d.parents]
            assert not [
                d for d, held in conversations._open.items() if tmp_path in d.parents and held
            ]
    [line] = set(said)
    assert "\n" not in line and "<" not in line.replace("\\<", "")  # escaped, one line
    assert expected in line.replace("\\", "")
    assert line.replace("\\", "").startswith("The agent could not be started (")
    assert handles[0].agent is None
    # The traceback is in the server log, not the chat.
    [record] = [r for r in caplog.records if "agent_factory failed" in r.getMessage()]
    assert record.exc_info is not None and "Traceback" not in line
    if not persistent:  # its workspace went with the session
        assert list(workspaces.iterdir()) == []


def test_the_failure_line_is_short_and_has_only_the_first_line() -> None:
    line = factory_failure(ValueError("first line\n  Traceback (most recent call last):\n x"))
    assert line == (
        "The agent could not be started (ValueError: first line). The server log has the details."
    )
    long = factory_failure(RuntimeError("x" * 5000))
    assert len(long) < 500 and long.count("x") < 400
    assert factory_failure(KeyError()) == (
        "The agent could not be started (KeyError). The server log has the details."
    )


def _context(tmp_path: Path, approval_handler: Any = None, **persisted: Any) -> AgentChatContext:
    return AgentChatContext(
        session_id="s1",
        working_dir=tmp_path,
        ask_user=lambda questions, context: [],
        approval_handler=approval_handler,
        mcp=SessionMcp(None),
        **persisted,
    )


def test_agent_options_are_exactly_what_the_session_owns(tmp_path: Path) -> None:
    async def handler(request: Any) -> Any:
        return None

    live = _context(tmp_path, handler)
    assert live.agent_options() == {
        "working_dir": tmp_path,
        "session_id": "s1",
        "approval_handler": handler,
    }
    assert live.agent_options(file_checkpointing=True) == {
        **live.agent_options(),
        "enable_file_checkpointing": True,
    }
    saved = _context(
        tmp_path,
        agent_id="agent-1",
        approval_dir=tmp_path / "approvals",
        checkpoint_dir=tmp_path / "checkpoints",
    )
    assert saved.agent_options(file_checkpointing=True) == {
        "working_dir": tmp_path,
        "session_id": "s1",
        "approval_handler": None,
        "agent_id": "agent-1",
        "approval_dir": tmp_path / "approvals",
        "enable_file_checkpointing": True,
        "checkpoint_dir": tmp_path / "checkpoints",
    }
