"""A provider that accepts a request and never answers, or stalls mid-reply, cannot hold a run.

Every test goes through litellm and the OpenAI client to a loopback server
(``helpers.silent_chat_server``) that reads the request and then sends nothing (or one
chunk, or a 401). The defaults are asserted as values and as deadline arithmetic; the
wire runs use the same settings scaled down, so no test waits minutes.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import re
import weakref
from collections.abc import AsyncIterator, Iterator

import pytest

from deputy_shiny import Agent
from deputy_shiny._util.timeouts import timeout
from deputy_shiny.errors import (
    CredentialsRefusedError,
    MissingCredentialsError,
    ProviderError,
    ProviderTimeoutError,
)
from deputy_shiny.events import (
    AgentEvent,
    RequestErrorEvent,
    RequestStartEvent,
    RetryEvent,
    StopEvent,
    WaitingEvent,
)
from deputy_shiny.models import ChatModel
from deputy_shiny.models._provider import MAX_BACKOFF
from deputy_shiny.shiny import render_events

from .helpers import STALLED_CHUNK, SilentServer, collect, silent_chat_server, wait_until

KEY = "sk-test-TIMEOUTS42"
LIMIT = 240.0  # the bound: a silent provider ends a run within 4 minutes


REFUSED_BODY = (
    b'{"error":{"message":"Incorrect API key provided: sk-test-TIMEOUTS42.",'
    b'"type":"invalid_request_error","code":"invalid_api_key"}}'
)
REFUSED = (
    b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: " + str(len(REFUSED_BODY)).encode() + b"\r\n\r\n" + REFUSED_BODY
)


@pytest.fixture(scope="module", autouse=True)
def _warm_wire() -> None:
    """One request over the OpenAI client first: its first use in a process imports and
    builds for a second or more, which the sub-second limits here must not count."""
    for server in silent_chat_server(REFUSED):
        with pytest.raises(CredentialsRefusedError):
            Agent(wire_model(server, retries=0)).run_sync("warm up")


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    yield from silent_chat_server()


@pytest.fixture
def stalling() -> Iterator[SilentServer]:
    yield from silent_chat_server(STALLED_CHUNK)


@pytest.fixture
def refusing() -> Iterator[SilentServer]:
    yield from silent_chat_server(REFUSED)


def wire_model(server: SilentServer, **settings: object) -> ChatModel:
    return ChatModel(model="openai/gpt-4.1-mini", api_base=server.url, api_key=KEY, **settings)  # type: ignore[arg-type]


def host_of(server: SilentServer) -> str:
    return server.url.removeprefix("http://").removesuffix("/v1")


def seconds_between(events: list[AgentEvent], first: type, last: type) -> float:
    start = next(e for e in events if isinstance(e, first))
    end = next(e for e in reversed(events) if isinstance(e, last))
    return end.timestamp - start.timestamp


def test_the_defaults_end_a_silent_run_within_four_minutes() -> None:
    model = ChatModel(model="openai/gpt-4.1-mini")
    assert model.timeout == 60.0  # the first byte: at most a minute
    assert model.reply_idle_timeout == 60.0  # between two chunks, the same by default
    assert model.total_timeout == 180.0
    assert model.retries == 2
    # Silent before the first chunk: every attempt and every wait between them ends at
    # total_timeout (no retry starts after it; the last attempt's wait is cut at it).
    assert model.total_timeout < LIMIT
    # Even without the total, three 60 s attempts and the longest backoffs stay inside.
    unbounded = (model.retries + 1) * model.timeout + model.retries * MAX_BACKOFF
    assert unbounded < LIMIT
    # Stalled mid-reply: not retried (text arrived), so one idle wait.
    assert model.reply_idle_timeout < LIMIT
    # The client's own timeout is only a backstop beyond the agent's own limits.
    assert model.request_kwargs()["timeout"] > model.timeout
    # None turns a limit off, on purpose only.
    assert ChatModel(model="openai/x", timeout=None).request_kwargs().get("timeout") is None
    with pytest.raises(ValueError):
        ChatModel(model="openai/x", timeout=0)


async def test_a_silent_provider_ends_the_run_with_a_typed_error_naming_host_and_limit(
    silent: SilentServer,
) -> None:
    # The defaults scaled down 200 times: 0.3 s to start, 0.9 s in all, two retries.
    model = wire_model(silent, timeout=0.3, total_timeout=0.9, retry_delay=0.0025)
    agent = Agent(model)
    events = await collect(agent.run("hi"))
    host = host_of(silent)
    errors = [e.error for e in events if isinstance(e, RequestErrorEvent)]
    first = f"openai: {host} sent nothing for 0.3 s, so the request timed out"
    assert errors[0] == f"{first} (ChatModel(timeout=...) sets it)"
    assert len(silent.requests) == len(errors) == 3  # the first try, then two retries
    assert errors[-1].startswith(f"openai: {host} sent nothing for ")
    assert errors[-1].endswith(
        "its 0.9 s for all attempts are spent (ChatModel(total_timeout=...) sets it)"
    )
    stop = events[-1]
    assert isinstance(stop, StopEvent) and stop.stop_reason == "provider_error"
    # The whole run stayed inside the total (plus a busy machine's slack).
    assert seconds_between(events, RequestStartEvent, RequestErrorEvent) < 0.9 + 5
    # While nothing arrived, the run said so: a quarter and three quarters of the limit.
    waiting = [e for e in events if isinstance(e, WaitingEvent)]
    assert waiting and all(e.host == host and not e.started for e in waiting)
    assert waiting[0].limit == 0.3 and 0.07 <= waiting[0].seconds < 0.3
    # run_async raises it typed, with the host and the limit as fields.
    with pytest.raises(ProviderTimeoutError) as raised:
        await Agent(wire_model(silent, timeout=0.3, retries=0)).run_async("hi")
    assert (raised.value.host, raised.value.limit, raised.value.phase) == (host, 0.3, "first_byte")
    assert raised.value.transient
    assert KEY not in str(raised.value)


async def test_retries_stay_inside_the_total_deadline(silent: SilentServer) -> None:
    model = wire_model(silent, timeout=0.4, retries=10, retry_delay=0.0, total_timeout=1.0)
    events = await collect(Agent(model).run("hi"))
    starts = [e for e in events if isinstance(e, RequestStartEvent)]
    retries = [e for e in events if isinstance(e, RetryEvent)]
    # 0.4 + 0.4 + (what is left: 0.2): three attempts of the eleven allowed.
    assert len(starts) == 3 and len(retries) == 2
    last = [e for e in events if isinstance(e, RequestErrorEvent)][-1]
    assert "its 1 s for all attempts are spent" in last.error
    assert seconds_between(events, RequestStartEvent, RequestErrorEvent) < 1.0 + 5


async def test_a_reply_that_stalls_mid_stream_ends_on_the_idle_limit(
    stalling: SilentServer,
) -> None:
    model = wire_model(stalling, timeout=30, idle_timeout=0.3, retry_delay=0.0)
    agent = Agent(model)
    events = await collect(agent.run("hi"))
    assert "".join(e.text for e in events if e.type == "text") == "Hello"  # type: ignore[union-attr]
    errors = [e.error for e in events if isinstance(e, RequestErrorEvent)]
    host = host_of(stalling)
    assert errors == [
        f"openai: {host} sent nothing for 0.3 s, so the request timed out "
        "(ChatModel(idle_timeout=...) sets it)"
    ]  # it streamed, so it was not retried
    waiting = [e for e in events if isinstance(e, WaitingEvent)]
    assert waiting and all(e.started and e.limit == 0.3 for e in waiting)
    assert agent.get_turns()[-1].text == "Hello"  # what came is kept
    assert seconds_between(events, RequestStartEvent, StopEvent) < 5


async def _stop_once_sent(agent: Agent, server: SilentServer) -> list[AgentEvent]:
    """Run ``agent`` and stop it once its request reached ``server``; its events."""

    async def stop() -> None:
        await wait_until(lambda: bool(server.requests), within=20)
        await asyncio.sleep(0.2)  # the provider now "thinks"
        agent.interrupt()

    stopper = asyncio.create_task(stop())
    async with timeout(30):  # its timer holds no context (the session test needs that)
        events = await collect(agent.run("hi"))
    await stopper
    return events


async def test_stop_while_waiting_for_the_first_byte_ends_the_run_at_once(
    silent: SilentServer,
) -> None:
    agent = Agent(wire_model(silent, timeout=30))
    events = await _stop_once_sent(agent, silent)
    stop = events[-1]
    assert isinstance(stop, StopEvent) and stop.stop_reason == "interrupted"
    assert seconds_between(events, RequestStartEvent, StopEvent) < 10  # not the 30 s limit
    assert not any(isinstance(e, RequestErrorEvent) for e in events)
    # The connection was closed, not left waiting for a provider that never answers.
    await wait_until(lambda: bool(silent.hang_ups), within=5)
    assert len(silent.requests) == len(silent.hang_ups) == 1


async def test_a_stopped_wait_leaves_nothing_of_the_session_behind(silent: SilentServer) -> None:
    """The reader task and the watch's timer hold no session once the run ends (rule 9):
    here the run's context holds a stand-in for Shiny's session, as the kit's does."""

    class Session:
        pass

    holder: contextvars.ContextVar[object] = contextvars.ContextVar("session")

    async def run(session: Session) -> list[AgentEvent]:
        holder.set(session)
        return await _stop_once_sent(Agent(wire_model(silent, timeout=600)), silent)

    session = Session()
    gone = weakref.ref(session)
    events = await asyncio.create_task(run(session))
    assert events[-1].type == "stop"
    del session
    await asyncio.sleep(0)  # the handle that woke this test holds the run's task until then
    gc.collect()
    assert gone() is None


