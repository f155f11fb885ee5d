"""Faults that heal: provider, tool and browser failures through the real provider path.

Every model here is a ``ChatModel("openai/x", api_base=...)``: litellm and the OpenAI
client talk HTTP to a loopback OpenAI-compatible server in this test's own loop
(:class:`FakeOpenAI`), which answers each request with the next reply of its plan: a
stream, an error status, silence, a connection cut mid-stream, a malformed event.
Nothing of the engine is mocked. Each fault happens in the request right after a tool
call where it can, so the checks cover what matters most: the run heals (a retry, a
fallback) or stops with one readable line, and the conversation stays consistent
(every tool request has its result) and usable for the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent, ChatModel, Permissions
from deputy_shiny.events import (
    AgentEvent,
    FallbackEvent,
    RequestErrorEvent,
    RetryEvent,
    StopEvent,
)
from deputy_shiny.models._provider import load_litellm
from deputy_shiny.shiny._chat_start import AgentChatContext
from deputy_shiny.tools import tool_run_bash
from tests.helpers import assert_consistent, collect, local_tool, wait_until
from tests.test_chat_session import cards, start

KEY = "sk-test"
BASE = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "x"}
USAGE = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
BOUND = 20.0  # seconds: no test here may wait longer than this for anything


# --------------------------------------------------------------------------- the server

Reply = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _event(payload: object) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _text_chunk(text: str) -> bytes:
    return _event({**BASE, "choices": [{"index": 0, "delta": {"content": text}}]})


def _words(text: str) -> list[bytes]:
    """One chunk per word (varied text: litellm refuses 100 equal chunks in a row)."""
    return [_text_chunk(word) for word in text.split(" ") for word in (word + " ",)]


def _finish(reason: str) -> list[bytes]:
    stop = {"index": 0, "delta": {}, "finish_reason": reason}
    return [_event({**BASE, "choices": [stop]}), _event({**BASE, "choices": [], "usage": USAGE})]


STREAM_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"


def text(reply: str) -> Reply:
    """A whole streamed reply of text."""

    async def send(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = b"".join([*_words(reply), *_finish("stop"), b"data: [DONE]\n\n"])
        writer.write(STREAM_HEAD + b"\r\n" + body)

    return send


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> Reply:
    """A streamed reply asking for one tool call, its arguments split in two chunks."""
    raw = json.dumps(arguments)
    deltas = [
        {"index": 0, "id": call_id, "type": "function", "function": {"name": name}},
        {"index": 0, "function": {"arguments": raw[: len(raw) // 2]}},
        {"index": 0, "function": {"arguments": raw[len(raw) // 2 :]}},
    ]
    events = [
        _event({**BASE, "choices": [{"index": 0, "delta": {"tool_calls": [delta]}}]})
        for delta in deltas
    ]

    async def send(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = b"".join([*events, *_finish("tool_calls"), b"data: [DONE]\n\n"])
        writer.write(STREAM_HEAD + b"\r\n" + body)

    return send


def status(code: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An error status with an OpenAI-style JSON body."""

    async def send(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = json.dumps({"error": {"message": message, "type": "test", "code": None}}).encode()
        head = [f"HTTP/1.1 {code} Error", "content-type: application/json"]
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        head += [f"content-length: {len(body)}", "connection: close"]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)

    return send


