"""``Agent.stream_async`` / ``stream``: an abandoned stream frees the agent, and a
``stream="content"`` stream shows in a real shinychat ``Chat``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from shiny import reactive
from shiny.testserver import test_server_async
from shinychat import Chat

import deputy_shiny.shiny  # noqa: F401  (registers the content chunks with shinychat)
from deputy_shiny import Agent
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

from .helpers import local_tool, wait_until

LONG = ScriptedReply(" ".join(f"w{i:03d}" for i in range(50)), chunk_size=4)


def shout(text: str) -> str:
    """Uppercase the text."""
    return text.upper()


def _agent(*replies: Any) -> Agent:
    return Agent(ScriptedModel(list(replies)), tools=[local_tool(shout)])


async def test_breaking_out_of_async_for_frees_the_agent_at_once() -> None:
    agent = _agent(LONG, LONG, "after")
    async for _chunk in agent.stream_async("first"):
        break
    # No await in between: the loop had no chance to close the abandoned run itself.
    assert not agent.running
    first = agent.last_run()
    assert first is not None and first.stop_reason == "interrupted"
    async for _content in agent.stream_async("content", stream="content"):
        break
    assert not agent.running
    assert "".join([c async for c in agent.stream_async("again")]) == "after"
    # The abandoned runs left a consistent conversation: each user turn got a reply.
    assert [t.role for t in agent.get_turns()] == ["user", "assistant"] * 3


async def test_an_exception_in_the_loop_or_aclose_frees_the_agent() -> None:
    agent = _agent(LONG, LONG, "after")

    async def consume() -> None:
        async for _chunk in agent.stream_async("first"):
            raise KeyError("the consumer failed")

    with pytest.raises(KeyError):
        await consume()
    assert not agent.running
    stream = agent.stream_async("second", stream="content")
    await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]
    assert not agent.running
    assert [c async for c in stream] == []  # a closed stream stays closed
    assert "".join([c async for c in agent.stream_async("again")]) == "after"


async def test_a_stream_abandoned_mid_tool_frees_the_agent() -> None:
    call = ScriptedToolCall("shout", {"text": "hi"}, id="c1")
    agent = _agent(ScriptedReply(tool_calls=[call]), "never", "after")
    async for chunk in agent.stream_async("go", stream="content"):
        if getattr(chunk, "name", None) == "shout":  # the tool request
            break
    assert not agent.running
    assert "".join([c async for c in agent.stream_async("again")]) == "never"


def test_breaking_out_of_the_sync_stream_frees_the_agent() -> None:
    agent = _agent(LONG, LONG, "after")
    for _chunk in agent.stream("first"):
        break
    assert not agent.running
    for _content in agent.stream("second", stream="content"):
        break
    assert not agent.running
    assert "".join(agent.stream("again")) == "after"  # type: ignore[arg-type]


# --------------------------------------------------------------------------- shinychat


async def test_a_content_stream_shows_in_a_shinychat_chat_and_the_next_message_runs() -> None:
    call = ScriptedToolCall("shout", {"text": "hi"}, id="c1")
    agent = _agent(ScriptedReply("Look", tool_calls=[call]), "Done.", "Second reply.")
    chats: list[Chat] = []
    failures: list[BaseException] = []

    def server(input: Any, output: Any, session: Any) -> None:
        chat = Chat("chat")
        chats.append(chat)

        @chat.on_user_submit
        async def _(text: str) -> None:
            try:
                await chat.append_message_stream(agent.stream_async(text, stream="content"))
            except BaseException as exc:  # e.g. AgentBusyError: the test says so
                failures.append(exc)
                raise

    def settled() -> bool:
        with reactive.isolate():
            task = chats[0].latest_message_stream
            return task.status() not in ("initial", "running")

    async with test_server_async(server, timeout_secs=60) as ts:
        for text in ("go", "again"):
            await ts.set_inputs(chat_user_input={"text": text, "attachments": []})
            await wait_until(settled, 60)
            await ts.flush()
            with reactive.isolate():
                task = chats[0].latest_message_stream
                assert task.status() == "success", task.error()
        assert ts.is_ok, ts.error
        with reactive.isolate():
            messages = chats[0].messages()
    assert failures == []
    replies = [m for m in messages if m["role"] == "assistant"]
    assert len(replies) == 2
    assert "Look" in str(replies[0]["content"]) and "Done." in str(replies[0]["content"])
    assert "Second reply." in str(replies[1]["content"])
    assert not agent.running


async def test_content_chunks_become_shinychat_messages_with_tool_cards() -> None:
    from shinychat import message_content_chunk

    call = ScriptedToolCall("shout", {"text": "<b>hi</b>"}, id="c1")
    agent = _agent(ScriptedReply("Look", tool_calls=[call]), "Done.")
    shown = [message_content_chunk(c) async for c in agent.stream_async("go", stream="content")]
    assert shown[0].content == "Look"
    request, result = shown[1].blocks[0], shown[2].blocks[0]  # type: ignore[index]
    assert (request["type"], request["request_id"], request["tool_name"]) == (
        "tool_request",
        "c1",
        "shout",
    )
    assert request["arguments"] == '{"text": "<b>hi</b>"}'  # shinychat shows it as text
    assert (result["type"], result["status"], result["value_type"]) == (
        "tool_result",
        "success",
        "code",
    )
    assert "<B>HI</B>" in result["value"]
    await asyncio.sleep(0)