async def test_a_key_that_is_present_but_wrong_says_the_key_was_refused(
    refusing: SilentServer,
) -> None:
    agent = Agent(wire_model(refusing, retry_delay=0.0))
    with pytest.raises(ProviderError) as raised:
        await agent.run_async("hi")
    error = raised.value
    assert isinstance(error, CredentialsRefusedError)
    assert not isinstance(error, MissingCredentialsError)  # the key is there
    assert error.status_code == 401 and not error.transient
    assert str(error) == (
        "openai returned 401: Incorrect API key provided: sk-test…. "
        "(the API key was refused: check it)"
    )
    assert len(refusing.requests) == 1  # not retried: the same key would be refused again


async def test_the_kit_shows_the_waiting_note_as_inert_text() -> None:
    base = {"agent_id": "a", "session_id": "s", "run_id": "r"}

    async def events() -> AsyncIterator[AgentEvent]:
        yield WaitingEvent(**base, model="openai/x", host="<img src=x onerror=alert(1)>",
                           seconds=45.3, limit=60.0)  # fmt: skip
        yield StopEvent(**base, stop_reason="interrupted")

    chunks = [chunk async for chunk in render_events(events())]
    text = "".join(c for c in chunks if isinstance(c, str))
    assert not re.search(r"(?<!\\)<", text)  # every markdown character escaped: "\\<img"
    shown = re.sub(r"\\(.)", r"\1", text)
    assert "> Still waiting for <img src=x onerror=alert(1)> (45 s)… Stop to give up" in shown
