"""Scripted test models, the litellm bridge and the demo model, driven through litellm itself."""

from __future__ import annotations

import asyncio
import gc
import json
import re
import subprocess
import sys
import threading
import time
from types import ModuleType
from typing import Any

import pytest
from pydantic import ValidationError

from deputy_shiny.errors import ConfigurationError
from deputy_shiny.models import (
    DEMO_MODEL,
    DEMO_PROVIDER,
    ChatModel,
    _custom_provider,
    _litellm,
    resolve_model,
)
from deputy_shiny.models._provider import (
    COST_FIELD,
    classify_provider_error,
    deputy_error_cause,
    reported_cost,
)
from deputy_shiny.models.demo import INTRO, demo_reply, ensure_demo_registered
from deputy_shiny.testing import (
    FunctionModel,
    ProviderFailure,
    ScriptedModel,
    ScriptedModelExhausted,
    ScriptedReply,
    ScriptedToolCall,
)

USER = [{"role": "user", "content": "Hello there"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def litellm() -> ModuleType:
    return _litellm.get_litellm()


async def stream(model: Any, messages: list[Any] | None = None, **kwargs: Any) -> list[Any]:
    """All chunks of one streamed request, the way the engine makes it."""
    litellm = _litellm.get_litellm()
    kwargs.setdefault("stream_options", {"include_usage": True})
    name = model.model if isinstance(model, ChatModel) else model.as_chat_model().model
    response = await litellm.acompletion(
        model=name, messages=messages or USER, stream=True, **kwargs
    )
    return [chunk async for chunk in response]


def assemble(chunks: list[Any]) -> dict[str, Any]:
    """Fold stream chunks into a message the normal OpenAI way."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage = finish = cost = None
    for chunk in chunks:
        if cost is None:
            cost = reported_cost(chunk)
        if getattr(chunk, "usage", None) is not None:
            usage = chunk.usage
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        if choice.delta.content:
            text.append(choice.delta.content)
        for delta in choice.delta.tool_calls or ():
            slot = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
            if delta.id:
                slot["id"] = delta.id
            if delta.function.name:
                slot["name"] += delta.function.name
            if delta.function.arguments:
                slot["arguments"] += delta.function.arguments
        if choice.finish_reason:
            finish = choice.finish_reason
    return {
        "text": "".join(text),
        "pieces": text,
        "calls": [calls[i] for i in sorted(calls)],
        "usage": usage,
        "finish": finish,
        "cost": cost,
    }


# --------------------------------------------------------------------------- import


def test_importing_testing_and_demo_does_not_import_litellm() -> None:
    code = (
        "import sys\n"
        "import deputy_shiny.testing, deputy_shiny.models.demo\n"
        "import deputy_shiny.models._custom_provider\n"
        "from deputy_shiny.testing import ScriptedModel, FunctionModel\n"
        "m = ScriptedModel(['hi']); f = FunctionModel(lambda m, t: 'x')\n"
        "deputy_shiny.models.demo.ensure_demo_registered()\n"
        "from deputy_shiny.models import resolve_model; resolve_model('deputy/demo')\n"
        "assert m.as_chat_model().model.startswith('deputy-scripted-')\n"
        "print('litellm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_model_created_before_litellm_import_is_installed_on_import(
    litellm: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Simulate "litellm not imported yet": registration must be deferred, then installed.
    monkeypatch.setattr(_litellm, "_module", None)
    model = ScriptedModel(["Installed late."])
    provider = model.as_chat_model().provider
    assert provider in _litellm._pending
    assert _litellm.get_litellm() is litellm
    assert provider not in _litellm._pending
    assert any(e["provider"] == provider for e in litellm.custom_provider_map)
    assert assemble(await stream(model))["text"] == "Installed late."


# --------------------------------------------------------------------------- streaming


async def test_text_streams_in_chunk_size_pieces(litellm: ModuleType) -> None:
    model = ScriptedModel([ScriptedReply(text="The quick brown fox jumps", chunk_size=8), "Hi!"])
    chunks = await stream(model)
    result = assemble(chunks)
    assert result["pieces"] == ["The quic", "k brown ", "fox jump", "s"]
    assert result["finish"] == "stop"
    assert result["calls"] == []
    # Exactly one chunk carries usage, and it is the last one.
    with_usage = [c for c in chunks if getattr(c, "usage", None) is not None]
    assert with_usage == [chunks[-1]]
    # A plain str reply uses the default chunk size of 8.
    assert assemble(await stream(model))["pieces"] == ["Hi!"]


async def test_empty_reply_streams_just_a_finish(litellm: ModuleType) -> None:
    result = assemble(await stream(ScriptedModel([""])))
    assert (result["text"], result["calls"], result["finish"]) == ("", [], "stop")
    assert result["usage"].completion_tokens == 1


async def test_single_tool_call_with_explicit_id(litellm: ModuleType) -> None:
    call = ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}, id="call_abc")
    result = assemble(await stream(ScriptedModel([ScriptedReply(tool_calls=[call])])))
    assert result["finish"] == "tool_calls"
    assert result["calls"] == [
        {"id": "call_abc", "name": "get_weather", "arguments": '{"city": "Paris"}'}
    ]
    assert result["text"] == ""


async def test_parallel_tool_calls_and_malformed_json_survive_the_stream_wrapper(
    litellm: ModuleType,
) -> None:
    malformed = '{"city": "Par'  # cut off mid-string: must arrive byte for byte
    reply = ScriptedReply(
        text="Checking.",
        tool_calls=[
            ScriptedToolCall(name="get_weather", arguments={"city": "Paris", "days": 3}),
            ScriptedToolCall(name="get_weather", arguments=malformed),
            ScriptedToolCall(name="noop", arguments=""),
        ],
        chunk_size=5,
    )
    model = ScriptedModel([reply, reply])
    chunks = await stream(model)
    result = assemble(chunks)
    assert result["text"] == "Checking."
    assert [c["name"] for c in result["calls"]] == ["get_weather", "get_weather", "noop"]
    assert json.loads(result["calls"][0]["arguments"]) == {"city": "Paris", "days": 3}
    assert result["calls"][1]["arguments"] == malformed
    assert result["calls"][2]["arguments"] == ""
    ids = [c["id"] for c in result["calls"]]
    assert all(re.fullmatch(r"call_[0-9a-f]+", i) for i in ids)
    assert len(set(ids)) == 3
    # Arguments stream in chunk_size pieces; only a call's first delta has id and name.
    deltas = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or ()]
    first = [d for d in deltas if d.index == 0]
    assert len(first) == len(json.dumps({"city": "Paris", "days": 3})) // 5 + 1
    assert first[0].id and first[0].function.name == "get_weather"
    assert all(d.id is None and not d.function.name for d in first[1:])
    assert result["finish"] == "tool_calls"
    # Generated ids are fresh for every request, even for the same reply object.
    again = assemble(await stream(model))
    assert not set(ids) & {c["id"] for c in again["calls"]}


async def test_non_streaming_acompletion(litellm: ModuleType) -> None:
    model = ScriptedModel(
        [
            ScriptedReply(
                text="Sure.",
                tool_calls=[ScriptedToolCall(name="get_weather", arguments="{bad", id="c1")],
                usage={"prompt_tokens": 12, "completion_tokens": 3},
                cost=0.02,
            ),
            ScriptedReply(tool_calls=[ScriptedToolCall(name="noop", id="c2")]),
        ]
    )
    name = model.as_chat_model().model
    response = await litellm.acompletion(model=name, messages=USER)
    message = response.choices[0].message
    assert message.content == "Sure."
    assert [(t.id, t.function.name, t.function.arguments) for t in message.tool_calls] == [
        ("c1", "get_weather", "{bad")
    ]
    assert response.choices[0].finish_reason == "tool_calls"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (12, 3)
    assert reported_cost(response) == 0.02
    only_tools = await litellm.acompletion(model=name, messages=USER)
    assert only_tools.choices[0].message.content is None
    assert only_tools.choices[0].message.tool_calls[0].function.arguments == "{}"
    assert reported_cost(only_tools) is None


def test_sync_completion_streaming_and_not(litellm: ModuleType) -> None:
    model = ScriptedModel([ScriptedReply(text="Sync stream!", chunk_size=4, cost=0.5), "Plain."])
    name = model.as_chat_model().model
    chunks = list(litellm.completion(model=name, messages=USER, stream=True))
    result = assemble(chunks)
    assert result["pieces"] == ["Sync", " str", "eam!"]
    assert result["cost"] == 0.5
    response = litellm.completion(model=name, messages=USER)
    assert response.choices[0].message.content == "Plain."


# --------------------------------------------------------------------------- usage & cost


async def test_usage_given_reaches_the_final_chunk(litellm: ModuleType) -> None:
    reply = ScriptedReply(text="ok", usage={"prompt_tokens": 11, "completion_tokens": 7})
    usage = assemble(await stream(ScriptedModel([reply])))["usage"]
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (11, 7, 18)


async def test_usage_is_estimated_at_four_characters_a_token(litellm: ModuleType) -> None:
    messages = [
        {"role": "system", "content": "s" * 10},
        {"role": "user", "content": [{"type": "text", "text": "u" * 10}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "a" * 7}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "t" * 12},
    ]  # 10 + 10 + (1 + 7) + 12 = 40 characters
    args = {"k": "v" * 10}  # '{"k": "vvvvvvvvvv"}' is 19 characters
    reply = ScriptedReply(text="x" * 21, tool_calls=[ScriptedToolCall(name="f", arguments=args)])
    usage = assemble(await stream(ScriptedModel([reply]), messages))["usage"]
    assert usage.prompt_tokens == 10
    assert usage.completion_tokens == 10  # ceil((21 + 19) / 4)


async def test_cost_reaches_the_consumer_through_litellm(litellm: ModuleType) -> None:
    model = ScriptedModel(
        [
            ScriptedReply(text="Priced reply.", cost=0.25),
            ScriptedReply(tool_calls=[ScriptedToolCall(name="f")], cost=0.0),
            ScriptedReply(text="Priced, no usage requested.", cost=1.5),
            "Unpriced.",
        ]
    )
    chunks = await stream(model)
    costs = [reported_cost(c) for c in chunks]
    assert [c for c in costs if c is not None] == [0.25]
    # It arrives before the finish chunk, so the engine has it once the stream ends.
    assert costs.index(0.25) < len(chunks) - 1
    assert chunks[-1].usage.cost == 0.25  # litellm keeps it in the usage block too
    assert assemble(await stream(model))["cost"] == 0.0
    assert assemble(await stream(model, stream_options=None))["cost"] == 1.5
    unpriced = await stream(model)
    assert all(reported_cost(c) is None for c in unpriced)


def test_reported_cost_reads_only_its_own_field() -> None:
    class Holder:
        def __init__(self, **fields: Any) -> None:
            self.__dict__.update(fields)

    delta = Holder(provider_specific_fields={COST_FIELD: 3})
    assert reported_cost(Holder(choices=[Holder(delta=delta)])) == 3.0
    other = Holder(provider_specific_fields={"cost": 3, COST_FIELD: True})
    assert reported_cost(Holder(choices=[Holder(delta=other)])) is None
    assert reported_cost(Holder(choices=[], provider_specific_fields={COST_FIELD: 0.5})) == 0.5
    assert reported_cost(None) is None


# --------------------------------------------------------------------------- errors


async def test_exception_reply_is_raised_by_the_request(litellm: ModuleType) -> None:
    error = litellm.RateLimitError("slow down", llm_provider="x", model="x/y")
    model = ScriptedModel([error, ValueError("broken test double"), "After."])
    name = model.as_chat_model().model
    with pytest.raises(litellm.RateLimitError) as caught:
        await litellm.acompletion(model=name, messages=USER, stream=True)
    assert caught.value is error
    assert classify_provider_error(caught.value) == (True, 429)
    # A plain exception is wrapped by litellm, before any chunk.
    with pytest.raises(litellm.APIConnectionError) as wrapped:
        await litellm.acompletion(model=name, messages=USER, stream=True)
    assert isinstance(wrapped.value.__context__, ValueError)
    assert classify_provider_error(wrapped.value) == (False, None)
    assert assemble(await stream(model))["text"] == "After."


@pytest.mark.parametrize(
    ("status", "cls_name", "transient"),
    [
        (400, "BadRequestError", False),
        (401, "AuthenticationError", False),
        (403, "PermissionDeniedError", False),
        (404, "NotFoundError", False),
        (408, "Timeout", True),
        (409, "BadRequestError", False),
        (429, "RateLimitError", True),
        (500, "InternalServerError", True),
        (502, "BadGatewayError", True),
        (503, "ServiceUnavailableError", True),
        (504, "Timeout", True),
        (529, "APIError", False),
    ],
)
async def test_provider_failure_becomes_the_providers_litellm_exception(
    litellm: ModuleType, status: int, cls_name: str, transient: bool
) -> None:
    model = ScriptedModel([ProviderFailure(status), ProviderFailure(status)])
    name = model.as_chat_model().model
    for stream_flag in (True, False):
        with pytest.raises(getattr(litellm, cls_name)) as caught:
            await litellm.acompletion(model=name, messages=USER, stream=stream_flag)
        expected_status = 400 if status == 409 else status  # litellm folds other 4xx into 400
        assert caught.value.status_code == expected_status
        assert classify_provider_error(caught.value) == (transient, expected_status)


@pytest.mark.parametrize(
    ("error", "classified"),
    [
        (ConnectionResetError("reset by peer"), (True, None)),
        (TimeoutError("took too long"), (True, None)),
        (ValueError("a bug, not an outage"), (False, None)),
    ],
)
async def test_plain_exceptions_before_and_mid_stream(
    litellm: ModuleType, error: Exception, classified: tuple[bool, int | None]
) -> None:
    model = ScriptedModel(
        [error, ScriptedReply(text="partial text", error=error, error_after_chunks=1)]
    )
    name = model.as_chat_model().model
    with pytest.raises(litellm.APIConnectionError) as before:
        await litellm.acompletion(model=name, messages=USER, stream=True)
    assert before.value.status_code == 500
    assert classify_provider_error(before.value) == classified
    response = await litellm.acompletion(model=name, messages=USER, stream=True)
    received = [await anext(response)]
    with pytest.raises(litellm.exceptions.MidStreamFallbackError) as mid:
        await anext(response)
    assert [c.choices[0].delta.content for c in received] == ["partial "]
    assert isinstance(mid.value.original_exception, litellm.APIConnectionError)
    assert classify_provider_error(mid.value) == classified


async def test_mid_stream_provider_failures(litellm: ModuleType) -> None:
    text = "One two three four five"
    model = ScriptedModel(
        [
            ScriptedReply(text=text, error=ProviderFailure(503), error_after_chunks=2),
            ScriptedReply(text=text, error=ProviderFailure(429)),  # before the first chunk
            ScriptedReply(text=text, error=ProviderFailure(401), error_after_chunks=1),
            ScriptedReply(text="abc", error=ProviderFailure(500), error_after_chunks=99),
            ScriptedReply(text=text, error=ProviderFailure(408), error_after_chunks=1),
            ScriptedReply(text=text, error=ProviderFailure(504), error_after_chunks=1),
        ]
    )

    async def run() -> BaseException:
        with pytest.raises(Exception) as caught:
            await stream(model)
        return caught.value

    error = await run()
    assert isinstance(error, litellm.exceptions.MidStreamFallbackError)
    assert error.status_code == 503
    assert isinstance(error.original_exception, litellm.ServiceUnavailableError)
    assert error.generated_content == "One two three fo"  # the two chunks before the error
    assert classify_provider_error(error) == (True, 503)
    error = await run()
    assert isinstance(error, litellm.exceptions.MidStreamFallbackError)
    assert error.is_pre_first_chunk and error.generated_content == ""
    assert classify_provider_error(error) == (True, 429)
    error = await run()
    assert type(error) is litellm.AuthenticationError  # 4xx other than 429: not wrapped
    assert classify_provider_error(error) == (False, 401)
    error = await run()
    assert isinstance(error, litellm.exceptions.MidStreamFallbackError)
    assert error.generated_content == "abc"  # error_after_chunks past the end: after all text
    assert classify_provider_error(error) == (True, 500)
    error = await run()
    assert type(error) is litellm.Timeout  # a 4xx: not wrapped
    assert classify_provider_error(error) == (True, 408)
    error = await run()
    assert isinstance(error, litellm.exceptions.MidStreamFallbackError)
    assert isinstance(error.original_exception, litellm.Timeout)
    assert classify_provider_error(error) == (True, 504)


def test_classify_provider_error_on_litellm_exceptions(litellm: ModuleType) -> None:
    common = {"llm_provider": "p", "model": "p/m"}
    assert classify_provider_error(litellm.APIConnectionError("down", **common)) == (True, None)
    assert classify_provider_error(litellm.Timeout("late", **common)) == (True, 408)
    assert classify_provider_error(litellm.NotFoundError("gone", **common)) == (False, 404)
    assert classify_provider_error(TimeoutError()) == (True, None)
    assert classify_provider_error(KeyError("x")) == (False, None)
    midstream = litellm.exceptions.MidStreamFallbackError(
        "wrapped",
        model="p/m",
        llm_provider="p",
        original_exception=litellm.BadGatewayError("bad gateway", **common),
    )
    assert classify_provider_error(midstream) == (True, 502)


async def test_exhausted_scripted_model(litellm: ModuleType) -> None:
    model = ScriptedModel(["Only reply."])
    assert assemble(await stream(model))["text"] == "Only reply."
    assert model.remaining == 0
    with pytest.raises(litellm.APIConnectionError) as caught:
        await stream(model)
    cause = deputy_error_cause(caught.value)
    assert isinstance(cause, ScriptedModelExhausted)
    assert "only 1 reply" in str(cause)
    assert classify_provider_error(caught.value) == (False, None)
    assert len(model.requests) == 2


# --------------------------------------------------------------------------- function models


async def test_function_model_sync_gets_openai_format(litellm: ModuleType) -> None:
    seen: list[tuple[Any, Any]] = []

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        seen.append((messages, tools))
        messages.append({"role": "user", "content": "mutation must not leak"})
        return f"{len(messages) - 1} messages, last: {messages[-2]['content']}"

    model = FunctionModel(answer)
    # litellm accepts its own Message objects too; the function still gets plain dicts.
    history = [
        {"role": "user", "content": "Weather?"},
        litellm.Message(
            role="assistant",
            content=None,
            tool_calls=[
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        ),
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
    ]
    result = assemble(await stream(model, history, tools=TOOLS))
    assert result["text"] == "3 messages, last: Sunny"
    messages, tools = seen[0]
    assert tools == TOOLS
    assert all(type(m) is dict for m in messages)
    assert messages[1]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": "{}"}
    assert len(model.requests[0]["messages"]) == 3


async def test_function_model_async(litellm: ModuleType) -> None:
    loop = asyncio.get_running_loop()

    async def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        assert asyncio.get_running_loop() is loop  # awaited on the caller's loop
        await asyncio.sleep(0)
        if len(messages) > 1:
            return ProviderFailure(503)
        name = tools[0]["function"]["name"]
        call = ScriptedToolCall(name=name, arguments={"city": messages[0]["content"]})
        return ScriptedReply(tool_calls=[call])

    model = FunctionModel(answer)
    result = assemble(await stream(model, [{"role": "user", "content": "Oslo"}], tools=TOOLS))
    assert result["calls"][0]["name"] == "get_weather"
    assert json.loads(result["calls"][0]["arguments"]) == {"city": "Oslo"}
    response = await litellm.acompletion(
        model=model.as_chat_model().model, messages=USER, tools=TOOLS
    )
    assert response.choices[0].message.tool_calls[0].function.name == "get_weather"
    # An async function's failure surfaces in the stream (it is awaited there).
    with pytest.raises(litellm.exceptions.MidStreamFallbackError) as caught:
        await stream(model, [*USER, {"role": "assistant", "content": "x"}])
    assert classify_provider_error(caught.value) == (True, 503)


async def test_function_model_raising_and_bad_returns(litellm: ModuleType) -> None:
    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        content = messages[-1]["content"]
        if content == "raise":
            raise ProviderFailure(429, "quota")
        if content == "number":
            return 42
        return ConnectionError("returned, not raised")

    model = FunctionModel(answer)
    name = model.as_chat_model().model

    async def request(content: str) -> BaseException:
        with pytest.raises(Exception) as caught:
            await litellm.acompletion(
                model=name, messages=[{"role": "user", "content": content}], stream=True
            )
        return caught.value

    raised = await request("raise")
    assert isinstance(raised, litellm.RateLimitError) and "quota" in str(raised)
    bad = await request("number")
    assert isinstance(bad, litellm.APIConnectionError)
    assert isinstance(bad.__context__, TypeError)
    assert classify_provider_error(await request("other")) == (True, None)


async def test_requests_record_messages_tools_and_params(litellm: ModuleType) -> None:
    model = ScriptedModel(["a", "b"])
    await stream(
        model,
        tools=TOOLS,
        temperature=0.2,
        max_tokens=50,
        tool_choice="required",
        response_format={"type": "json_object"},
        api_key="sk-secret-never-recorded",
    )
    await stream(model, [{"role": "user", "content": "second"}])
    first, second = model.requests
    assert set(first) == {"messages", "tools", "params"}
    assert first["messages"] == USER
    assert first["tools"] == TOOLS
    assert first["params"] == {
        "temperature": 0.2,
        "max_tokens": 50,
        "tool_choice": "required",
        "response_format": {"type": "json_object"},
    }
    assert "sk-secret" not in json.dumps(model.requests)
    assert second == {
        "messages": [{"role": "user", "content": "second"}],
        "tools": [],
        "params": {},
    }


# --------------------------------------------------------------------------- registration


async def test_two_models_do_not_clobber_each_other(litellm: ModuleType) -> None:
    first = ScriptedModel(["first-1", "first-2"])
    second = FunctionModel(lambda messages, tools: "second")
    assert first.as_chat_model().provider != second.as_chat_model().provider
    results = await asyncio.gather(stream(first), stream(second), stream(first))
    assert sorted(assemble(r)["text"] for r in results) == ["first-1", "first-2", "second"]
    assert (len(first.requests), len(second.requests)) == (2, 1)


def _registered(litellm: ModuleType, provider: str) -> bool:
    return (
        _litellm.is_registered(provider)
        or any(e["provider"] == provider for e in litellm.custom_provider_map)
        or provider in litellm._custom_providers
        or provider in litellm.provider_list
    )


async def test_garbage_collected_models_unregister(litellm: ModuleType) -> None:
    model = ScriptedModel(["used once"])
    await stream(model)
    provider = model.as_chat_model().provider
    assert _registered(litellm, provider)
    del model
    gc.collect()
    _litellm.get_litellm()  # removal is deferred to the next registry use: finalizers can't lock
    assert not _registered(litellm, provider)

    # The ChatModel an agent keeps holds its test model alive.
    chat_model = ScriptedModel(["still here"]).as_chat_model()
    gc.collect()
    response = await litellm.acompletion(model=chat_model.model, messages=USER)
    assert response.choices[0].message.content == "still here"
    provider = chat_model.provider
    del chat_model
    _litellm.get_litellm()
    assert not _registered(litellm, provider)  # no reference cycle: freed at once

    # Thousands of short-lived models leave no trace behind.
    before = len(litellm.custom_provider_map)
    for _ in range(2000):
        ScriptedModel(["x"]).as_chat_model()
    _litellm.get_litellm()
    assert len(litellm.custom_provider_map) <= before
    assert sum(1 for p in litellm.provider_list if str(p).startswith("deputy-scripted-")) <= before


def test_foreign_custom_providers_are_left_alone(
    litellm: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    foreign = {"provider": "someone-elses", "custom_handler": object()}
    monkeypatch.setattr(litellm, "custom_provider_map", [*litellm.custom_provider_map, foreign])
    model = ScriptedModel(["x"])
    provider = model.as_chat_model().provider
    assert _registered(litellm, provider)
    del model
    _litellm.get_litellm()
    assert not _registered(litellm, provider)
    assert foreign in litellm.custom_provider_map


# --------------------------------------------------------------------------- pacing


async def test_delay_paces_chunks_without_blocking_the_loop(litellm: ModuleType) -> None:
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.005)

    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    result = assemble(
        await stream(ScriptedModel([ScriptedReply(text="abcdefghij", chunk_size=2, delay=0.03)]))
    )
    elapsed = time.perf_counter() - started
    done.set()
    await task
    assert result["text"] == "abcdefghij"
    assert elapsed >= 4 * 0.03  # 5 chunks, 4 gaps
    assert ticks >= 10  # the loop kept running during the delays


async def test_undelayed_long_stream_still_yields_to_the_loop(litellm: ModuleType) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    text = "".join(f"{i:04d}" for i in range(320))
    model = ScriptedModel([ScriptedReply(text=text, chunk_size=4)])
    response = await litellm.acompletion(
        model=model.as_chat_model().model, messages=USER, stream=True
    )
    ticks_at_chunk = [
        ticks async for chunk in response if chunk.choices and chunk.choices[0].delta.content
    ]
    task.cancel()
    assert len(ticks_at_chunk) == 320
    # While the 320 content chunks streamed, other tasks ran about every 32 chunks.
    assert ticks_at_chunk[-1] - ticks_at_chunk[0] >= 320 // 32 - 1


async def test_cancelled_consumer_stops_the_stream_promptly(litellm: ModuleType) -> None:
    model = ScriptedModel([ScriptedReply(text="first second third", chunk_size=6, delay=5.0)])
    response = await litellm.acompletion(
        model=model.as_chat_model().model, messages=USER, stream=True
    )
    generator = response.completion_stream
    first_chunk = asyncio.Event()

    async def consume() -> None:
        async for _ in response:
            first_chunk.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_chunk.wait(), 2)
    started = time.perf_counter()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.perf_counter() - started < 1.0
    assert generator.ag_frame is None  # the provider's generator is finished, not sleeping


async def test_non_streaming_request_waits_like_the_stream_would(litellm: ModuleType) -> None:
    model = ScriptedModel([ScriptedReply(text="abcdef", chunk_size=2, delay=0.05)])
    started = time.perf_counter()
    response = await litellm.acompletion(model=model.as_chat_model().model, messages=USER)
    assert time.perf_counter() - started >= 0.1
    assert response.choices[0].message.content == "abcdef"


async def test_litellm_aborts_after_one_chunk_repeated_100_times(litellm: ModuleType) -> None:
    # Documented on ScriptedReply: litellm's guard against looping models.
    exactly_100 = ScriptedModel([ScriptedReply(text="abcdefgh" * 100)])
    assert len(assemble(await stream(exactly_100))["pieces"]) == 100
    one_more = ScriptedModel([ScriptedReply(text="abcdefgh" * 100 + "xyz")])
    with pytest.raises(litellm.exceptions.MidStreamFallbackError, match="repeating") as caught:
        await stream(one_more)
    assert isinstance(caught.value.original_exception, litellm.InternalServerError)
    assert classify_provider_error(caught.value) == (True, 500)
    short_chunks = ScriptedModel([ScriptedReply(text="ab" * 300, chunk_size=2)])
    assert len(assemble(await stream(short_chunks))["text"]) == 600  # <= 2 chars: exempt


def test_provider_side_work_per_chunk_is_small() -> None:
    plan = _custom_provider._make_plan(
        ScriptedReply(text="x" * 160_000, chunk_size=8), {"messages": USER}, provider="p", model="m"
    )

    async def drain() -> int:
        return sum([1 async for _ in _custom_provider._astream(plan)])

    started = time.perf_counter()
    assert asyncio.run(drain()) == 20_001
    assert time.perf_counter() - started < 1.0  # litellm itself needs about 5 s for these


# --------------------------------------------------------------------------- validation


def test_positional_construction_follows_the_documented_order() -> None:
    call = ScriptedToolCall("add", {"a": 1}, "call_1")
    assert (call.name, call.arguments, call.id) == ("add", {"a": 1}, "call_1")
    reply = ScriptedReply("Hi", [call], {"prompt_tokens": 1, "completion_tokens": 2}, 0.1, 3)
    assert (reply.text, reply.tool_calls, reply.cost, reply.chunk_size) == ("Hi", [call], 0.1, 3)
    assert ScriptedToolCall(name="noop").arguments == {}


def test_reply_and_model_validation() -> None:
    with pytest.raises(ValidationError):
        ScriptedReply(usage={"prompt_tokens": 1})
    with pytest.raises(ValidationError):
        ScriptedReply(chunk_size=0)
    with pytest.raises(ValidationError):
        ScriptedReply(text="x", error_after_chunks=2)
    with pytest.raises(ValidationError):
        ScriptedToolCall(name="f", arguments={"x": object()})
    reply = ScriptedReply(text="frozen")
    with pytest.raises(ValidationError):
        reply.text = "changed"  # type: ignore[misc]
    with pytest.raises(ConfigurationError):
        ScriptedModel("not a list")
    with pytest.raises(ConfigurationError, match="Reply 1"):
        ScriptedModel(["ok", 42])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError):
        FunctionModel("not callable")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        ProviderFailure(200)
    assert ProviderFailure(503).message.startswith("Service Unavailable")
    chat_model = ScriptedModel([]).as_chat_model()
    assert isinstance(chat_model, ChatModel)
    assert resolve_model(chat_model) is chat_model


# --------------------------------------------------------------------------- demo


def test_demo_first_reply_is_honest() -> None:
    reply = demo_reply([{"role": "user", "content": "Hi"}], [])
    assert reply.text.startswith(INTRO)  # then the menu of things to try
    assert "the offline demo model — scripted replies, not an LLM" in reply.text
    assert "DEPUTY_MODEL" in reply.text and "API key" in reply.text
    assert reply.cost == 0.0


def test_demo_later_replies_vary_and_reflect_the_user() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": INTRO},
    ]
    texts = []
    for word in ["apples", "bananas", "cherries", "dates", "elderberries"]:
        history.append({"role": "user", "content": f"I like {word}"})
        text = demo_reply(history, []).text
        assert f"I like {word}" in text
        texts.append(text)
        history.append({"role": "assistant", "content": text})
    assert len(set(texts)) == len(texts)
    question = demo_reply([*history, {"role": "user", "content": "Why is the sky blue?"}], [])
    assert "Why is the sky blue?" in question.text and "not an LLM" in question.text
    parts = [{"type": "text", "text": "from a content part"}]
    assert (
        "from a content part" in demo_reply([*history, {"role": "user", "content": parts}], []).text
    )


def test_demo_never_streams_one_chunk_100_times() -> None:
    history = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": INTRO},
        {"role": "user", "content": "abcdefgh" * 500},
    ]
    reply = demo_reply(history, [])
    chunks = [reply.text[i : i + 8] for i in range(0, len(reply.text), 8)]
    assert max(chunks.count(c) for c in chunks) < 20


async def test_demo_model_through_litellm(litellm: ModuleType) -> None:
    assert DEMO_PROVIDER not in {p.value for p in litellm.LlmProviders}  # not a built-in
    threads = [threading.Thread(target=ensure_demo_registered) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    chat_model = resolve_model(DEMO_MODEL)
    assert [e["provider"] for e in litellm.custom_provider_map].count(DEMO_PROVIDER) == 1
    result = assemble(await stream(chat_model, [{"role": "user", "content": "Hello"}]))
    assert result["text"].startswith(INTRO)
    assert result["cost"] == 0.0
    history = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": result["text"]},
        {"role": "user", "content": "Tell me about llamas"},
    ]
    assert "Tell me about llamas" in assemble(await stream(chat_model, history))["text"]
