"""Model configuration, resolution, and the typed errors of provider failures."""

from __future__ import annotations

import pytest

from deputy_shiny import Agent, ChatModel, ProviderError
from deputy_shiny._util.redact import redact
from deputy_shiny.errors import InvalidModelError, UnknownModelError
from deputy_shiny.models import missing_credentials, resolve_model
from deputy_shiny.testing import ProviderFailure, ScriptedModel


def test_chat_model_keeps_the_key_secret() -> None:
    model = ChatModel(model="openai/gpt-4.1-mini", api_key="sk-very-secret-value")
    assert "sk-very-secret-value" not in repr(model)
    assert "sk-very-secret-value" not in model.model_dump_json()
    assert model.request_kwargs()["api_key"] == "sk-very-secret-value"


def test_chat_model_rejects_params_the_agent_owns() -> None:
    with pytest.raises(ValueError, match="stream"):
        ChatModel(model="openai/gpt-4.1-mini", params={"stream": False})


def test_resolve_model_accepts_strings_configs_and_test_models() -> None:
    config = ChatModel(model="anthropic/claude-sonnet-4-5", params={"temperature": 0})
    assert resolve_model(config) is config
    assert resolve_model("openrouter/meta-llama/llama-3-70b").name == "meta-llama/llama-3-70b"
    assert resolve_model(ScriptedModel([])).provider.startswith("deputy-scripted")
    with pytest.raises(InvalidModelError):
        resolve_model(3.5)


def test_an_explicit_key_skips_the_environment_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert missing_credentials(ChatModel(model="openai/gpt-4.1-mini")) == ["OPENAI_API_KEY"]
    assert missing_credentials(ChatModel(model="openai/gpt-4.1-mini", api_key="k")) == []
    assert missing_credentials(ScriptedModel([]).as_chat_model()) == []


async def test_provider_404_is_an_unknown_model() -> None:
    with pytest.raises(UnknownModelError):
        await Agent(ScriptedModel([ProviderFailure(404)])).run_async("hi")


@pytest.mark.parametrize(
    ("status", "transient"), [(408, True), (429, True), (502, True), (400, False)]
)
async def test_provider_errors_say_whether_they_are_transient(status: int, transient: bool) -> None:
    with pytest.raises(ProviderError) as caught:
        await Agent(ScriptedModel([ProviderFailure(status)])).run_async("hi")
    assert caught.value.transient is transient
    assert caught.value.status_code == status


def test_redact_masks_keys_in_error_text() -> None:
    text = "Incorrect API key provided: sk-proj-abcdefghijklmnop. Bearer xyz123 api_key=secret"
    cleaned = redact(text)
    assert "abcdefghijklmnop" not in cleaned
    assert "xyz123" not in cleaned and "secret" not in cleaned


def test_an_empty_key_counts_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "  ")
    assert missing_credentials(ChatModel(model="openai/gpt-4.1-mini")) == ["OPENAI_API_KEY"]
