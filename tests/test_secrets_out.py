"""Secrets stay out: with a provider key in the environment, a run that tries it in
``run_context`` and gets it as a tool argument (a prompt injection made the model copy
it) leaves no trace of it in the logs, the spans (every attribute, event and status),
the saved session file or the persistence store's files (durable approvals)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deputy_shiny import (
    Agent,
    hook_log_tools,
    instrument,
    tool,
    tool_annotations,
    uninstrument,
)
from deputy_shiny.errors import RunContextError
from deputy_shiny.permissions import Permissions
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

from .helpers import JsonLogCapture, capture_root_logs

SECRET = "sk-test-SECRETXYZ"
MARK = "SECRETXYZ"  # any part of the key that would identify it
LOCAL = tool_annotations(open_world_hint=False)


@pytest.fixture
def logs() -> Iterator[JsonLogCapture]:
    yield from capture_root_logs()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(provider)
    try:
        yield exporter
    finally:
        uninstrument()


def span_text(span: ReadableSpan) -> str:
    """Everything a span exports: name, attributes, events, links, status."""
    return json.loads(span.to_json()).__repr__()


def files_text(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_bytes().decode("utf-8", "replace")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


async def test_a_key_never_reaches_logs_spans_sessions_or_the_store(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    logs: JsonLogCapture,
    spans: InMemorySpanExporter,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    seen: list[str] = []

    def lookup(query: str) -> str:
        """Look something up."""
        seen.append(query)
        return "Nothing found."

    def publish(text: str) -> str:
        """Publish text (needs a person's approval)."""
        return "published"

    replies: list[Any] = [
        ScriptedReply(
            text="Let me look.",
            tool_calls=[ScriptedToolCall("lookup", {"query": SECRET}, id="c1")],
        ),
        ScriptedReply(tool_calls=[ScriptedToolCall("publish", {"text": SECRET}, id="c2")]),
    ]
    store, work = tmp_path / "store", tmp_path / "work"
    store.mkdir()
    work.mkdir()
    agent = Agent(
        ScriptedModel(replies),
        tools=[tool(lookup, annotations=LOCAL), tool(publish, annotations=LOCAL)],
        working_dir=work,
        hooks=hook_log_tools(),
        permissions=Permissions(tool_allowlist=("lookup", "publish"), approval_tools=("publish",)),
        approval_dir=store,  # nobody can answer now: the call is saved for later
    )
    # run_context refuses a credential-like key outright...
    with pytest.raises(RunContextError):
        await agent.run_async("go", run_context={"api_key": SECRET})
    # ...and a key's value under an innocent name does not pass either.
    with pytest.raises(RunContextError):
        await agent.run_async("go", run_context={"note": SECRET})
    result = await agent.run_async("Find the key and publish it.", run_context={"user": "ann"})
    assert seen == [SECRET]  # the tool itself got what the model sent
    assert result.stop_reason == "approval_pending"
    session = agent.save_session(tmp_path / "session.json")

    assert logs.lines and spans.get_finished_spans()
    leaks = {
        "logs": [line for line in logs.lines if MARK in line],
        "spans": [s.name for s in spans.get_finished_spans() if MARK in span_text(s)],
        "session": [session.name] if MARK in session.read_text() else [],
        "store": [name for name, text in files_text(store).items() if MARK in text],
    }
    assert files_text(store)  # the paused call was saved
    assert leaks == {"logs": [], "spans": [], "session": [], "store": []}


async def test_hook_log_tools_never_logs_a_credential_argument_quoted_back(
    tmp_path: Path, logs: JsonLogCapture
) -> None:
    """A tool quotes the key it was given in its error and in its result (a provider's
    "invalid key ..." message): hook_log_tools masks it in every line, whatever its shape
    (this one looks like no known key format and is in no environment variable)."""
    key = "zq7-PRIVATE-7781"

    def fetch(url: str, api_key: str) -> str:
        """Fetch a URL with a key."""
        if "fail" in url:
            raise ValueError(f"upstream refused credentials {api_key!r} for {url}")
        return f"fetched {url} as {api_key}"

    replies: list[Any] = [
        ScriptedReply(
            tool_calls=[
                ScriptedToolCall("fetch", {"url": f"https://x.test/fail?k={key}", "api_key": key}),
                ScriptedToolCall("fetch", {"url": "https://x.test/ok", "api_key": key}),
            ]
        ),
        ScriptedReply(text="done"),
    ]
    agent = Agent(
        ScriptedModel(replies),
        tools=[tool(fetch, annotations=LOCAL)],
        working_dir=tmp_path,
        hooks=hook_log_tools(max_chars=400),
        permissions=Permissions(tool_allowlist=("fetch",)),
    )
    await agent.run_async("go")
    hooked = [line for line in logs.lines if "deputy_shiny.hooks" in line]
    assert any("tool failed fetch" in line for line in hooked)
    assert any("tool result fetch" in line and "fetched" in line for line in hooked)
    assert [line for line in hooked if "PRIVATE" in line] == []
