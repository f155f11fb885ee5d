"""Coalesced text in the kit: ``render_events(flush_interval=...)`` and its option.

A model's chunks are sent to the browser at most once every ``flush_interval``; what
arrives meanwhile waits, and goes out on a timer when the model pauses. Cards, notes and
the end of a reply never wait. Most tests feed ``render_events`` a scripted stream of
events (exact times, no model), a few run a real Agent through litellm. Times are
compared with bounds derived from the test's own clock (counts bounded by elapsed time)
or with a large interval against a far smaller bound, so a busy machine cannot fail them.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import math
import re
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from shiny.express._stub_session import ExpressStubSession
from shiny.session import session_context
from shinychat.types import ChatMessage

from deputy_shiny import Agent
from deputy_shiny.errors import ConfigurationError
from deputy_shiny.events import (
    AgentEvent,
    PermissionEvent,
    StartEvent,
    StopEvent,
    TextEvent,
    ToolEndEvent,
    ToolStartEvent,
)
from deputy_shiny.shiny import ImageGuard, agent_chat_server, render_events
from deputy_shiny.shiny._render import DEFAULT_FLUSH_INTERVAL, note_chunk
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from tests.helpers import local_tool

IDS: dict[str, Any] = {"agent_id": "a", "session_id": "s", "run_id": "run-000000000001"}


def text(chunk: str) -> TextEvent:
    return TextEvent(text=chunk, **IDS)


def tool_start(call_id: str = "c1") -> ToolStartEvent:
    return ToolStartEvent(call_id=call_id, tool_name="look", arguments={"x": 1}, **IDS)


def allowed(call_id: str = "c1") -> PermissionEvent:
    return PermissionEvent(call_id=call_id, tool_name="look", decision="allow", **IDS)


def tool_end(call_id: str = "c1") -> ToolEndEvent:
    return ToolEndEvent(call_id=call_id, tool_name="look", output="seen", **IDS)


def stop(reason: str = "complete") -> StopEvent:
    return StopEvent(stop_reason=reason, **IDS)


class Script:
    """A run's events, each after a pause: ``(seconds, event)``; records how it went.

    ``emitted`` holds (clock time, event) as each is yielded; ``cancelled`` and
    ``closed`` say whether a step was cancelled and whether the generator was closed.
    """

    def __init__(self, steps: list[tuple[float, AgentEvent]]) -> None:
        self.steps = steps
        self.emitted: list[tuple[float, AgentEvent]] = []
        self.cancelled = False
        self.closed = False
        self.finished = False

    async def events(self) -> AsyncIterator[AgentEvent]:
        try:
            for pause, event in self.steps:
                if pause:
                    await asyncio.sleep(pause)
                self.emitted.append((time.monotonic(), event))
                yield event
            self.finished = True
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        finally:
            self.closed = True


async def received(
    chunks: AsyncIterator[str | ChatMessage],
) -> list[tuple[float, str | ChatMessage]]:
    """Every chunk with the clock time it reached the consumer."""
    return [(time.monotonic(), chunk) async for chunk in chunks]


def texts(got: list[tuple[float, str | ChatMessage]]) -> list[str]:
    return [chunk for _, chunk in got if isinstance(chunk, str)]


def words(n: int) -> list[str]:
    return [f"w{i:04d} " for i in range(n)]


@contextmanager
def loop_complaints() -> Iterator[list[str]]:
    """What the loop reports ("Task was destroyed but it is pending", "exception was never
    retrieved") and any warning, collected after a garbage collection."""
    loop = asyncio.get_running_loop()
    complaints: list[str] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: complaints.append(context["message"]))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield complaints
            gc.collect()
        complaints.extend(str(w.message) for w in caught)
    finally:
        loop.set_exception_handler(previous)


def other_tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()}


# --------------------------------------------------------------------------- coalescing


async def test_fast_chunks_are_coalesced_complete_and_in_order() -> None:
    chunks = words(120)
    script = Script([(0.0, StartEvent(task="go", **IDS))] + [(0.004, text(c)) for c in chunks])
    interval = 0.05
    started = time.monotonic()
    got = await received(render_events(script.events(), flush_interval=interval))
    elapsed = time.monotonic() - started
    sent = texts(got)
    assert "".join(sent) == "".join(chunks)  # all of it, in order
    # At most one update per interval (the first goes at once, the end flushes the
    # rest): bounded by the time it really took, whatever the machine's load.
    assert len(sent) <= elapsed / interval + 2, (len(sent), elapsed)
    assert len(sent) < len(chunks) / 3, len(sent)
    times = [at for at, chunk in got if isinstance(chunk, str)]
    gaps = [b - a for a, b in itertools.pairwise(times[:-1])]  # the end is not paced
    assert all(gap >= interval * 0.9 for gap in gaps), gaps


