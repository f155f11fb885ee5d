"""OpenTelemetry spans of runs, through the real engine and the SDK's in-memory exporter:
the tree of a run with a tool call, an approval and a subagent (nested under a span the
test starts, as py-shiny's reactive spans would be), the GenAI attributes on each span,
error statuses, and that tracing off imports no OpenTelemetry module at all."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from deputy_shiny import Agent, instrument, tool_read_file, tool_write_file, uninstrument
from deputy_shiny._engine.observer import observer_factory
from deputy_shiny.approvals import ApprovalDecision, ApprovalRequest
from deputy_shiny.delegation import AgentDefinition, LeadAgent
from deputy_shiny.errors import ProviderError
from deputy_shiny.observability import instrument_from_environment
from deputy_shiny.permissions import permissions_standard
from deputy_shiny.testing import ProviderFailure, ScriptedModel, ScriptedReply, ScriptedToolCall
from tests.helpers import local_tool


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(provider)
    try:
        yield provider, exporter
    finally:
        uninstrument()


def tree(spans: tuple[ReadableSpan, ...]) -> list[tuple[int, str]]:
    """The spans as (depth, name), depth first in start order."""
    children: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in ids else None, []).append(span)
    out: list[tuple[int, str]] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            out.append((depth, span.name))
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return out


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_the_span_tree_of_a_run_with_a_tool_call_an_approval_and_a_subagent(
    tmp_path: Path, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tracer_provider, exporter = provider
    answered: list[str] = []

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        answered.append(request.call_id)
        return ApprovalDecision.approve()

    sub = ScriptedModel(
        [ScriptedReply(tool_calls=[ScriptedToolCall("read_file", {"path": "a.txt"})]), "Read."]
    )
    lead_model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=[ScriptedToolCall("write_file", {"path": "a.txt", "content": "hi"})]
            ),
            ScriptedReply(
                tool_calls=[ScriptedToolCall("delegate", {"agent": "reader", "task": "Read a.txt"})]
            ),
            "Done.",
        ]
    )
    lead = LeadAgent(
        lead_model,
        agent_name="lead",
        tools=[tool_write_file(), tool_read_file()],
        working_dir=tmp_path,
        permissions=permissions_standard().model_copy(update={"approval_tools": ("write_file",)}),
        approval_handler=approve,
        subagents=[
            AgentDefinition(
                name="reader", description="Reads.", prompt="You read.", tools=["read_file"]
            )
        ],
        subagent_models={"reader": sub},
    )
    # The span current as the run starts is its parent (py-shiny's reactive spans are).
    with tracer_provider.get_tracer("test").start_as_current_span("reactive_update"):
        result = await lead.run_async("Write a.txt, then have it read")
    assert result.response == "Done." and len(answered) == 1

    spans = exporter.get_finished_spans()
    lead_chat = f"chat {lead.model.model}"
    sub_chat = f"chat {sub.as_chat_model().model}"
    assert tree(spans) == [
        (0, "reactive_update"),
        (1, "invoke_agent lead"),
        (2, lead_chat),
        (2, "execute_tool write_file"),
        (3, "approval write_file"),
        (2, lead_chat),
        (2, "execute_tool delegate"),
        (3, "invoke_agent reader"),
        (4, sub_chat),
        (4, "execute_tool read_file"),
        (4, sub_chat),
        (2, lead_chat),
    ]
    (run,) = named(spans, "invoke_agent lead")
    assert attrs(run) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.id": lead.agent_id,
        "gen_ai.agent.name": "lead",
        "gen_ai.conversation.id": lead.session_id,
        "deputy.run.id": result.run_id,
        "gen_ai.provider.name": lead.model.provider,
        "gen_ai.system": lead.model.provider,
        "gen_ai.request.model": lead.model.model,
        "gen_ai.usage.input_tokens": result.usage.input_tokens,
        "gen_ai.usage.output_tokens": result.usage.output_tokens,
        "deputy.usage.requests": 3,
        "deputy.usage.tool_calls": 2,
        "deputy.stop_reason": "complete",
    } | ({"operation.cost": result.usage.cost} if result.usage.cost is not None else {})
    assert run.status.status_code is StatusCode.UNSET
    chats = named(spans, lead_chat)
    request_ends = [e for e in result.events if e.type == "request_end"]
    for index, (chat, end) in enumerate(zip(chats, request_ends, strict=True), start=1):
        got = attrs(chat)
        assert got["gen_ai.operation.name"] == "chat"
        assert got["gen_ai.request.model"] == lead.model.model
        assert got["gen_ai.provider.name"] == lead.model.provider
        assert got["deputy.request.index"] == index
        assert got["gen_ai.usage.input_tokens"] == end.usage.input_tokens > 0
        assert got["gen_ai.usage.output_tokens"] == end.usage.output_tokens > 0
        assert got["gen_ai.agent.id"] == lead.agent_id
    assert [attrs(c)["gen_ai.response.finish_reasons"] for c in chats] == [
        ("tool_calls",),
        ("tool_calls",),
        ("stop",),
    ]
    (write,) = named(spans, "execute_tool write_file")
    write_start = next(e for e in result.events if e.type == "tool_start")
    assert attrs(write) | {"deputy.permission.decision": None} == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "write_file",
        "gen_ai.tool.call.id": write_start.call_id,
        "gen_ai.tool.type": "function",
        "gen_ai.agent.id": lead.agent_id,
        "gen_ai.agent.name": "lead",
        "gen_ai.conversation.id": lead.session_id,
        "deputy.run.id": result.run_id,
        "deputy.permission.decision": None,
    }
    assert attrs(write)["deputy.permission.decision"] in ("ask", "allow")
    (approval,) = named(spans, "approval write_file")
    assert attrs(approval)["deputy.approval.status"] == "approved"
    assert attrs(approval)["gen_ai.tool.call.id"] == write_start.call_id == answered[0]
    (child,) = named(spans, "invoke_agent reader")
    (record,) = lead.list_subagents()
    assert attrs(child)["gen_ai.agent.id"] == record.agent_id != lead.agent_id
    assert attrs(child)["deputy.parent_agent.id"] == lead.agent_id
    assert attrs(child)["deputy.stop_reason"] == "complete"
    assert attrs(named(spans, "execute_tool read_file")[0])["gen_ai.agent.name"] == "reader"
    # One trace: everything under the test's span.
    assert len({s.context.trace_id for s in spans}) == 1


async def test_errors_set_the_span_status(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    _, exporter = provider

    def explode() -> str:
        """Fails."""
        raise RuntimeError("boom")

    agent = Agent(
        ScriptedModel([ScriptedReply(tool_calls=[ScriptedToolCall("explode", {})]), "Sorry."]),
        tools=[local_tool(explode)],
    )
    await agent.run_async("go")
    (tool_span,) = named(exporter.get_finished_spans(), "execute_tool explode")
    assert tool_span.status.status_code is StatusCode.ERROR
    assert attrs(tool_span)["error.type"] == "tool_error"
    (run,) = named(exporter.get_finished_spans(), "invoke_agent agent")
    assert run.status.status_code is StatusCode.UNSET  # the run itself went fine

    exporter.clear()
    failing = Agent(ScriptedModel([ProviderFailure(401, "bad key sk-test-SECRETXYZ123")]))
    with pytest.raises(ProviderError):
        await failing.run_async("go")
    assert failing.last_run().stop_reason == "provider_error"
    spans = exporter.get_finished_spans()
    (chat,) = [s for s in spans if s.name.startswith("chat ")]
    (run,) = named(spans, "invoke_agent agent")
    for span in (chat, run):
        assert span.status.status_code is StatusCode.ERROR
        assert "SECRETXYZ" not in (span.status.description or "")
    assert attrs(chat)["error.type"] == "provider_error"
    assert attrs(run)["deputy.stop_reason"] == "provider_error"


async def test_uninstrument_stops_new_spans(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    _, exporter = provider
    uninstrument()
    assert observer_factory() is None
    await Agent(ScriptedModel(["Hi."])).run_async("go")
    assert exporter.get_finished_spans() == ()


def test_deputy_otel_in_the_environment_turns_tracing_on() -> None:
    try:
        assert instrument_from_environment({"DEPUTY_OTEL": "0"}) is False
        assert instrument_from_environment({}) is False
        assert observer_factory() is None
        assert instrument_from_environment({"DEPUTY_OTEL": " True "}) is True
        assert observer_factory() is not None
    finally:
        uninstrument()


def run_in_fresh_interpreter(code: str, **env: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if k != "DEPUTY_OTEL"}, **env},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_tracing_off_imports_no_opentelemetry_module_and_on_reads_the_environment() -> None:
    """Off: importing the package and running a scripted agent (a tool call included)
    loads no ``opentelemetry`` module. The same interpreter then turns tracing on the way
    ``DEPUTY_OTEL=1`` does at import, and its next run is traced."""
    code = (
        "import sys\n"
        "from deputy_shiny import Agent, tool\n"
        "from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall\n"
        "def echo(text: str) -> str:\n"
        "    '''Echo.'''\n"
        "    return text\n"
        "call = ScriptedReply(tool_calls=[ScriptedToolCall('echo', {'text': 'x'})])\n"
        "agent = Agent(ScriptedModel([call, 'done', 'again']), tools=[tool(echo)])\n"
        "assert agent.chat('go') == 'done'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry'))\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import "
        "InMemorySpanExporter\n"
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"  # the global provider
        "from deputy_shiny.observability import instrument_from_environment\n"
        "assert instrument_from_environment({'DEPUTY_OTEL': '1'})\n"
        "assert agent.chat('more') == 'again'\n"
        "print([s.name for s in exporter.get_finished_spans()][-1])\n"
    )
    lines = run_in_fresh_interpreter(code).splitlines()
    assert lines[-2:] == ["[]", "invoke_agent agent"]


def test_deputy_otel_is_read_as_the_package_is_imported() -> None:
    code = (
        "import sys, deputy_shiny\n"
        "from deputy_shiny._engine.observer import observer_factory\n"
        "print(observer_factory() is not None, 'opentelemetry' in sys.modules)\n"
    )
    assert run_in_fresh_interpreter(code, DEPUTY_OTEL="1") == "True True"
