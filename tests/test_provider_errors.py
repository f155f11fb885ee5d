"""What users see when a provider fails: one readable line; the log keeps the details.

The line names the provider and the HTTP status and holds no secret, no traceback and
none of litellm's "Give Feedback / Get Help" or "LiteLLM.Info" text. The full error,
secrets redacted, is logged by the ``deputy_shiny`` logger.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from deputy_shiny import Agent, AgentEvent, ProviderError
from deputy_shiny._util.redact import redact
from deputy_shiny.errors import CredentialsRefusedError, MissingCredentialsError
from deputy_shiny.events import RequestErrorEvent, StopEvent
from deputy_shiny.models._provider import provider_error_summary
from deputy_shiny.shiny import render_events
from deputy_shiny.shiny._render import stop_note
from deputy_shiny.testing import FunctionModel, ProviderFailure, ScriptedModel, ScriptedReply

from .helpers import collect

REFUSED = " (the API key was refused: check it)"
SECRET = "sk-test-SECRET123"
LITELLM_NOISE = (
    "Traceback (most recent call last):\n"
    '  File "/site-packages/litellm/main.py", line 6616, in completion\n'
    "    response = handler_fn(...)\n"
    f"ValueError: the key {SECRET} was refused\n"
    "Give Feedback / Get Help: https://github.com/BerriAI/litellm/issues/new\n"
    "LiteLLM.Info: If you need to debug this error, use `litellm._turn_on_debug()'."
)
NOT_SHOWN = ("SECRET123", "Traceback", "Give Feedback", "LiteLLM.Info", "litellm.", "Error:")


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="deputy_shiny")
    return caplog


def provider_of(model: ScriptedModel | FunctionModel) -> str:
    return model.as_chat_model().model.split("/", 1)[0]


def failure_lines(events: list[AgentEvent]) -> list[str]:
    """The messages a failed run shows: its request errors and its stop message."""
    errors = [e.error for e in events if isinstance(e, RequestErrorEvent)]
    stops = [e for e in events if isinstance(e, StopEvent)]
    assert errors and stops[-1].stop_reason == "provider_error"
    return [*errors, stops[-1].message]


def assert_one_clean_line(text: str) -> None:
    assert "\n" not in text and text == text.strip() and text
    for unwanted in NOT_SHOWN:
        assert unwanted not in text, f"{unwanted!r} in {text!r}"


def assert_logged_in_full(caplog: pytest.LogCaptureFixture, *details: str) -> None:
    records = [
        r for r in caplog.records if r.name.startswith("deputy_shiny") and "failed" in r.message
    ]
    assert records, "the failure was not logged"
    # WARNING holds the one line a request's failure is; the whole chain is at DEBUG.
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert warnings and all("\n" not in line and "Traceback" not in line for line in warnings)
    assert any(r.levelno == logging.DEBUG and "Traceback" in r.getMessage() for r in records)
    logged = "\n".join(r.getMessage() for r in records)
    for detail in details:
        assert detail in logged
    assert "SECRET123" not in logged  # the secret is redacted in the log too
    assert all(r.exc_info is None for r in records)  # no unredacted traceback attached


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, CredentialsRefusedError),
        (429, ProviderError),
        (500, ProviderError),
        (503, ProviderError),
    ],
)
async def test_a_failed_request_is_one_readable_line(
    status: int, kind: type[ProviderError], logged: pytest.LogCaptureFixture
) -> None:
    message = f"invalid API key {SECRET}\n{LITELLM_NOISE}"
    model = ScriptedModel([ProviderFailure(status, message)])
    events = await collect(Agent(model).run("hi"))
    expected = f"{provider_of(model)} returned {status}: invalid API key sk-test…"
    if status == 401:  # a key was sent and turned down: say so, it is not missing
        expected += REFUSED
    for line in failure_lines(events):
        assert_one_clean_line(line)
        assert line == expected
    with pytest.raises(kind) as raised:  # run_async raises the same line
        await Agent(ScriptedModel([ProviderFailure(status, message)])).run_async("hi")
    assert str(raised.value).endswith(expected.split(" ", 1)[1])  # another provider name
    assert not isinstance(raised.value, MissingCredentialsError)
    assert_logged_in_full(logged, "Traceback", "Give Feedback", "sk-test", str(status))


async def test_a_failure_mid_stream_is_one_line_too(logged: pytest.LogCaptureFixture) -> None:
    reply = ScriptedReply(
        text="partial answer here",
        chunk_size=4,
        error=ProviderFailure(429, f"slow down {SECRET}\n{LITELLM_NOISE}"),
        error_after_chunks=2,
    )
    model = ScriptedModel([reply])
    events = await collect(Agent(model).run("hi"))
    for line in failure_lines(events):
        assert_one_clean_line(line)
        assert line == f"{provider_of(model)} returned 429: slow down sk-test…"
    assert_logged_in_full(logged, "MidStreamFallbackError", "LiteLLM.Info")


async def test_a_crash_inside_the_provider_is_one_line(logged: pytest.LogCaptureFixture) -> None:
    def crash(messages: Any, tools: Any) -> str:
        raise RuntimeError(f"connection reset while sending {SECRET}\n{LITELLM_NOISE}")

    model = FunctionModel(crash)
    events = await collect(Agent(model).run("hi"))
    for line in failure_lines(events):
        assert_one_clean_line(line)
        assert line == f"{provider_of(model)}: connection reset while sending sk-test…"
    assert_logged_in_full(logged, "APIConnectionError", "RuntimeError", "Give Feedback")


async def test_the_kit_shows_the_failure_as_one_line(logged: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel([ProviderFailure(401, f"invalid API key {SECRET}\n{LITELLM_NOISE}")])
    chunks = [c async for c in render_events(Agent(model).run("go"))]
    text = "".join(c for c in chunks if isinstance(c, str))
    notes = [line for line in text.splitlines() if line.strip()]
    # The kit's notes are escaped markdown (they quote the provider's text); read unescaped.
    assert [re.sub(r"\\(.)", r"\1", note) for note in notes] == [
        f"> The model request failed: {provider_of(model)} returned 401: invalid API key "
        f"sk-test…{REFUSED}"
    ]
    assert_one_clean_line(notes[0])


def test_stop_notes_show_only_the_first_line_of_a_message() -> None:
    note = stop_note("provider_error", f"openai returned 500: oops\n{LITELLM_NOISE}")
    assert note == "The model request failed: openai returned 500: oops"
    assert stop_note("error", "\n  boom  \nmore") == "The run failed: boom"
    assert stop_note("provider_error", "") == "The model request failed."


@pytest.mark.parametrize(
    ("text", "summary"),
    [
        (
            "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API "
            "key provided: sk-proj-abcdefgh1234. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "Incorrect API key provided: sk-proj…. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
        ),
        (
            'litellm.AuthenticationError: AnthropicException - {"type":"error","error":'
            '{"type":"authentication_error","message":"invalid x-api-key"}}',
            "invalid x-api-key",
        ),
        (
            "litellm.BadRequestError: OpenAIException - Error code: 400 - {'error': {'message': "
            "\"Invalid type for 'messages[0].content'\", 'type': 'invalid_request_error'}}",
            "Invalid type for 'messages[0].content'",
        ),
        (
            'litellm.BadRequestError: VertexAIException - {"error": {"code": 400, '
            '"message": "API key not valid", "status": "INVALID_ARGUMENT"',  # cut short
            "API key not valid",
        ),
        (
            "litellm.APIConnectionError: APIConnectionError: OpenAIException - Connection error.",
            "Connection error.",
        ),
        (f"litellm.APIConnectionError: {LITELLM_NOISE}", "the key sk-test… was refused"),
        ("litellm.RateLimitError: " + "x" * 1000, "x" * 299 + "…"),
        ("Give Feedback / Get Help: https://github.com/BerriAI/litellm/issues/new", ""),
    ],
)
def test_provider_error_summary(text: str, summary: str) -> None:
    assert redact(provider_error_summary(RuntimeError(text))) == summary


def test_the_summary_unwraps_what_litellm_carries() -> None:
    inner = RuntimeError("litellm.RateLimitError: slow down")
    outer = RuntimeError("litellm.MidStreamFallbackError: wrapper text")
    outer.original_exception = inner  # type: ignore[attr-defined]
    assert provider_error_summary(outer) == "slow down"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"bad key {SECRET}", "SECRET123"),
        ("Authorization: Bearer abc.def-123", "abc.def-123"),
        ("x-api-key: abcd1234efgh", "abcd1234efgh"),
        ('{"api_key": "hunter22"}', "hunter22"),
        ("https://generativelanguage.googleapis.com/v1/models?key=AIzaSyA1234567890", "1234567890"),
        ("key AIzaSyB0123456789abcdef", "0123456789abcdef"),
    ],
)
def test_redact_masks_keys(text: str, secret: str) -> None:
    assert secret not in redact(text)
