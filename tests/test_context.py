"""Context policy: automatic and manual compaction, microcompact, tool-result offloading."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import (
    Agent,
    CompactionError,
    ContentToolRequest,
    ContentToolResult,
    ContextPolicy,
    HookMatcher,
    HookResultPreCompact,
    Turn,
    UsageLimits,
)
from deputy_shiny._engine.compaction import SUMMARY_INSTRUCTIONS
from deputy_shiny.context import SUMMARY_HEADING
from deputy_shiny.errors import ContextPolicyError, ToolResultReferenceError
from deputy_shiny.messages import ContentText
from deputy_shiny.models._litellm import get_litellm
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply, ScriptedToolCall

from .helpers import assert_consistent, collect, local_tool, types_of

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
]


def varied_text(n_words: int, seed: int) -> str:
    """Text of a known size whose chunks never repeat 100 times in a row."""
    return " ".join(f"{WORDS[(seed + i) % len(WORDS)]}{i}" for i in range(n_words))


def is_summary_request(messages: list[dict[str, Any]]) -> bool:
    return messages[0]["role"] == "system" and messages[0]["content"] == SUMMARY_INSTRUCTIONS


def tokens_sent(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    return int(get_litellm().token_counter(model="", messages=messages, tools=tools or None))


class Talker:
    """A FunctionModel script: a reply of known size per request, a short summary per
    summary request, recording the largest context sent."""

    def __init__(self, reply_words: int = 60, tool: str | None = None) -> None:
        self.reply_words = reply_words
        self.tool = tool
        self.peak = 0
        self.requests = 0
        self.summaries = 0
        self.model = FunctionModel(self)

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if is_summary_request(messages):
            self.summaries += 1
            topic = WORDS[self.summaries % 12]
            return f"Summary {self.summaries}: the user and agent discussed {topic}."
        self.requests += 1
        self.peak = max(self.peak, tokens_sent(messages, tools))
        if self.tool and messages[-1]["role"] == "user":
            return ScriptedReply(tool_calls=[ScriptedToolCall(self.tool, {"n": self.requests})])
        return varied_text(self.reply_words, self.requests)


def with_history(agent: Agent, turns: int = 4) -> Agent:
    """Give ``agent`` past turns (no requests) worth well over 600 tokens."""
    for n in range(turns):
        agent.add_turn(f"Question {n}", varied_text(120, n))
    return agent


def lookup(n: int) -> str:
    """Look a number up."""
    return varied_text(40, n)


# ------------------------------------------------------------------ the policy


def test_policy_is_validated_with_typed_errors(tmp_path: Path) -> None:
    for bad in (
        {"max_tokens": 0},
        {"compact_to": 1.0},
        {"fallback": "guess"},
        {"max_tool_result_bytes": 10},
        {"summary_fallback_models": "openai/gpt-4.1"},
        {"offload_dir": str(tmp_path / "f.txt")},
        {"unknown": 1},
    ):
        if "offload_dir" in bad:
            (tmp_path / "f.txt").write_text("x")
        with pytest.raises(ContextPolicyError):
            ContextPolicy(**bad)
    with pytest.raises(ContextPolicyError):
        Agent(ScriptedModel([]), context_policy="big")  # type: ignore[arg-type]
    policy = ContextPolicy(offload_dir=tmp_path, summary_fallback_models=["openai/gpt-4.1-mini"])
    assert policy.summary_fallback_models[0].model == "openai/gpt-4.1-mini"
    with pytest.raises(ValueError):  # frozen
        policy.max_tokens = 5  # type: ignore[misc]


def test_set_context_policy_keeps_offload_dir(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel([]), context_policy=ContextPolicy(offload_dir=tmp_path))
    assert "read_tool_result" in agent.get_tools()
    agent.set_context_policy(ContextPolicy(max_tokens=1000, offload_dir=tmp_path))
    assert agent.context_policy.max_tokens == 1000
    with pytest.raises(ContextPolicyError, match="offload_dir"):
        agent.set_context_policy(ContextPolicy(max_tokens=1000))
    with pytest.raises(ContextPolicyError, match="offload_dir"):
        Agent(ScriptedModel([])).set_context_policy(ContextPolicy(offload_dir=tmp_path))
    assert "read_tool_result" not in Agent(ScriptedModel([])).get_tools()


# ------------------------------------------------------------------ automatic compaction


async def test_a_200_turn_conversation_stays_under_max_tokens() -> None:
    talker = Talker(reply_words=50, tool="lookup")
    policy = ContextPolicy(max_tokens=1500)
    agent = Agent(talker.model, tools=[local_tool(lookup)], context_policy=policy)
    for n in range(50):  # four turns a run: user, tool call, tool result, answer
        result = await agent.run_async(f"Question {n}: {varied_text(20, n)}")
        assert result.stop_reason == "complete"
    assert len(agent.get_turns()) == 200
    assert talker.peak <= 1500
    assert talker.summaries >= 3
    record = agent.last_compaction()
    assert record is not None and record.method == "model" and record.automatic
    assert record.tokens_after <= 1500 * policy.compact_to
    assert len(agent.get_context_turns()) < 200
    assert f"{SUMMARY_HEADING}\n\nSummary {talker.summaries}" in str(agent.get_system_prompt())
    # Summary requests count toward usage.
    assert agent.usage().requests == talker.requests + talker.summaries
    assert_consistent(agent)


async def test_compaction_events_hooks_and_order() -> None:
    talker = Talker(reply_words=120)
    seen: list[tuple[str, Any]] = []

    def pre(context: Any) -> None:
        seen.append(("PreCompact", context.reason))

    def post(context: Any) -> None:
        seen.append(("PostCompact", context.details["method"]))

    agent = Agent(
        talker.model,
        context_policy=ContextPolicy(max_tokens=600),
        hooks=[HookMatcher("PreCompact", pre), HookMatcher("PostCompact", post)],
    )
    events = await collect(with_history(agent).run("And now?"))
    kinds = [t for t in types_of(events) if t not in ("text", "usage")]
    start = kinds.index("compaction_start")
    assert kinds[start : start + 5] == [
        "compaction_start",
        "hook",
        "compaction",
        "hook",
        "request_start",
    ]
    done = next(e for e in events if e.type == "compaction")
    assert done.method == "model" and done.turns_removed > 0
    assert done.tokens_after < done.tokens_before
    assert seen == [("PreCompact", "auto"), ("PostCompact", "model")]


async def test_pre_compact_hook_cancels_or_supplies_the_summary() -> None:
    talker = Talker(reply_words=120)
    answer: list[HookResultPreCompact] = [HookResultPreCompact(continue_=False)]
    agent = Agent(
        talker.model,
        context_policy=ContextPolicy(max_tokens=600),
        hooks=[HookMatcher("PreCompact", lambda context: answer[0])],
    )
    for n in range(4):
        await agent.run_async(f"Tell me about {WORDS[n]}")
    assert agent.last_compaction().method == "cancelled"  # type: ignore[union-attr]
    assert len(agent.get_context_turns()) == len(agent.get_turns())
    assert talker.summaries == 0

    answer[0] = HookResultPreCompact(summary="The hook's own summary.")
    await agent.run_async("Next")
    record = agent.last_compaction()
    assert record is not None and record.method == "hook" and record.turns_removed > 0
    assert talker.summaries == 0
    assert agent.get_system_prompt().endswith("The hook's own summary.")


async def test_text_fallback_and_summary_fallback_models() -> None:
    def broken(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if is_summary_request(messages):
            return RuntimeError("summaries are down")
        return varied_text(120, len(messages))

    agent = with_history(
        Agent(FunctionModel(broken), context_policy=ContextPolicy(max_tokens=600, fallback="text"))
    )
    events = await collect(agent.run("Next"))
    error = next(e for e in events if e.type == "compaction_error")
    assert error.fallback == "text" and "summaries are down" in error.error
    assert events[-1].stop_reason == "complete"
    record = agent.last_compaction()
    assert record is not None and record.method == "text" and record.model is None
    prompt = agent.get_system_prompt()
    assert prompt is not None and "cut to fit" not in prompt
    digest = prompt.split(f"{SUMMARY_HEADING}\n\n", 1)[1]
    # The first 200 characters of each turn, newest kept within the summary's share.
    assert digest.startswith("[earlier lines dropped]\nassistant: ") and len(digest) <= 480

    helper = Talker()
    agent = with_history(
        Agent(
            FunctionModel(broken),
            context_policy=ContextPolicy(max_tokens=600, summary_fallback_models=[helper.model]),
        )
    )
    await agent.run_async("Next")
    record = agent.last_compaction()
    assert record is not None and record.method == "model"
    assert record.model == helper.model.as_chat_model().model


async def test_error_fallback_ends_the_run_and_leaves_the_conversation() -> None:
    def broken(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if is_summary_request(messages):
            return RuntimeError("summaries are down")
        return varied_text(120, len(messages))

    agent = with_history(Agent(FunctionModel(broken), context_policy=ContextPolicy(max_tokens=600)))
    events = await collect(agent.run("One more"))
    assert events[-1].stop_reason == "error"
    assert any(e.type == "compaction_error" and e.fallback == "error" for e in events)
    assert agent.last_compaction() is None
    assert agent.get_context_turns() == agent.get_turns()
    assert agent.get_turns()[-1].role == "user"  # the task's turn, unanswered
    before = agent.get_turns()
    with pytest.raises(CompactionError, match="unchanged"):
        await agent.compact_async(keep_last=2)
    assert agent.get_turns() == before == agent.get_context_turns()


async def test_summary_requests_count_toward_limits() -> None:
    talker = Talker(reply_words=120)
    agent = with_history(Agent(talker.model, context_policy=ContextPolicy(max_tokens=600)))
    result = await agent.run_async("Go on", usage_limits=UsageLimits(max_requests=1))
    # The summary took the run's one request, so the task's own request could not run.
    assert talker.summaries == 1
    assert result.stop_reason == "request_limit"
    assert result.usage.requests == 1


# ------------------------------------------------------------------ manual compaction


async def test_compact_keeps_turns_and_summary_rules() -> None:
    talker = Talker()
    agent = Agent(talker.model, system_prompt="Be brief.")
    for n in range(4):
        agent.add_turn(f"Question {n}", f"Answer {n}")
    assert agent.last_compaction() is None
    record = await agent.compact_async(keep_last=2)
    assert record is not None and record.method == "model" and record.turns_removed == 6
    assert not record.automatic and talker.summaries == 1
    assert agent.usage().requests == 1
    assert len(agent.get_turns()) == 8
    assert [t.text for t in agent.get_context_turns()] == ["Question 3", "Answer 3"]
    system = agent.get_context_turns(include_system_prompt=True)[0]
    assert system.role == "system" and SUMMARY_HEADING in system.text
    # The summary comes along when the new prompt still contains it ...
    agent.set_system_prompt(agent.get_system_prompt() + "\nAlso be kind.")  # type: ignore[operator]
    assert "Summary 1" in agent.get_system_prompt()  # type: ignore[operator]
    # ... and goes when it does not.
    agent.set_system_prompt("Be brief.")
    assert agent.get_system_prompt() == "Be brief."
    assert len(agent.get_context_turns()) == 2
    agent.set_turns(agent.get_turns())
    assert len(agent.get_context_turns()) == 8
    assert await agent.compact_async(keep_last=8) is None  # nothing to remove


def test_compact_with_a_summary_never_starts_between_a_call_and_its_result() -> None:
    agent = Agent(ScriptedModel([])).set_turns(
        [
            Turn(role="user", contents=[ContentText(text="list")]),
            Turn(role="assistant", contents=[ContentToolRequest(id="c1", name="ls")]),
            Turn(role="user", contents=[ContentToolResult(call_id="c1", name="ls", output="a")]),
            Turn(role="assistant", contents=[ContentText(text="One file.")]),
        ]
    )
    record = agent.compact(keep_last=2, summary="We listed files.")
    assert record is not None and record.method == "supplied" and record.turns_removed == 1
    # The view opens with a user turn, then the call and its result.
    roles = [t.role for t in agent.get_context_turns()]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert agent.get_context_turns()[1].tool_requests[0].id == "c1"


async def test_compact_is_refused_during_a_run() -> None:
    import asyncio

    from deputy_shiny.errors import AgentBusyError

    agent = Agent(ScriptedModel([ScriptedReply(text="slow reply here", delay=0.05)]))
    task = asyncio.ensure_future(agent.run_async("Hi"))
    await asyncio.sleep(0.02)
    with pytest.raises(AgentBusyError):
        await agent.compact_async()
    with pytest.raises(AgentBusyError):
        agent.microcompact()
    await task


# ------------------------------------------------------------------ microcompact


async def test_microcompact_clears_old_results_from_the_context_only() -> None:
    sent: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        sent.append(messages)
        if messages[-1]["role"] == "user":
            name = "keep_me" if len(sent) == 1 else "lookup"
            return ScriptedReply(tool_calls=[ScriptedToolCall(name, {"n": len(sent)})])
        return "done"

    def keep_me(n: int) -> str:
        """Keep this."""
        return f"kept {n}"

    agent = Agent(FunctionModel(model), tools=[local_tool(lookup), local_tool(keep_me)])
    for n in range(3):
        await agent.run_async(f"Go {n}")
    assert agent.microcompact(keep_last=4, keep_tools=["keep_me"]) == 1
    assert agent.microcompact(keep_last=4, keep_tools=["keep_me"]) == 0  # already cleared
    outputs = [r.output for t in agent.get_context_turns() for r in t.tool_results]
    assert outputs[0] == "kept 1"
    assert outputs[1] == "[Old tool result cleared to save context.]"
    assert outputs[2].startswith("alpha") or outputs[2] != outputs[1]
    assert [r.output for t in agent.get_turns() for r in t.tool_results][1] == lookup(3)
    assert agent.microcompact(keep_last=0, marker="[gone]") == 2
    assert agent.microcompact(keep_last=math.inf) == 0
    await agent.run_async("Again")
    tool_messages = [m["content"] for m in sent[-2] if m["role"] == "tool"]
    assert tool_messages[:3] == ["[gone]", "[Old tool result cleared to save context.]", "[gone]"]
    with pytest.raises(Exception, match="keep_last"):
        agent.microcompact(keep_last=-1)


# ------------------------------------------------------------------ offloading


def big_output(n: int = 0) -> str:
    """Return a large result."""
    return varied_text(20_000, n)


async def test_large_results_are_offloaded_read_back_and_resolved(tmp_path: Path) -> None:
    sent: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        sent.append(messages)
        last = messages[-1]
        if last["role"] == "user":
            return ScriptedReply(tool_calls=[ScriptedToolCall("big_output", {"n": 1})])
        if "read_tool_result" not in str(messages[-2]):
            reference = last["content"].split("saved as ", 1)[1].split(". ", 1)[0]
            call = ScriptedToolCall("read_tool_result", {"reference": reference, "offset": 2000})
            return ScriptedReply(tool_calls=[call])
        return "read it"

    offload = tmp_path / "results"
    agent = Agent(
        FunctionModel(model),
        tools=[local_tool(big_output)],
        context_policy=ContextPolicy(offload_dir=offload, max_tokens=None),
    )
    result = await agent.run_async("Fetch the data")
    assert result.response == "read it"
    ends = [e for e in result.events if e.type == "tool_end"]
    assert ends[0].output.startswith("[Tool result too large for the context")
    assert "deputy://tool-result/" in ends[0].output
    assert len(ends[0].output) < 3_000
    assert ends[1].output.startswith("[Characters 2,000-18,000 of") and not ends[1].is_error
    assert ends[1].output.split("\n", 1)[1] == big_output(1)[2000:18000]
    assert all(len(str(m)) < 40_000 for m in sent[-1])
    # The full value comes back through the reference, or text containing it.
    assert agent.resolve_tool_result(ends[0].output) == big_output(1)
    # Saved in the FileStore on offload_dir (one storage path), as one record.
    files = list((offload / "records" / "tool_result").iterdir())
    assert len(files) == 1 and files[0].suffix == ".json"

    reference = "deputy://tool-result/" + files[0].stem
    for forged in (
        "deputy://tool-result/" + "A" * 32,
        "deputy://tool-result/../../etc/passwd",
        str(files[0]),
        reference + "/../x",
    ):
        with pytest.raises(ToolResultReferenceError):
            agent.resolve_tool_result(forged)
    # Another session sharing the directory cannot read it.
    other = Agent(ScriptedModel([]), context_policy=ContextPolicy(offload_dir=offload))
    with pytest.raises(ToolResultReferenceError, match="not this session"):
        other.resolve_tool_result(reference)


async def test_without_offload_dir_large_results_are_cut() -> None:
    agent = Agent(
        ScriptedModel([ScriptedReply(tool_calls=[ScriptedToolCall("big_output", {"n": 2})]), "ok"]),
        tools=[local_tool(big_output)],
        context_policy=ContextPolicy(max_tool_result_bytes=4096, max_tokens=None),
    )
    result = await agent.run_async("Go")
    output = next(e for e in result.events if e.type == "tool_end").output
    assert len(output.encode()) < 4096 and "offload_dir" in output


async def test_manual_compact_fires_pre_compact_with_reason_manual() -> None:
    reasons: list[str | None] = []

    def pre(context: Any) -> HookResultPreCompact:
        reasons.append(context.reason)
        return HookResultPreCompact(summary=f"{context.details['turns_to_remove']} turns.")

    talker = Talker()
    agent = with_history(Agent(talker.model, hooks=[HookMatcher("PreCompact", pre)]))
    record = await agent.compact_async(keep_last=2)
    assert record is not None and record.method == "hook" and not record.automatic
    assert reasons == ["manual"] and talker.summaries == 0
    assert str(agent.get_system_prompt()).endswith("6 turns.")
    # An explicit summary wins over the hook (which is not asked).
    await agent.compact_async(keep_last=1, summary="Mine.")
    assert reasons == ["manual"] and agent.last_compaction().method == "supplied"  # type: ignore[union-attr]


async def test_no_summary_request_when_the_newest_turns_alone_pass_max_tokens() -> None:
    talker = Talker(tool="big_output")
    agent = Agent(
        talker.model,
        tools=[local_tool(big_output)],
        context_policy=ContextPolicy(max_tokens=2000, max_tool_result_bytes=None),
    )
    result = await agent.run_async("Fetch")
    assert result.stop_reason == "complete"
    assert talker.summaries == 0 and agent.last_compaction() is None
    assert "compaction_start" not in types_of(result.events)


async def test_an_interrupt_during_the_summary_request_leaves_the_context() -> None:
    import asyncio

    def slow_summaries(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if is_summary_request(messages):
            return ScriptedReply(text=varied_text(50, 1), delay=0.02)
        return "answer"

    agent = with_history(
        Agent(FunctionModel(slow_summaries), context_policy=ContextPolicy(max_tokens=600))
    )
    task = asyncio.ensure_future(collect(agent.run("Next")))
    await asyncio.sleep(0.1)
    assert agent.interrupt()
    events = await task
    assert "compaction_start" in types_of(events) and "compaction" not in types_of(events)
    assert events[-1].stop_reason == "interrupted"
    assert agent.last_compaction() is None
    assert agent.get_context_turns() == agent.get_turns()
    assert agent._conversation.summary is None


# ------------------------------------------------------------------ how compaction is charged


class SummaryBiller:
    """A FunctionModel script recording the summary requests' messages. ``reported``:
    summaries and answers report their usage and cost; otherwise a summary stream
    breaks off before its usage arrives, so the engine must estimate what it cost."""

    def __init__(self, reported: bool) -> None:
        self.reported = reported
        self.summary_messages: list[list[dict[str, Any]]] = []
        self.model = FunctionModel(self)

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if not is_summary_request(messages):
            return ScriptedReply(
                text="The answer.", usage={"prompt_tokens": 40, "completion_tokens": 3}, cost=0.5
            )
        self.summary_messages.append(messages)
        text = "Summary: the user asked four questions."
        if self.reported:
            return ScriptedReply(
                text=text, usage={"prompt_tokens": 321, "completion_tokens": 12}, cost=0.25
            )
        return ScriptedReply(
            text=text, chunk_size=16, error=RuntimeError("cut off"), error_after_chunks=2
        )


@pytest.mark.parametrize("reported", [True, False], ids=["reported", "estimated"])
async def test_manual_and_automatic_compaction_charge_the_same(reported: bool) -> None:
    policy = ContextPolicy(max_tokens=600, fallback="text")
    auto_model, manual_model = SummaryBiller(reported), SummaryBiller(reported)
    auto = with_history(Agent(auto_model.model, context_policy=policy))
    result = await auto.run_async("One more")
    automatic = auto.last_compaction()
    assert auto_model.summary_messages and automatic is not None
    # The same conversation, compacted by hand instead, where the run compacted it.
    manual = with_history(Agent(manual_model.model, context_policy=policy))
    manual.set_turns([*manual.get_turns(), auto.get_turns()[-2]])  # the run's user turn
    record = await manual.compact_async()
    assert record is not None and record.turns_removed == automatic.turns_removed
    assert record.method == automatic.method == ("model" if reported else "text")
    assert manual_model.summary_messages == auto_model.summary_messages
    # The run's usage is its summary request plus its answer (40 + 3 tokens, $0.5); the
    # manual compaction's is the summary request alone, counted the same way.
    charged = manual.usage()
    assert auto.usage() == result.usage
    assert charged.requests == 1 == result.usage.requests - 1
    assert charged.input_tokens == result.usage.input_tokens - 40
    assert charged.output_tokens == result.usage.output_tokens - 3
    if reported:
        assert (charged.input_tokens, charged.output_tokens) == (321, 12)
        assert charged.cost == 0.25 and result.usage.cost == 0.75
    else:
        # No usage arrived: about four characters a token, of the messages sent and of
        # the two chunks received; the cost is unknown.
        sent = manual_model.summary_messages[0]
        assert charged.input_tokens == len(json.dumps(sent)) // 4
        assert charged.output_tokens == 32 // 4
        assert charged.cost is None and charged.cost_missing == 1
        assert result.usage.cost is None and result.usage.cost_missing == 1


async def test_a_run_started_during_a_manual_compaction_is_refused() -> None:
    import asyncio

    from deputy_shiny.errors import AgentBusyError

    # A slow summary: the compaction is still waiting on the model when the run starts.
    model = ScriptedModel([ScriptedReply(text=varied_text(30, 7), delay=0.05), "Answer."])
    agent = with_history(Agent(model, context_policy=ContextPolicy(max_tokens=600)))
    before = agent.get_turns()
    compaction = asyncio.create_task(agent.compact_async())
    for _ in range(1000):  # at most 10 s until the summary request is in flight
        if model.requests:
            break
        await asyncio.sleep(0.01)
    assert model.requests and agent.running
    with pytest.raises(AgentBusyError, match="already running"):
        await agent.run_async("Meanwhile")
    record = await compaction
    assert record is not None and record.turns_removed > 0
    assert not agent.running
    assert agent.get_turns() == before  # the refused run added nothing
    assert (await agent.run_async("Now")).response == "Answer."


@pytest.mark.parametrize("how", ["automatic", "manual"])
async def test_compaction_respects_the_agents_request_limit(how: str) -> None:
    def cut_off(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if is_summary_request(messages):  # billed: chunks arrived before the failure
            return ScriptedReply(
                text=varied_text(20, 1), error=RuntimeError("cut off"), error_after_chunks=1
            )
        return "answer"

    helper = Talker()
    policy = ContextPolicy(max_tokens=600, summary_fallback_models=[helper.model])
    agent = with_history(
        Agent(
            FunctionModel(cut_off),
            usage_limits=UsageLimits(max_requests=1),
            context_policy=policy,
        )
    )
    if how == "automatic":
        events = await collect(agent.run("One more"))
        assert events[-1].stop_reason == "error"
        error = next(e for e in events if e.type == "compaction_error").error
    else:
        with pytest.raises(CompactionError) as raised:
            await agent.compact_async()
        error = str(raised.value)
    # The failed summary took the one request: the fallback model was never asked.
    assert "request limit leaves no request" in error
    assert helper.summaries == 0 and helper.requests == 0
    assert agent.usage().requests == 1
    assert agent.last_compaction() is None
