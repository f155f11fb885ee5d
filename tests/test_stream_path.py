"""The per-chunk path: what litellm is spared, and what must stay (usage, cost, an app's callbacks).

``_provider.lighten`` switches off, on our own stream only, litellm's end-of-stream
rebuild and success logging while no app listens to litellm. These tests pin both
sides: the rebuild does not run, usage and cost stay right (from the scripted provider
and over a real HTTP wire), a provider that reports no usage still gets litellm's
estimate (its token count), and an app's litellm callback still fires with the whole
response.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from deputy_shiny import Agent, ChatModel
from deputy_shiny.models import _provider
from deputy_shiny.models._litellm import get_litellm
from deputy_shiny.testing import ScriptedModel, ScriptedReply

from .helpers import sse_chat_server

TEXT = "".join(f"w{i:05d}" for i in range(40))


@pytest.fixture
def rebuilds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts litellm's end-of-stream rebuilds (``stream_chunk_builder`` over all chunks)."""
    litellm = get_litellm()
    calls: list[int] = []
    real = litellm.stream_chunk_builder

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(len(kwargs.get("chunks") or args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(litellm, "stream_chunk_builder", counting)
    return calls


def _sse_server(*, usage: bool) -> Iterator[str]:
    """A fake OpenAI-compatible server streaming TEXT as chat-completion chunks."""
    deltas = [{"content": TEXT[i : i + 6]} for i in range(0, len(TEXT), 6)]
    numbers = {"prompt_tokens": 11, "completion_tokens": 40, "total_tokens": 51}
    yield from sse_chat_server(deltas, numbers if usage else None)


@pytest.fixture
def wire() -> Iterator[str]:
    yield from _sse_server(usage=True)


@pytest.fixture
def wire_without_usage() -> Iterator[str]:
    yield from _sse_server(usage=False)


def _wire_model(api_base: str) -> ChatModel:
    return ChatModel(model="openai/x", api_base=api_base, api_key="sk-test")


async def test_scripted_usage_and_cost_stay_without_the_rebuild(rebuilds: list[int]) -> None:
    model = ScriptedModel(
        [
            ScriptedReply(
                text=TEXT,
                chunk_size=6,
                usage={"prompt_tokens": 7, "completion_tokens": 40},
                cost=0.25,
            )
        ]
    )
    result = await Agent(model).run_async("go")
    assert result.response == TEXT
    assert (result.usage.input_tokens, result.usage.output_tokens) == (7, 40)
    assert result.cost.total == pytest.approx(0.25) and result.cost.complete
    assert rebuilds == []  # no app listens: litellm's rebuild was not needed


async def test_a_run_and_its_streams_are_freed_without_the_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lightened stream (with all its chunks) and the Agent that ran it are freed by
    reference count as the run ends: neither is left in a cycle for a full collection."""
    streams: list[weakref.ref[Any]] = []
    lightened: list[bool] = []
    real = _provider.lighten

    def recording(stream: Any) -> bool:
        streams.append(weakref.ref(stream))
        lightened.append(real(stream))
        return lightened[-1]

    monkeypatch.setattr(_provider, "lighten", recording)
    usage = {"prompt_tokens": 7, "completion_tokens": 40}
    model = ScriptedModel([ScriptedReply(text=TEXT, chunk_size=6, usage=usage)])
    gc.collect()
    gc.disable()
    try:
        agent = Agent(model)
        result = await agent.run_async("go")
        assert result.response == TEXT and lightened == [True]
        refs = [weakref.ref(agent), *streams]
        del agent, result
        for _ in range(100):  # the stream's last callbacks run on the loop's next turns
            if all(ref() is None for ref in refs):
                break
            await asyncio.sleep(0.01)
        assert [ref() for ref in refs] == [None, None]
    finally:
        gc.enable()


async def test_wire_usage_stays_without_the_rebuild(wire: str, rebuilds: list[int]) -> None:
    agent = Agent(_wire_model(wire))
    texts = [event.text async for event in agent.run("go") if event.type == "text"]
    result = agent.last_run()
    assert "".join(texts) == TEXT == result.response
    assert (result.usage.input_tokens, result.usage.output_tokens) == (11, 40)
    assert rebuilds == []


async def test_a_provider_without_usage_still_gets_litellms_estimate(
    wire_without_usage: str, rebuilds: list[int]
) -> None:
    result = await Agent(_wire_model(wire_without_usage)).run_async("go")
    assert result.response == TEXT
    litellm = get_litellm()
    reply = litellm.token_counter(model="openai/x", text=TEXT, count_response_tokens=True)
    assert result.usage.input_tokens > 0 and result.usage.output_tokens == reply
    # litellm counted them without rebuilding the response (the SDK's chunks were read
    # directly: tests/test_direct_stream.py compares that path with the wrapper's).
    assert rebuilds == []


@pytest.fixture
def no_app_callbacks(monkeypatch: pytest.MonkeyPatch) -> Any:
    """litellm's callback lists, empty for the test and restored after it (litellm moves
    async functions from ``success_callback`` to ``_async_success_callback``)."""
    litellm = get_litellm()
    for name in ("callbacks", "success_callback", "_async_success_callback"):
        monkeypatch.setattr(litellm, name, [])
    return litellm


async def _settle(seen: list[Any], count: int) -> None:
    for _ in range(100):  # litellm dispatches its callbacks in a task of their own
        if len(seen) >= count:
            return
        await asyncio.sleep(0.02)


async def test_an_apps_litellm_callbacks_still_fire(
    no_app_callbacks: Any, wire: str, rebuilds: list[int]
) -> None:
    from litellm.integrations.custom_logger import CustomLogger

    seen: list[tuple[str, str, int]] = []
    model = ChatModel(model="openai/callbacks", api_base=wire, api_key="sk-test")

    def ours(kwargs: dict[str, Any]) -> bool:
        # An earlier test's request may still be logging (litellm logs in a task of its
        # own): count only this test's.
        return str(kwargs.get("model", "")).endswith("callbacks")

    class AppLogger(CustomLogger):  # type: ignore[misc]
        async def async_log_success_event(
            self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
        ) -> None:
            if ours(kwargs):
                text = response_obj.choices[0].message.content
                seen.append(("logger", text, response_obj.usage.completion_tokens))

    async def success(kwargs: dict[str, Any], response: Any, start: Any, end: Any) -> None:
        if ours(kwargs):
            usage = response.usage.total_tokens
            seen.append(("function", response.choices[0].message.content, usage))

    no_app_callbacks.callbacks.append(AppLogger())
    no_app_callbacks.success_callback.append(success)
    result = await Agent(model).run_async("go")
    await _settle(seen, 2)
    assert result.response == TEXT
    assert (result.usage.input_tokens, result.usage.output_tokens) == (11, 40)
    # Each saw the whole response, as litellm assembles it for callbacks.
    assert sorted(seen) == [("function", TEXT, 51), ("logger", TEXT, 40)]
    assert rebuilds


async def test_a_callback_passed_with_the_request_still_fires(
    no_app_callbacks: Any, wire: str
) -> None:
    seen: list[str] = []

    async def success(kwargs: dict[str, Any], response: Any, start: Any, end: Any) -> None:
        seen.append(response.choices[0].message.content)

    model = _wire_model(wire).model_copy(update={"params": {"success_callback": [success]}})
    await Agent(model).run_async("go")
    await _settle(seen, 1)
    assert seen == [TEXT]
