"""Crash harness for the kit's durable approvals in a store (run by
tests/test_approval_crash.py).

``python -m tests.kit_crash_child <root> <store URL>`` imports deputy_shiny, the kit and
litellm once, then forks one process per step, each a fresh "app process" with its own
``KitPersistence(root, store=...)`` and a browser session driven as the kit's unit tests
drive one (tests/test_chat_session.py: the real session, conversation and modal queue,
fakes only where Shiny would be). For every stage, with a user of its own:

1. ``ask``: the user sends a message; the agent's call waits for approval in the store
   and shows as a modal. At ``pending`` the process is killed (SIGKILL) right there;
   else the user approves, and the process is killed at the stage: ``resuming`` (in a
   PreToolUse hook, before the tool), ``executing`` (inside the tool, after it logged
   its line), ``continuing`` (in the model request after the tool).
2. ``finish``: a new process on the same store opens the same user's conversation. A
   pending approval shows as its modal again and is approved there; then it tries to
   decide it once more (always refused), and writes what it saw to
   ``<root>/<stage>.json``.

The tool appends one line to ``<root>/<stage>.log`` per execution. A process killed
while resuming leaves the approval's lease behind until it expires: ``finish`` runs
``LEASE_TTL`` seconds later by its store's clock, as a process arriving after it lapsed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from deputy_shiny import Agent, HookMatcher, tool, tool_annotations
from deputy_shiny.errors import ApprovalDecidedError
from deputy_shiny.permissions import Permissions
from deputy_shiny.persistence import SqlStore
from deputy_shiny.persistence.approval_records import (
    APPROVAL_REF,
    LEASE_TTL,
    approval_read_async,
)
from deputy_shiny.shiny import KitPersistence
from deputy_shiny.shiny._chat_start import AgentChatContext
from deputy_shiny.shiny._conversations import kit_store
from deputy_shiny.testing import FunctionModel, ScriptedReply, ScriptedToolCall
from tests.approval_crash_child import _die, _in_child, _warm_up, log_execution
from tests.test_chat_session import restored, start, wait_until

STAGES = ("pending", "resuming", "executing", "continuing")


def _factory(log: Path, kill_at: str | None, armed: list[bool] | None = None) -> Any:
    """The app's agent_factory: one approval-gated tool, everything else the session's.
    It kills the process at ``kill_at`` once ``armed`` holds True (the user approved:
    PreToolUse hooks run before the approval is asked, too)."""
    armed = [True] if armed is None else armed

    def send(to: str) -> str:
        "Send a message."
        log_execution(log, to)
        if kill_at == "executing" and armed[0]:
            _die()
        return f"sent to {to}"

    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if not any(m["role"] == "tool" for m in messages):
            return ScriptedReply(tool_calls=[ScriptedToolCall("send", {"to": "ops"}, id="c1")])
        if kill_at == "continuing" and armed[0]:
            _die()
        return "Sent."

    def before_tool(tool_name: str, tool_input: dict[str, Any], context: Any) -> None:
        if kill_at == "resuming" and armed[0]:
            _die()

    def factory(ctx: AgentChatContext) -> Agent:
        return Agent(
            FunctionModel(reply),
            tools=[tool(send, annotations=tool_annotations(open_world_hint=False))],
            permissions=Permissions(tool_allowlist=("send",), approval_tools=("send",)),
            hooks=[HookMatcher("PreToolUse", before_tool)],
            **ctx.agent_options(),
        )

    return factory


def _persistence(root: Path, url: str, later: bool = False) -> KitPersistence:
    ahead = LEASE_TTL + 5.0 if later else 0.0
    store = SqlStore(url, clock=lambda: time.time() + ahead)
    return KitPersistence(root / "kit", store=store, trust_user_header=True)


async def _ask(root: Path, url: str, stage: str) -> None:
    kill_at = None if stage == "pending" else stage
    armed = [False]
    kit = start(
        root,
        _factory(root / f"{stage}.log", kill_at, armed),
        persistence=_persistence(root, url),
        user=stage,
    )
    await restored(kit)
    await kit.session.submit("Send the report")
    await wait_until(lambda: kit.prompts.showing is not None)
    if stage == "pending":
        _die()  # killed with the approval on screen
    armed[0] = True
    assert kit.click("approve", values={})
    await asyncio.sleep(60)  # killed at the stage long before this ends
    raise AssertionError(f"not killed at {stage}")


async def _finish(root: Path, url: str, stage: str) -> None:
    persistence = _persistence(root, url, later=stage != "pending")
    kit = start(root, _factory(root / f"{stage}.log", None), persistence=persistence, user=stage)
    shown = False
    if stage == "pending":
        await wait_until(lambda: kit.prompts.showing is not None, within=30)
        shown = True
        assert kit.click("approve", values={})
        await kit.chat.settled()
    else:
        await restored(kit)
    seen: dict[str, Any] = {
        "shown": shown,
        "showing": kit.prompts.showing is not None,
        "waiting": await kit.agent.pending_approval_async() is not None,
        "said": kit.chat.said()[-1][1] if kit.chat.said() else "",
    }
    store, link = kit.agent.store, kit_store(persistence)
    assert store is not None and link is not None
    records = await link.run(lambda s: s.list_records("approval"))
    ours = [r for r in records if r.payload["source"]["session_id"] == kit.agent.session_id]
    assert len(ours) == 1, ours
    ref = APPROVAL_REF + ours[0].key
    try:
        await kit.agent.resume_approval_async(ref, "approve")
        seen["again"] = "ran"
    except ApprovalDecidedError as exc:
        seen["again"] = f"decided:{exc.status}"
    record = await approval_read_async(ref, store=store)
    seen["status"] = record.status
    seen["effects"] = [e["event"] for e in record.effects]
    await kit.session.end()
    persistence.close()
    (root / f"{stage}.json").write_text(json.dumps(seen))


def _warm_kit(root: Path, url: str) -> None:
    """Open the store once before any fork (its schema is made, SQLAlchemy is imported),
    then let every thread end (a fork copies only the calling thread)."""
    persistence = _persistence(root / "warm", url)
    persistence.close()
    deadline = time.monotonic() + 5
    while threading.active_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    if threading.active_count() > 1:
        raise RuntimeError(f"threads left before fork: {threading.enumerate()}")


def main(root: Path, url: str) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for stage in STAGES:
        summary[stage] = {
            "ask": _in_child(lambda s=stage: asyncio.run(_ask(root, url, s))),
            "finish": _in_child(lambda s=stage: asyncio.run(_finish(root, url, s))),
        }
    return summary


if __name__ == "__main__":
    root, url = Path(sys.argv[1]), sys.argv[2]
    import tests.approval_crash_child as harness

    harness.STORE = url  # its warm-up imports the SQL libraries too
    _warm_up()
    _warm_kit(root, url)
    print(json.dumps(main(root, url)))
