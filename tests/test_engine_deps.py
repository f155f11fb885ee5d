"""The engine runs from a hand-made RunDeps and Conversation, with no Agent at all."""

from __future__ import annotations

from pathlib import Path

from deputy_shiny._engine.deps import RunDeps, RunReport
from deputy_shiny._engine.loop import Engine, RunOptions
from deputy_shiny.conversation import Conversation
from deputy_shiny.hooks import HookRegistry
from deputy_shiny.messages import user_turn
from deputy_shiny.permissions import Permissions
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import ToolState
from deputy_shiny.usage import UsageLimits
from tests.helpers import local_tool


async def test_engine_runs_a_tool_call_from_run_deps_alone(tmp_path: Path) -> None:
    def double(n: int) -> int:
        """Double a number."""
        return 2 * n

    tool = local_tool(double)
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[ScriptedToolCall("double", {"n": 21}, id="c1")]), "42."]
    )
    reports: list[RunReport] = []
    deps = RunDeps(
        agent_id="agent-x",
        session_id="session-x",
        model=model.as_chat_model(),
        working_dir=tmp_path,
        permissions=Permissions().for_working_dir(tmp_path),
        hooks=HookRegistry(),
        tools={"double": tool},
        tool_schemas=(tool.openai_schema(),),
        tool_state=ToolState(),
        report=reports.append,
    )
    conversation = Conversation(system_prompt="Be exact.")
    options = RunOptions(prompt=user_turn("Double 21"), limits=UsageLimits(), run_context={})
    engine = Engine()
    events = [e async for e in engine.run(deps, conversation, options)]

    assert [e.type for e in events if e.type in ("start", "tool_end", "stop")] == [
        "start",
        "tool_end",
        "stop",
    ]
    assert {e.agent_id for e in events} == {"agent-x"}
    end = next(e for e in events if e.type == "tool_end")
    assert (end.output, end.is_error) == ("42", False)
    assert [t.role for t in conversation.turns] == ["user", "assistant", "user", "assistant"]
    assert model.requests[0]["messages"][0] == {"role": "system", "content": "Be exact."}
    assert engine.last_result is not None and engine.last_result.response == "42."
    assert not engine.running
    (report,) = reports
    assert report.usage.requests == 2 and report.usage.tool_calls == 1
    assert report.fallbacks_used == 0 and report.model == deps.model
