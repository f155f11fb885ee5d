"""Reading the OpenAI SDK's chunks below litellm's stream wrapper (``_direct_stream``).

Each case runs the same loopback server twice, once on the direct path and once with
it switched off (litellm's ``CustomStreamWrapper`` converting every chunk), and
compares what the agent made of it: text, tool calls, usage, the error line. The
direct path must be told apart from the wrapper only by what it costs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from deputy_shiny import Agent, ChatModel, Permissions, tool
from deputy_shiny.events import RequestErrorEvent
from deputy_shiny.models import _provider
from deputy_shiny.models._litellm import get_litellm

from .helpers import collect

BASE = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "x"}
TEXT = "".join(f"t{i:04d} " for i in range(30))
USAGE = {"prompt_tokens": 13, "completion_tokens": 30, "total_tokens": 43}


def _event(payload: object) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _text_events(*, finish: str | None = "stop", usage: bool = True) -> list[bytes]:
    events = [
        _event({**BASE, "choices": [{"index": 0, "delta": {"content": TEXT[i : i + 6]}}]})
        for i in range(0, len(TEXT), 6)
    ]
    if finish:
        stop = {"index": 0, "delta": {}, "finish_reason": finish}
        events.append(_event({**BASE, "choices": [stop]}))
    if usage:
        events.append(_event({**BASE, "choices": [], "usage": USAGE}))
    return events


def _tool_events() -> list[bytes]:
    """Two tool calls, their arguments split across chunks, as OpenAI streams them."""
    calls = [
        {
            "index": 0,
            "id": "call_a",
            "type": "function",
            "function": {"name": "add", "arguments": ""},
        },
        {"index": 0, "function": {"arguments": '{"a": 1, '}},
        {
            "index": 1,
            "id": "call_b",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a"'},
        },
        {"index": 0, "function": {"arguments": '"b": 2}'}},
        {"index": 1, "function": {"arguments": ': 3, "b": 4}'}},
    ]
    events = [
        _event({**BASE, "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
        for call in calls
    ]
    events.append(
        _event({**BASE, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    )
    events.append(_event({**BASE, "choices": [], "usage": USAGE}))
    return events


Replies = list[list[bytes]]
Serve = Callable[[Replies], Awaitable[str]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start a loopback SSE server answering each request with the next reply's events."""
    servers: list[asyncio.Server] = []

    async def start(replies: Replies) -> str:
        queue = list(replies)

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            events = queue.pop(0) if queue else _text_events()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
            )
            writer.write(b"".join(events) + (b"data: [DONE]\n\n" if events else b""))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


@pytest.fixture
def wrapper_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the chunks litellm's wrapper converted (``chunk_creator``)."""
    get_litellm()  # first, so that litellm loads offline (its local price table)
    from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

    calls: list[int] = []
    real = CustomStreamWrapper.chunk_creator

    def counting(self: Any, chunk: Any) -> Any:
        calls.append(1)
        return real(self, chunk=chunk)

    monkeypatch.setattr(CustomStreamWrapper, "chunk_creator", counting)
    return calls


def _model(base: str) -> ChatModel:
    return ChatModel(model="openai/x", api_base=base, api_key="sk-test", retries=0)


async def _run(base: str, *, direct: bool, monkeypatch: pytest.MonkeyPatch, **agent: Any) -> Any:
    with monkeypatch.context() as patch:
        if not direct:
            patch.setattr(_provider, "direct_chunks", lambda stream: None)
        run = Agent(_model(base), **agent)
        events = await collect(run.run("go"))
    return run, events


def _summary(agent: Agent, events: list[Any]) -> dict[str, Any]:
    result = agent.last_run()
    assert result is not None
    return {
        "text": "".join(e.text for e in events if e.type == "text"),
        "errors": [e.error for e in events if isinstance(e, RequestErrorEvent)],
        "stop": result.stop_reason,
        "tokens": (result.usage.input_tokens, result.usage.output_tokens),
        "requests": result.usage.requests,
    }


