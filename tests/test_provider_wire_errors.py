"""Error lines from the real OpenAI wire path: a refused connection, a malformed stream.

Both go through litellm and the OpenAI client to loopback only: a port that was bound
and closed (so nothing listens), and a tiny server in this test's loop that sends a
server-sent event that is not JSON. No test reaches the internet.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator

import pytest

from deputy_shiny import Agent
from deputy_shiny.events import RequestErrorEvent, StopEvent
from deputy_shiny.models import ChatModel
from deputy_shiny.usage import format_cost

from .helpers import collect

SECRET = "sk-test-WIRESECRET42"
GOOD = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},'
    b'"finish_reason":null}]}\n\n'
)
BROKEN = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":" wor"\n\n'


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
async def malformed_server() -> AsyncIterator[int]:
    """An OpenAI-like server whose stream sends one good chunk, then one that is not JSON."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        writer.write(head + GOOD + BROKEN)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_a_refused_connection_names_the_host_not_a_500(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="deputy_shiny")
    port = closed_port()
    model = ChatModel(
        model="openai/gpt-4.1-mini",
        api_base=f"http://127.0.0.1:{port}/v1/secret-path",
        api_key=SECRET,
        retries=1,
        retry_delay=0.0,
    )
    agent = Agent(model)
    events = await collect(agent.run("hi"))
    expected = f"openai: the connection to 127.0.0.1:{port} was refused (is the server running?)"
    errors = [e for e in events if isinstance(e, RequestErrorEvent)]
    assert [e.error for e in errors] == [expected, expected]  # the first try and one retry
    assert all(e.transient for e in errors)
    stop = events[-1]
    assert isinstance(stop, StopEvent) and stop.stop_reason == "provider_error"
    assert stop.message == expected
    result = agent.last_run()
    assert result is not None and result.usage.requests == 2
    # gpt-4.1-mini has a price: two refused attempts cost nothing, and say so.
    assert format_cost(result.usage) == "$0.00"
    # The log: one line at WARNING per attempt, the chain only at DEBUG, no secret.
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("\n" not in w and expected in w for w in warnings)
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("ConnectionRefusedError" in d for d in debug)
    assert not any("WIRESECRET42" in r.getMessage() for r in caplog.records)
    assert "secret-path" not in expected


async def test_a_malformed_stream_is_one_readable_line(malformed_server: int) -> None:
    model = ChatModel(
        model="openai/gpt-4.1-mini",
        api_base=f"http://127.0.0.1:{malformed_server}/v1",
        api_key=SECRET,
        retry_delay=0.0,
    )
    agent = Agent(model)
    events = await collect(agent.run("hi"))
    text = "".join(e.text for e in events if e.type == "text")  # type: ignore[union-attr]
    assert text == "Hello"  # what came before the broken event still shows
    errors = [e.error for e in events if isinstance(e, RequestErrorEvent)]
    line = "openai sent a malformed stream (an event that is not valid JSON), so the reply"
    assert errors == [f"{line} was cut off"]
    result = agent.last_run()
    assert result is not None and result.stop_reason == "provider_error"
    # It streamed, so it was not retried, and it counts with what arrived.
    assert result.usage.requests == 1 and result.usage.output_tokens > 0
    assert agent.get_turns()[-1].text == "Hello"


@pytest.fixture
async def silent_server() -> AsyncIterator[int]:
    """An OpenAI-like server that sends one chunk and then nothing (the reply stalls)."""
    stalls: list[asyncio.Event] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + GOOD)
        await writer.drain()
        stall = asyncio.Event()
        stalls.append(stall)
        await stall.wait()  # set at teardown
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for stall in stalls:
            stall.set()
        server.close()
        await server.wait_closed()


async def test_a_timeout_says_what_timed_out_not_a_408(silent_server: int) -> None:
    model = ChatModel(
        model="openai/gpt-4.1-mini",
        api_base=f"http://127.0.0.1:{silent_server}/v1",
        api_key=SECRET,
        timeout=0.3,
        retry_delay=0.0,
    )
    agent = Agent(model)
    events = await collect(agent.run("hi"))
    errors = [e.error for e in events if isinstance(e, RequestErrorEvent)]
    expected = (
        f"openai: 127.0.0.1:{silent_server} sent nothing for 0.3 s, so the request timed out "
        "(ChatModel(timeout=...) sets it)"
    )
    assert errors == [expected]  # it streamed "Hello" first, so it was not retried
    assert "".join(e.text for e in events if e.type == "text") == "Hello"  # type: ignore[union-attr]