def hang_up() -> Reply:
    """The server closes the connection without answering at all."""

    async def send(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        return None

    return send


def cut(partial: str, *, reset: bool) -> Reply:
    """A chunked stream that stops mid-reply: the socket is closed (or reset) after
    ``partial``'s chunks, without the stream's end or the body's last chunk."""

    async def send(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(STREAM_HEAD + b"transfer-encoding: chunked\r\n\r\n")
        for chunk in _words(partial):
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await writer.drain()
        await asyncio.sleep(0.05)  # the client reads the chunks before the cut
        if reset:  # an RST, as a crashed proxy sends, rather than a clean FIN
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()

    return send


def malformed(partial: str) -> Reply:
    """A stream whose next event, after ``partial``, is not JSON."""

    async def send(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        broken = b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":" wor"\n\n'
        writer.write(STREAM_HEAD + b"\r\n" + b"".join(_words(partial)) + broken)

    return send


@dataclass
class FakeOpenAI:
    """A loopback OpenAI-compatible chat server: each request gets the next reply of
    ``plan`` (a plain text reply when the plan is used up). It records each request's
    arrival time and body, and whether a streaming client hung up on it."""

    plan: list[Reply]
    url: str = ""
    requests: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    hangups: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def model(self, name: str = "openai/x", **options: Any) -> ChatModel:
        return ChatModel(model=name, api_base=self.url, api_key=KEY, **options)

    def messages(self, index: int) -> list[dict[str, Any]]:
        """The messages of request ``index`` (from 0) as the server received them."""
        return list(self.requests[index][1]["messages"])

    async def answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            body = json.loads(await reader.readexactly(length))
            self.requests.append((time.monotonic(), body))
            reply = self.plan.pop(0) if self.plan else text("Fine.")
            await reply(reader, writer)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            self.hangups += 1
        finally:
            writer.close()

    async def stall(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A reply that sends nothing until the test ends."""
        await self.release.wait()

    async def endless(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A reply that streams words until the client hangs up (counted in ``hangups``)."""
        writer.write(STREAM_HEAD + b"\r\n")
        gone = asyncio.ensure_future(reader.read())  # b"" once the client closes
        try:
            i = 0
            while not gone.done() and not self.release.is_set():
                writer.write(_text_chunk(f"word{i:05d} "))
                await writer.drain()  # raises once the client reset the connection
                i += 1
                await asyncio.sleep(0.01)
        finally:
            gone.cancel()
            with contextlib.suppress(BaseException):
                await gone  # a reset connection fails the read: retrieved, not logged
        if not self.release.is_set():  # the client closed it: once, in answer()
            raise ConnectionResetError("the client hung up")


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[list[Reply]], Awaitable[FakeOpenAI]]]:
    """Start fake providers (as many as a test needs); stop them, and release what stalls."""
    started: list[tuple[FakeOpenAI, asyncio.Server]] = []
    await load_litellm()  # its first import takes seconds: not inside any test's bound

    async def run(plan: list[Reply]) -> FakeOpenAI:
        fake = FakeOpenAI(plan)
        server = await asyncio.start_server(fake.answer, "127.0.0.1", 0)
        fake.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
        started.append((fake, server))
        return fake

    yield run
    for fake, server in started:
        fake.release.set()
        server.close()
        await server.wait_closed()


Serve = Callable[[list[Reply]], Awaitable[FakeOpenAI]]


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


WEATHER = tool_call("weather", {"city": "Paris"})


def weather_agent(model: ChatModel, **options: Any) -> Agent:
    return Agent(model, tools=[local_tool(weather)], **options)


def roles(agent: Agent) -> list[str]:
    return [turn.role for turn in agent.get_turns()]


def errors(events: list[AgentEvent]) -> list[str]:
    return [e.error for e in events if isinstance(e, RequestErrorEvent)]


def stop_of(events: list[AgentEvent]) -> StopEvent:
    stop = events[-1]
    assert isinstance(stop, StopEvent)
    return stop


async def run(agent: Agent, task: str) -> list[AgentEvent]:
    async with asyncio.timeout(BOUND):
        return await collect(agent.run(task))


def assert_tool_answered(fake: FakeOpenAI, index: int) -> None:
    """Request ``index`` carried the tool's result (the model saw the call answered)."""
    last = fake.messages(index)[-1]
    assert last["role"] == "tool" and last["content"] == "sunny in Paris"


# --------------------------------------------------------------------------- retries


async def test_a_429_waits_for_its_retry_after_and_the_run_goes_on(serve: Serve) -> None:
    limited = status(429, "Rate limit reached for x", {"retry-after": "1"})
    fake = await serve([WEATHER, limited, text("Sunny in Paris today.")])
    agent = weather_agent(fake.model(retry_delay=0.0))  # only the header makes it wait
    events = await run(agent, "Weather in Paris?")
    assert errors(events) == ["openai returned 429: Rate limit reached for x"]
    [retry] = [e for e in events if isinstance(e, RetryEvent)]
    assert (retry.attempt, retry.attempts, retry.delay) == (2, 3, 1.0)
    assert retry.error == "openai returned 429: Rate limit reached for x"
    # The retry waited as the provider asked, and re-sent the tool's result.
    (_, _), (limited_at, _), (retried_at, _) = fake.requests
    assert retried_at - limited_at >= 0.95
    assert fake.messages(2) == fake.messages(1)
    assert_tool_answered(fake, 2)
    assert stop_of(events).stop_reason == "complete"
    assert roles(agent) == ["user", "assistant", "user", "assistant"]
    assert agent.get_turns()[-1].text == "Sunny in Paris today. "
    assert_consistent(agent)
    result = agent.last_run()
    assert result is not None and result.usage.requests == 3  # the refused one counts


@pytest.mark.parametrize("fault", ["500", "read timeout", "hang-up"])
async def test_a_failure_before_the_first_chunk_is_retried_after_a_tool_call(
    serve: Serve, fault: str
) -> None:
    fake = await serve([])
    replies = {
        "500": status(500, "The server had an error"),
        "read timeout": fake.stall,
        "hang-up": hang_up(),
    }
    fake.plan += [WEATHER, replies[fault], text("Sunny, as it says.")]
    agent = weather_agent(fake.model(retry_delay=0.0, timeout=0.5))
    events = await run(agent, "Weather in Paris?")
    host = fake.url.removeprefix("http://").removesuffix("/v1")
    expected = {
        "500": "openai returned 500: The server had an error",
        "read timeout": f"openai: {host} sent nothing for 0.5 s, so the request timed out "
        "(ChatModel(timeout=...) sets it)",
        "hang-up": f"openai: the connection to {host} was closed before the reply was complete",
    }[fault]
    assert errors(events) == [expected]
    assert [e.error for e in events if isinstance(e, RetryEvent)] == [expected]
    assert all(e.transient for e in events if isinstance(e, RequestErrorEvent))
    assert len(fake.requests) == 3
    assert_tool_answered(fake, 2)
    assert stop_of(events).stop_reason == "complete"
    assert roles(agent) == ["user", "assistant", "user", "assistant"]
    assert agent.get_turns()[-1].text == "Sunny, as it says. "
    assert_consistent(agent)


# --------------------------------------------------------------------------- mid-stream


@pytest.mark.parametrize("fault", ["closed", "reset", "malformed"])
async def test_a_stream_cut_after_a_tool_call_stops_cleanly_and_the_agent_goes_on(
    serve: Serve, fault: str
) -> None:
    fake = await serve([])
    backup = await serve([text("never asked")])
    broken = {
        "closed": cut("It is sunny in", reset=False),
        "reset": cut("It is sunny in", reset=True),
        "malformed": malformed("It is sunny in"),
    }[fault]
    fake.plan += [WEATHER, broken, text("Still sunny.")]
    agent = weather_agent(fake.model(retry_delay=0.0), fallback_models=[backup.model()])
    events = await run(agent, "Weather in Paris?")
    host = fake.url.removeprefix("http://").removesuffix("/v1")
    expected = {
        "closed": f"openai: the connection to {host} was closed before the reply was complete",
        "reset": f"openai: the connection to {host} was closed before the reply was complete",
        "malformed": "openai sent a malformed stream (an event that is not valid JSON), so "
        "the reply was cut off",
    }[fault]
    assert errors(events) == [expected]
    # Chunks had arrived and a tool had run: neither a retry nor the fallback may
    # repeat them (the spec: fallbacks only before any response or tool call).
    assert not [e for e in events if isinstance(e, RetryEvent | FallbackEvent)]
    assert len(fake.requests) == 2 and backup.requests == []
    stop = stop_of(events)
    assert (stop.stop_reason, stop.message) == ("provider_error", expected)
    # What arrived is kept, after the tool's answered request.
    assert roles(agent) == ["user", "assistant", "user", "assistant"]
    assert agent.get_turns()[-1].text == "It is sunny in "
    assert_consistent(agent)
    # The agent is not stuck: the next run goes to the same model and completes.
    events = await run(agent, "And now?")
    assert stop_of(events).stop_reason == "complete"
    assert agent.get_turns()[-1].text == "Still sunny. "
    partial, task = fake.messages(2)[-2:]  # the model sees the partial reply it gave
    assert partial == {"role": "assistant", "content": "It is sunny in "}
    assert task == {"role": "user", "content": "And now?"}
    assert backup.requests == []


# --------------------------------------------------------------------------- fallbacks


async def test_a_fallback_takes_over_before_anything_arrived_and_stays(serve: Serve) -> None:
    down = status(503, "Service unavailable")
    primary = await serve([down, down])
    backup = await serve([WEATHER, text("Sunny (from the backup)."), text("Still the backup.")])
    primary_model = primary.model(retries=1, retry_delay=0.0)
    agent = weather_agent(primary_model, fallback_models=[backup.model("openai/y")])
    events = await run(agent, "Weather in Paris?")
    assert errors(events) == ["openai returned 503: Service unavailable"] * 2
    [fallback] = [e for e in events if isinstance(e, FallbackEvent)]
    assert (fallback.from_model, fallback.to_model) == ("openai/x", "openai/y")
    assert stop_of(events).stop_reason == "complete"
    # The backup got the whole conversation, then the tool's result.
    assert backup.messages(0)[-1] == {"role": "user", "content": "Weather in Paris?"}
    assert_tool_answered(backup, 1)
    assert len(primary.requests) == 2
    assert roles(agent) == ["user", "assistant", "user", "assistant"]
    assert_consistent(agent)
    # Once used, the fallback stays in use.
    events = await run(agent, "Again?")
    assert stop_of(events).stop_reason == "complete" and len(primary.requests) == 2
    assert agent.get_turns()[-1].text == "Still the backup. "


async def test_after_a_tool_ran_the_fallback_is_not_used_and_nothing_dangles(
    serve: Serve,
) -> None:
    primary = await serve([WEATHER, status(503, "Service unavailable")])
    backup = await serve([text("never asked")])
    model = primary.model(retries=0)
    agent = weather_agent(model, fallback_models=[backup.model("openai/y")])
    events = await run(agent, "Weather in Paris?")
    # A tool ran: the spec's fallbacks apply only before any response or tool call.
    assert errors(events) == ["openai returned 503: Service unavailable"]
    assert stop_of(events).stop_reason == "provider_error" and backup.requests == []
    assert roles(agent) == ["user", "assistant", "user"]  # the tool's result is there
    assert_consistent(agent)
    assert agent.model.model == "openai/x"


# --------------------------------------------------------------------------- tools


async def test_a_hanging_command_times_out_and_the_session_stays_usable(
    serve: Serve, tmp_path: Path
) -> None:
    hang = tool_call("run_bash", {"command": "sleep 30", "timeout": 0.5})
    fake = await serve([hang, text("It took too long."), text("Next run.")])

    def factory(ctx: AgentChatContext) -> Agent:
        return Agent(
            fake.model(),
            tools=[tool_run_bash()],  # the default sandbox: bubblewrap
            permissions=Permissions(run_bash=True),
            working_dir=ctx.working_dir,
        )

    kit = start(tmp_path, factory)
    async with asyncio.timeout(BOUND):
        started = time.monotonic()
        await kit.session.submit("Run it.")
        await kit.chat.settled()
        took = time.monotonic() - started
        # The session is usable at once: the next message runs as usual.
        await kit.session.submit("Again.")
        await kit.chat.settled()
    assert took < 10  # the 30 s command was stopped at its 0.5 s timeout
    first, second = kit.chat.messages
    assert cards(first) == [("tool_request", "run_bash"), ("tool_result", "error")]
    assert first.blocks[1]["value"].startswith("The command timed out after 0.5 s")
    assert first.plain.endswith("It took too long. ")
    assert second.plain == "Next run. "
    # The model saw the timeout as the call's result and answered it.
    tool_message = fake.messages(1)[-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"].startswith("The command timed out after 0.5 s")
    assert_consistent(kit.agent)
    assert not kit.agent.running and kit.values.running == [True, False, True, False]
    await kit.session.end()


# --------------------------------------------------------------------------- the browser


async def test_a_browser_that_leaves_mid_stream_stops_the_run_and_its_request(
    serve: Serve, tmp_path: Path
) -> None:
    fake = await serve([])
    fake.plan.append(fake.endless)  # streams until the client hangs up
    kit = start(tmp_path, lambda ctx: Agent(fake.model(), working_dir=ctx.working_dir))
    async with asyncio.timeout(BOUND):
        await kit.session.submit("Tell me everything.")
        await wait_until(lambda: "word00003" in "".join(m.text for m in kit.chat.messages), BOUND)
        left = time.monotonic()
        await kit.session.end()  # what Shiny's on_ended calls
        ended = time.monotonic() - left
        # The interrupt stopped the run at once: end() waits up to 10 s for a run that
        # does not stop, and nothing else may wait on it.
        assert ended < 5 and not kit.agent.running
        await kit.chat.settled()
        await wait_until(lambda: fake.hangups == 1, BOUND)  # the HTTP request was closed
    assert kit.values.running[-1] is False
    result = kit.agent.last_run()
    assert result is not None and result.stop_reason == "interrupted"
    assert roles(kit.agent) == ["user", "assistant"]
    assert kit.agent.get_turns()[-1].text.startswith("word00000 word00001 word00002 ")
    assert len(fake.requests) == 1


async def test_a_browser_that_leaves_while_a_tool_hangs_frees_the_run(
    serve: Serve, tmp_path: Path
) -> None:
    stuck = threading.Event()

    def fetch_report(name: str) -> str:
        """Fetch a report (this one never answers: a sync tool stuck in I/O)."""
        stuck.wait(BOUND)
        return "late"

    fake = await serve([tool_call("fetch_report", {"name": "q3"}), text("never asked")])

    def factory(ctx: AgentChatContext) -> Agent:
        return Agent(fake.model(), tools=[local_tool(fetch_report)], working_dir=ctx.working_dir)

    kit = start(tmp_path, factory)
    try:
        async with asyncio.timeout(BOUND):
            await kit.session.submit("Fetch the Q3 report.")
            await wait_until(lambda: bool(kit.chat.messages and kit.chat.messages[0].blocks), BOUND)
            left = time.monotonic()
            await kit.session.end()
            ended = time.monotonic() - left
            await kit.chat.settled()
        assert ended < 5 and not kit.agent.running  # the worker thread is not waited for
        [reply] = kit.chat.messages
        assert cards(reply) == [("tool_request", "fetch_report"), ("tool_result", "error")]
        result = kit.agent.last_run()
        assert result is not None and result.stop_reason == "interrupted"
        [answer] = [r for t in kit.agent.get_turns() for r in t.tool_results]
        assert answer.is_error and answer.output.startswith("Tool call not run")
        assert_consistent(kit.agent)
        assert len(fake.requests) == 1  # the model was not asked again
    finally:
        stuck.set()  # free the worker thread
