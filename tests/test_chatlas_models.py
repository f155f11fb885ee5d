"""A chatlas ``Chat`` where a model goes: it stands for the model it talks to."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import chatlas
import pytest

from deputy_shiny import Agent
from deputy_shiny.errors import InvalidModelError
from deputy_shiny.models import resolve_model


@pytest.fixture
async def openai_server() -> AsyncIterator[str]:
    """A loopback OpenAI-compatible server: every request streams "Hi from the wire"."""
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [{"index": 0, "delta": {"content": word}} for word in ("Hi ", "from ", "the wire")]
    events = [{**base, "choices": [choice]} for choice in chunks]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    seen: list[dict[str, Any]] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        seen.append(json.loads(await reader.readexactly(length)))
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        )
        writer.write(body + b"data: [DONE]\n\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    finally:
        server.close()
        await server.wait_closed()


async def test_an_agent_runs_on_a_chatlas_chats_model(openai_server: str) -> None:
    chat = chatlas.ChatOpenAICompletions(
        model="gpt-4.1-mini", api_key="sk-test-chatlas", base_url=openai_server
    )
    agent = Agent(chat)
    result = await agent.run_async("hello")
    assert result.response == "Hi from the wire"
    assert agent.model.model == "openai/gpt-4.1-mini"
    assert agent.model.api_base == openai_server


def test_the_model_string_key_and_endpoint_come_from_the_chat() -> None:
    openai = resolve_model(chatlas.ChatOpenAI(model="gpt-4.1-mini", api_key="sk-test-a"))
    assert (openai.model, openai.api_base) == ("openai/gpt-4.1-mini", None)
    assert openai.api_key is not None and openai.api_key.get_secret_value() == "sk-test-a"
    groq = resolve_model(chatlas.ChatGroq(model="llama-3.3-70b", api_key="gsk-test"))
    assert (groq.model, groq.api_base) == ("groq/llama-3.3-70b", None)
    local = resolve_model(
        chatlas.ChatOpenAICompletions(
            model="qwen", base_url="http://127.0.0.1:8000/v1", api_key="x"
        )
    )
    assert (local.model, local.api_base) == ("openai/qwen", "http://127.0.0.1:8000/v1")
    # Only the provider's own host counts as its default endpoint, not a URL naming it.
    lookalike = "https://proxy.example/api.openai.com/v1"
    proxied = resolve_model(
        chatlas.ChatOpenAICompletions(model="m", base_url=lookalike, api_key="x")
    )
    assert proxied.api_base == lookalike


def test_a_provider_without_a_mapping_says_what_to_pass_instead() -> None:
    provider = type("Provider", (), {"name": "Snowflake", "model": "arctic"})()
    chat = type("Chat", (), {"__module__": "chatlas._chat", "provider": provider})()
    with pytest.raises(InvalidModelError, match=r"'Snowflake' has no litellm mapping.*arctic"):
        resolve_model(chat)


def test_an_object_that_only_looks_like_a_chat_is_not_one() -> None:
    provider = type("Provider", (), {"name": "OpenAI", "model": "gpt-4.1-mini"})()
    impostor = type("Chat", (), {"provider": provider})()  # not from chatlas
    with pytest.raises(InvalidModelError, match="Cannot use a Chat as a model"):
        resolve_model(impostor)