async def test_zero_interval_sends_one_chunk_per_text_event() -> None:
    chunks = ["Hello", ", ", "wor", "ld", "!"]
    script = Script([(0.0, text(c)) for c in chunks] + [(0.0, stop())])
    got = await received(render_events(script.events(), flush_interval=0))
    assert texts(got) == chunks


async def test_a_real_run_streams_the_same_text_at_both_settings() -> None:
    reply = "".join(words(60))
    results = []
    for interval in (0.0, 0.05):
        agent = Agent(ScriptedModel([ScriptedReply(reply, chunk_size=7, delay=0.003)]))
        stream = render_events(agent.run("go"), flush_interval=interval)
        results.append(texts(await received(stream)))
    one_each, coalesced = results
    assert "".join(one_each) == "".join(coalesced) == reply
    assert len(one_each) == math.ceil(len(reply) / 7)
    assert len(coalesced) < len(one_each) / 2, (len(coalesced), len(one_each))


async def test_a_paused_models_buffered_text_goes_out_on_the_timer() -> None:
    interval = 0.2
    # "b" arrives right after "a" (so it waits), then the model is silent for 2 s.
    # "c" comes after the pause, then the model is silent again before it stops.
    script = Script([(0.0, text("a")), (0.0, text("b")), (2.0, text("c")), (1.0, stop())])
    got = await received(render_events(script.events(), flush_interval=interval))
    assert texts(got) == ["a", "b", "c"]
    (sent_a, _), (sent_b, _), (sent_c, _) = got
    emitted_c = script.emitted[2][0]
    # "b" went out on the timer, about one interval after "a", long before "c" came.
    assert interval * 0.9 <= sent_b - sent_a < emitted_c - sent_a
    assert sent_b - sent_a < 1.0, sent_b - sent_a
    # The model's pause was waited out, not cut: its step was never cancelled.
    assert script.finished and not script.cancelled
    # "c" went out as it came (its interval had passed), not with the stop a second later.
    assert 0 <= sent_c - emitted_c < 0.5, sent_c - emitted_c


async def test_cards_notes_and_the_end_are_not_delayed_behind_the_interval() -> None:
    interval = 2.0  # a large interval: anything that waited for it would show
    script = Script(
        [
            (0.0, text("first ")),  # goes at once
            (0.0, text("waits ")),  # buffered: the interval has not passed
            (0.05, tool_start()),
            (0.0, allowed()),  # the card shows now, the text before it first
            (0.05, tool_end()),
            (0.0, text("after ")),
            (0.05, stop("interrupted")),
        ]
    )
    started = time.monotonic()
    got = await received(render_events(script.events(), flush_interval=interval))
    kinds = [
        c if isinstance(c, str) else c.blocks[0]["type"]  # type: ignore[index]
        for _, c in got
    ]
    assert kinds == ["first ", "waits ", "tool_request", "tool_result", "after ", kinds[-1]]
    assert "Stopped" in kinds[-1]
    # Each went out right after the event that caused it, far under the interval.
    emitted = dict((id(event), at) for at, event in script.emitted)
    card_event = script.steps[3][1]
    card_sent = got[2][0]
    assert card_sent - emitted[id(card_event)] < interval / 8
    assert got[-1][0] - emitted[id(script.steps[-1][1])] < interval / 8
    assert time.monotonic() - started < interval, "nothing waited for the interval"


async def test_a_failing_run_still_shows_the_text_before_the_failure() -> None:
    async def failing() -> AsyncIterator[AgentEvent]:
        yield text("shown ")
        yield text("too")  # buffered when the run fails
        raise RuntimeError("boom")

    got: list[str | ChatMessage] = []

    async def consume() -> None:
        async for chunk in render_events(failing(), flush_interval=5.0):
            got.append(chunk)

    with pytest.raises(RuntimeError, match="boom"):
        await consume()
    assert got == ["shown ", "too"]


# --------------------------------------------------------------------------- untrusted text


TAG = re.compile(r"<(?=[A-Za-z/!?])")


@pytest.mark.parametrize("interval", [0.0, 0.03])
async def test_markup_split_across_chunks_and_flushes_reaches_the_browser_inert(
    interval: float,
) -> None:
    # Cuts inside an image's URL, between "<" and a tag name, inside raw HTML; pauses
    # longer than the interval make flushes fall inside those constructs too.
    pieces = [
        "See ![cat](https://ev",
        "il.example/cat.png?q=",
        "secret) and <",
        "scr",
        "ipt>alert(1)</scr",
        "ipt> <img src=https://evil.example/",
        "x.png> ![ok](https://images.exam",
        "ple/ok.png) end!",
        "[ref][r] <",
    ]
    script = Script([(0.05 if i % 2 else 0.0, text(p)) for i, p in enumerate(pieces)])
    got = texts(
        await received(
            render_events(
                script.events(),
                allowed_image_origins=["https://images.example"],
                flush_interval=interval,
            )
        )
    )
    assert len(got) > 3  # it did flush mid-construct
    whole = ImageGuard(["https://images.example"])
    assert "".join(got) == whole.feed("".join(pieces)) + whole.flush()
    for chunk in got:
        assert TAG.search(chunk) is None, chunk  # no tag can form, in any update
        assert "evil.example/cat.png" not in chunk and "secret" not in chunk
    shown = ""
    for chunk in got[:-1]:
        shown += chunk
        # What the browser has at any moment never ends in a construct still open.
        assert not shown.endswith(("<", "!")), shown
        assert "](https://ev" not in shown
    assert "![ok](https://images.example/ok.png)" in "".join(got)