async def test_text_and_usage_come_from_the_sdk_chunks_alone(
    serve: Serve, wrapper_calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = await serve([_text_events(), _text_events()])
    agent, events = await _run(base, direct=True, monkeypatch=monkeypatch)
    direct = _summary(agent, events)
    assert wrapper_calls == []  # litellm's wrapper converted no chunk
    agent, events = await _run(base, direct=False, monkeypatch=monkeypatch)
    assert wrapper_calls  # the comparison run did go through it
    assert direct == _summary(agent, events)
    assert direct == {
        "text": TEXT,
        "errors": [],
        "stop": "complete",
        "tokens": (13, 30),
        "requests": 1,
    }


async def test_tool_calls_assemble_as_through_the_wrapper(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, int, int]] = []

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        seen.append(("add", a, b))
        return a + b

    runs = []
    for direct in (True, False):
        base = await serve([_tool_events(), _text_events()])
        agent, events = await _run(
            base,
            direct=direct,
            monkeypatch=monkeypatch,
            tools=[tool(add)],
            permissions=Permissions(mode="full"),
        )
        calls = [(e.tool_name, e.arguments) for e in events if e.type == "tool_start"]
        runs.append((calls, _summary(agent, events)))
    assert runs[0] == runs[1]
    assert runs[0][0] == [("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})]
    assert seen == [("add", 1, 2), ("add", 3, 4)] * 2


async def test_a_provider_without_usage_gets_litellms_count(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = await serve([_text_events(usage=False), _text_events(usage=False)])
    direct = _summary(*await _run(base, direct=True, monkeypatch=monkeypatch))
    wrapped = _summary(*await _run(base, direct=False, monkeypatch=monkeypatch))
    litellm = get_litellm()
    reply = litellm.token_counter(model="openai/x", text=TEXT, count_response_tokens=True)
    assert direct["tokens"][1] == reply == wrapped["tokens"][1]
    assert direct["tokens"][0] > 0 and wrapped["tokens"][0] > 0


@pytest.mark.parametrize(
    ("name", "events"),
    [
        ("no finish reason", _text_events(finish=None, usage=False)),
        ("upstream abort", _text_events(finish="abort", usage=False)),
        (
            "error event",
            [
                *_text_events(finish=None, usage=False)[:2],
                _event({"error": {"message": "overloaded, try later"}}),
            ],
        ),
        (
            "cut mid-event",
            [*_text_events(finish=None, usage=False)[:2], b'data: {"id": "c1", "cho'],
        ),
    ],
)
async def test_a_broken_stream_fails_as_through_the_wrapper(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, name: str, events: list[bytes]
) -> None:
    base = await serve([events, events])
    direct = _summary(*await _run(base, direct=True, monkeypatch=monkeypatch))
    wrapped = _summary(*await _run(base, direct=False, monkeypatch=monkeypatch))
    assert direct == wrapped, name
    assert direct["stop"] == "provider_error" and len(direct["errors"]) == 1


async def test_an_app_listening_to_litellm_keeps_the_wrapper(
    serve: Serve, wrapper_calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    litellm = get_litellm()
    seen: list[str] = []

    async def success(kwargs: dict[str, Any], response: Any, start: Any, end: Any) -> None:
        seen.append(response.choices[0].message.content)

    monkeypatch.setattr(litellm, "_async_success_callback", [success])
    monkeypatch.setattr(litellm, "success_callback", [])
    monkeypatch.setattr(litellm, "callbacks", [])
    base = await serve([_text_events()])
    agent, events = await _run(base, direct=True, monkeypatch=monkeypatch)
    assert _summary(agent, events)["text"] == TEXT
    assert wrapper_calls  # the app's callback needs the wrapper's whole response
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.02)
    assert seen == [TEXT]


async def test_post_call_rules_keep_the_wrapper(
    serve: Serve, wrapper_calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    litellm = get_litellm()
    checked: list[str] = []

    def rule(text: str) -> dict[str, Any]:
        checked.append(text)
        return {"decision": True}

    monkeypatch.setattr(litellm, "post_call_rules", [rule])
    base = await serve([_text_events()])
    agent, events = await _run(base, direct=True, monkeypatch=monkeypatch)
    assert _summary(agent, events)["text"] == TEXT
    assert wrapper_calls and checked  # litellm enforced the app's rule on the stream


async def test_cached_tokens_are_read_on_both_paths(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    # OpenAI reports the cached part of the prompt as prompt_tokens_details.cached_tokens:
    # on the direct path it is the SDK's CompletionUsage, through the wrapper litellm's Usage.
    cached = {**USAGE, "prompt_tokens_details": {"cached_tokens": 8}}
    events = [*_text_events(usage=False), _event({**BASE, "choices": [], "usage": cached})]
    seen = []
    for direct in (True, False):
        base = await serve([events])
        agent, run_events = await _run(base, direct=direct, monkeypatch=monkeypatch)
        result = agent.last_run()
        assert result is not None
        (end,) = [e for e in run_events if e.type == "request_end"]
        seen.append(
            (
                end.usage.cached_tokens,
                result.usage.cached_tokens,
                result.cost.cached_tokens,
                agent.cost().cached_tokens,
                result.usage.input_tokens,
            )
        )
    assert seen == [(8, 8, 8, 8, 13)] * 2
