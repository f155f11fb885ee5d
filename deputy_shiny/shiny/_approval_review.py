"""deputy's standalone approval review: ``approval_review_ui()`` / ``approval_review_server()``.

A Shiny module for a person to review the tool call an agent's durable approval
(``Agent(approval_dir=...)`` or ``store=``) left waiting, without the kit's chat: the
call stays blocked until the reviewer acts. The review is the kit's own approval modal
(every argument editable, lists and objects as JSON; an answer counts only from a real
click carrying the prompt's key), in the session's modal queue; the module's UI says
what waits. A decision resumes the run (``agent.resume_approval_async``) in a task of
the session, never inside a reactive effect.

Examples:
    >>> from deputy_shiny.shiny import approval_review_ui
    >>> "deputy-approval-review" in str(approval_review_ui("review"))
    True
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from htmltools import Tag, TagList
from shiny import Inputs, Outputs, Session, reactive, render, ui

from ..agent import Agent
from ..approvals import ApprovalDecision
from ..hooks import HookMatcher
from ..persistence.approvals import ApprovalContinuation
from . import _module as kit_module
from ._answers import decision_from_answer
from ._chat_module import kit_dependency
from ._prompts import PromptClosed, session_prompts
from ._session_asks import SessionAsks

__all__ = ["ApprovalReview", "approval_review_server", "approval_review_ui"]

logger = logging.getLogger(__name__)

Decide = Callable[[str, ApprovalDecision], Awaitable[Any]]
"""``decide(path, decision)``: carries a decision out (default: the agent's
``resume_approval_async``); what it returns is the outcome's ``result``."""


@dataclass
class ApprovalReview:
    """What ``approval_review_server`` returns.

    Attributes:
        pending: Reactive: the :class:`ApprovalContinuation` waiting, or None.
        outcome: Reactive: after the last decision, ``{"decision": "approve" | "deny",
            "tool_input": ..., "result": ...}`` (or ``"error"`` instead of ``"result"``).
        refresh: Look for a waiting approval again (a ``Stop`` hook on the agent does
            it when a run stops).
    """

    pending: reactive.Value[ApprovalContinuation | None]
    outcome: reactive.Value[dict[str, Any] | None]
    refresh: Callable[[], None]


@kit_module.ui
def approval_review_ui() -> TagList:
    """The review's place on the page: a line saying what waits (the call itself is
    reviewed in the kit's modal). Pair it with :func:`approval_review_server`."""
    return TagList(
        kit_dependency(),
        ui.div(ui.output_ui("review"), class_="deputy-approval-review", aria_live="polite"),
    )


@kit_module.server
def approval_review_server(
    input: Inputs,
    output: Outputs,
    session: Session,
    agent: Agent,
    decide: Decide | None = None,
) -> ApprovalReview:
    """Review ``agent``'s waiting durable approval in this browser session.

    Registers a ``Stop`` hook on ``agent`` (so the review looks again when a run stops),
    held only while the session lives: call it once per agent, with an agent of this
    session's own. ``decide`` replaces the default (``agent.resume_approval_async``),
    e.g. to continue the run elsewhere. Each approval is submitted at most once; one
    whose decision failed while it is still pending may be decided again.
    """
    if not isinstance(agent, Agent):
        raise TypeError(f"approval_review_server needs an Agent, not {type(agent).__name__}")
    pending: reactive.Value[ApprovalContinuation | None] = reactive.value(
        None, name="deputy_review_pending"
    )
    outcome: reactive.Value[dict[str, Any] | None] = reactive.value(
        None, name="deputy_review_outcome"
    )
    asks = SessionAsks(session_prompts(session), None)
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()

    def refresh() -> None:
        loop.call_soon_threadsafe(wake.set)  # a run may stop on another thread

    # The hook outlives nothing: it reaches this session only through ``holder``,
    # emptied when the session ends.
    holder: list[Callable[[], None]] = [refresh]

    def on_stop(context: Any) -> None:
        for poke in holder:
            poke()

    matcher = HookMatcher("Stop", on_stop)
    agent.add_hook(matcher)
    decide_with: Decide = decide or (lambda path, d: agent.resume_approval_async(path, d))
    task = asyncio.create_task(
        _review_loop(agent, asks, wake, pending, outcome, decide_with),
        name="deputy-approval-review",
    )
    wake.set()

    def ended() -> None:
        holder.clear()
        agent.hooks.remove(matcher)  # an agent that outlives the session keeps no hook
        task.cancel()

    session.on_ended(ended)

    @render.ui
    def review() -> Tag:
        record = pending()
        if record is None:
            return ui.p("No tool call is waiting for review.", class_="text-muted")
        request = record.request
        text = f"Waiting for your review: {request.tool_name}"
        return ui.p(text + (f" ({request.reason})" if request.reason else ""))

    return ApprovalReview(pending=pending, outcome=outcome, refresh=refresh)


async def _set(value: reactive.Value[Any], new: Any) -> None:
    async with reactive.lock():
        value.set(new)
        await reactive.flush()


async def _review_loop(
    agent: Agent,
    asks: SessionAsks,
    wake: asyncio.Event,
    pending: reactive.Value[ApprovalContinuation | None],
    outcome: reactive.Value[dict[str, Any] | None],
    decide: Decide,
) -> None:
    submitted: set[str] = set()
    while True:
        await wake.wait()
        wake.clear()
        try:
            record = await agent.pending_approval_async()
        except Exception as exc:  # a store that is down: say so, look again on refresh
            logger.warning("approval review: reading the pending approval failed: %s", exc)
            await _set(outcome, {"decision": None, "tool_input": None, "error": str(exc)})
            continue
        if record is not None and record.status != "pending":
            record = None
        await _set(pending, record)
        if record is None or str(record.source.path) in submitted:
            continue
        path = str(record.source.path)
        try:
            answer = await asks.approval(record.request)
        except PromptClosed:
            return
        except TimeoutError:
            continue
        decision = decision_from_answer(record.request, answer)
        if decision.stop:
            decision = ApprovalDecision.deny(decision.message)
        submitted.add(path)
        verb = "approve" if decision.approved else "deny"
        done: dict[str, Any] = {"decision": verb, "tool_input": decision.updated_input}
        try:
            done["result"] = await decide(path, decision)
        except Exception as exc:
            logger.warning("approval review: deciding %s failed: %s", Path(path).name, exc)
            done["error"] = str(exc)
            still = await agent.pending_approval_async()
            if still is not None and str(still.source.path) == path:
                submitted.discard(path)  # not consumed: it may be decided again
        await _set(outcome, done)
        wake.set()