# --------------------------------------------------------------------------- stop and close


async def test_stop_mid_reply_ends_promptly_with_the_text_so_far() -> None:
    reply = "".join(words(400))
    agent = Agent(ScriptedModel([ScriptedReply(reply, chunk_size=7, delay=0.01)]))
    interval = 1.0
    got: list[tuple[float, str | ChatMessage]] = []
    stopped_at = 0.0
    async for chunk in render_events(agent.run("go"), flush_interval=interval):
        got.append((time.monotonic(), chunk))
        if len(got) == 2:  # the first went at once, the second on the timer
            stopped_at = time.monotonic()
            agent.interrupt("interrupted")
    sent = texts(got)
    assert sent[-1] == note_chunk("Stopped.")
    assert reply.startswith("".join(sent[:-1]))
    assert got[-1][0] - stopped_at < interval / 4
    assert not agent.running


async def test_closing_the_stream_while_a_step_waits_leaves_nothing_behind() -> None:
    # The model is silent (a step in progress in its own task) when the session ends.
    script = Script([(0.0, text("a")), (0.0, text("b")), (30.0, text("never")), (0.0, stop())])
    with loop_complaints() as complaints:
        stream = render_events(script.events(), flush_interval=0.05)
        assert await anext(stream) == "a"
        assert await anext(stream) == "b"  # on the timer: the next step is pending
        assert other_tasks(), "a step runs in a task of its own"
        started = time.monotonic()
        await stream.aclose()
        assert time.monotonic() - started < 1.0
        assert script.cancelled and script.closed and not script.finished
        assert not other_tasks()
        del stream
    assert complaints == []


async def test_cancelling_the_consumer_mid_wait_leaves_nothing_behind() -> None:
    script = Script([(0.0, text("a")), (0.0, text("b")), (30.0, text("never"))])
    got: list[str | ChatMessage] = []

    async def consume() -> None:
        async for chunk in render_events(script.events(), flush_interval=5.0):
            got.append(chunk)

    with loop_complaints() as complaints:
        task = asyncio.create_task(consume())
        await asyncio.sleep(0.2)  # "b" waits for its deadline, the step for the model
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert got == ["a"]
        assert script.cancelled and script.closed
        assert not other_tasks()
    assert complaints == []


async def test_a_tool_run_shows_its_card_between_the_texts() -> None:
    def look(x: int) -> str:
        """Look.

        Args:
            x: What to look at.
        """
        return f"looked at {x}"

    first = ScriptedReply(
        "".join(words(30)), chunk_size=5, tool_calls=[ScriptedToolCall("look", {"x": 1})]
    )
    agent = Agent(ScriptedModel([first, "All done."]), tools=[local_tool(look)])
    got = [c async for c in render_events(agent.run("go"), flush_interval=DEFAULT_FLUSH_INTERVAL)]
    kinds = ["text" if isinstance(c, str) else c.blocks[0]["type"] for c in got]  # type: ignore[index]
    folded = [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]]
    assert folded == ["text", "tool_request", "tool_result", "text"]
    assert "".join(c for c in got if isinstance(c, str)) == "".join(words(30)) + "All done."


# --------------------------------------------------------------------------- the option


def no_agent(ctx: Any) -> Agent:
    raise AssertionError("a stub session makes no agent")


@pytest.mark.parametrize("bad", [-0.01, float("nan"), float("inf"), "0.04", True, None])
def test_agent_chat_server_refuses_a_bad_flush_interval(bad: Any) -> None:
    with (
        session_context(ExpressStubSession()),
        pytest.raises(ConfigurationError, match="flush_interval must be a finite number"),
    ):
        agent_chat_server("chat", no_agent, flush_interval=bad)


async def test_render_events_refuses_a_bad_flush_interval() -> None:
    with pytest.raises(ConfigurationError, match="flush_interval"):
        await anext(render_events(Script([]).events(), flush_interval=-1))


def test_agent_chat_server_takes_a_good_flush_interval() -> None:
    with session_context(ExpressStubSession()):
        for good in (0, 0.04, 1):
            handle = agent_chat_server("chat", no_agent, flush_interval=good)
            assert handle.agent is None
