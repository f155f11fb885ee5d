"""The subagent panel: an agent's delegations, live, as the session's user may see them.

Any agent's: a LeadAgent's subagents, and the tasks it gave to retained agents or its
delegation graph.

Each delegation shows as a row: the subagent's name, its task (cut for display), a
status badge, its usage (requests and tokens) and its latest events (tool calls, what
it said), updated while it runs. "Transcript" opens a read-only transcript; "Stop"
interrupts a running delegation. Everything goes through the lead's
:class:`~deputy_shiny.delegation.DelegationDisclosure` with the ``requester`` the app
names: a requester the policy refuses sees a short note and no records, and a click
(or a forged input value) acts only on a delegation of this agent that the requester
may see.

The server polls the lead (``observe_subagents`` / ``inspect_subagents``) every
``interval`` seconds from an effect that never awaits; the page is re-rendered only
when what it shows changed. The panel's state and its answers to a poll or a click
are :class:`_SubagentPanel`'s, plain Python that runs without Shiny; the server only
wires it to the session's reactive values. The tick comes from a task of the
session's own that holds the reactive lock only to set a counter, and stops when the
session ends. Model and tool output are untrusted: they render as escaped text, never
as HTML.

Examples:
    >>> from deputy_shiny.shiny import subagent_panel_ui
    >>> "deputy-subagent-panel" in str(subagent_panel_ui("team"))
    True
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from htmltools import Tag, TagList, tags
from shiny import reactive, render, ui

from ..agent import Agent
from ..delegation import DELEGATE_TOOL, DelegationSubscription
from ..errors import DelegationDisclosureError, DelegationError
from ..messages import Turn
from . import _module as kit_module
from ._strings import DEFAULT_STRINGS, KitStrings

__all__ = ["subagent_panel_server", "subagent_panel_ui"]

logger = logging.getLogger(__name__)

TASK_CHARS = 160
"""The longest task shown in a row (the whole task is in the transcript)."""
EVENT_CHARS = 200
"""The longest event summary shown in a row."""
RECENT_EVENTS = 5
"""Events shown per delegation (the newest)."""
MAX_SHOWN = 30
"""Delegations shown (the newest)."""
TRANSCRIPT_CHARS = 4000
"""The longest piece of one transcript entry shown (text, arguments or output)."""

_STATUS_CLASS = {
    "running": "text-bg-info",
    "queued": "text-bg-secondary",
    "completed": "text-bg-success",
    "failed": "text-bg-danger",
    "stopped": "text-bg-warning",
    "suspended": "text-bg-warning",
    "not_started": "text-bg-secondary",
}
_LIVE = ("running", "queued")

AgentArg = Agent | Callable[[], Agent | None] | None
"""The agent, or a zero-argument function returning it."""


@kit_module.ui
def subagent_panel_ui() -> TagList:
    """The panel's place on the page (filled in by :func:`subagent_panel_server`).

    Examples:
        >>> from deputy_shiny.shiny import subagent_panel_ui
        >>> html = str(subagent_panel_ui("team"))
        >>> "team-delegations" in html
        True
    """
    from ._chat_module import kit_dependency

    return TagList(
        kit_dependency(), ui.div(ui.output_ui("delegations"), class_="deputy-subagent-panel")
    )


def _clip(text: str, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _usage_text(usage: Any, strings: KitStrings) -> str:
    if not isinstance(usage, dict):
        return ""
    return strings.format(
        "subagent_usage", requests=usage.get("requests", 0), tokens=usage.get("total_tokens", 0)
    )


def _transcript(turns: Any, strings: KitStrings) -> Tag:
    """A transcript (``inspect_subagents(..., transcript=True)``) as escaped text."""
    entries: list[Tag] = []
    for turn in turns if isinstance(turns, list) else ():
        role = str(turn.get("role", "?")) if isinstance(turn, dict) else "?"
        contents = turn.get("contents", []) if isinstance(turn, dict) else []
        for content in contents if isinstance(contents, list) else ():
            if not isinstance(content, dict):
                continue
            kind = content.get("type")
            if kind == "text":
                label, body = role, str(content.get("text", ""))
            elif kind == "tool_request":
                label = strings.format("subagent_calls", role=role, tool=content.get("name", "?"))
                body = str(content.get("raw_arguments") or content.get("arguments") or "")
            elif kind == "tool_result":
                name = "subagent_result_error" if content.get("is_error") else "subagent_result"
                label = strings.format(name, tool=content.get("name", "?"))
                body = str(content.get("output"))
            else:
                continue
            if len(body) > TRANSCRIPT_CHARS:
                body = body[:TRANSCRIPT_CHARS] + f" [... {len(body) - TRANSCRIPT_CHARS} more]"
            entries.append(
                tags.div(
                    tags.div(label, class_="deputy-subagent-role small fw-semibold"),
                    tags.pre(body, class_="deputy-subagent-text"),
                    class_=f"deputy-subagent-entry deputy-subagent-{kind}",
                )
            )
    if not entries:
        entries.append(tags.p(strings.subagent_transcript_empty, class_="text-muted small"))
    return tags.div(*entries, class_="deputy-subagent-transcript")


def _button(label: str, action: str, delegation_id: str, input_id: str) -> Tag:
    return tags.button(
        label,
        type="button",
        class_=f"btn btn-sm btn-outline-secondary deputy-subagent-btn-{action}",
        data_deputy_subagent=action,
        data_delegation=delegation_id,
        data_input=input_id,
    )


def _row(
    view: dict[str, Any],
    events: list[str],
    transcript: Any,
    input_id: str,
    strings: KitStrings = DEFAULT_STRINGS,
) -> Tag:
    """One delegation (a view from ``inspect_subagents``) as a row of the panel."""
    delegation_id = str(view.get("delegation_id", ""))
    observed = view.get("observed") or {}
    status = str(observed.get("status", "?"))
    task = str(view.get("task", ""))
    header = tags.div(
        tags.strong(str(view.get("agent_name", "?")), class_="deputy-subagent-name"),
        tags.span(
            strings.state_word(status),
            class_=f"badge {_STATUS_CLASS.get(status, 'text-bg-secondary')} deputy-subagent-status",
        ),
        tags.span(
            _usage_text(observed.get("usage"), strings), class_="deputy-subagent-usage small"
        ),
        class_="d-flex flex-wrap align-items-center gap-2",
    )
    body: list[Any] = [header, tags.div(_clip(task, TASK_CHARS), class_="deputy-subagent-task")]
    if events:
        body.append(
            tags.ul(
                *[tags.li(_clip(e, EVENT_CHARS)) for e in events],
                class_="deputy-subagent-events small",
            )
        )
    if view.get("restored"):  # from the saved conversation: its records are gone
        body.append(tags.div(strings.subagent_from_saved, class_="text-muted small"))
        return tags.div(*body, class_="deputy-subagent mb-2", data_status=status)
    buttons = [
        _button(
            strings.subagent_hide_transcript
            if transcript is not None
            else strings.subagent_transcript,
            "transcript",
            delegation_id,
            input_id,
        )
    ]
    if status in _LIVE:
        buttons.append(_button(strings.subagent_stop, "interrupt", delegation_id, input_id))
    body.append(tags.div(*buttons, class_="d-flex gap-2"))
    if transcript is not None:
        body.append(_transcript(transcript, strings))
    return tags.div(
        *body,
        class_="deputy-subagent mb-2",
        data_delegation=delegation_id,
        data_status=status,
        title=task if len(task) <= 2000 else task[:2000] + "…",
    )


def _restored(turns: list[Turn], views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Delegations the conversation's turns show but the lead no longer holds (a reloaded
    conversation: its delegation records lived in the old session's memory), as views,
    oldest first. A delegate call that matches a live delegation (agent and task) is
    that one, not a restored one."""
    live: dict[tuple[Any, Any], int] = {}
    for view in views:
        key = (view.get("agent_name"), view.get("task"))
        live[key] = live.get(key, 0) + 1
    results = {r.call_id: r for turn in turns for r in turn.tool_results}
    out = []
    for turn in turns:
        for call in turn.tool_requests:
            agent, task = call.arguments.get("agent"), call.arguments.get("task")
            if call.name != DELEGATE_TOOL or not isinstance(agent, str):
                continue
            if live.get((agent, task), 0) > 0:
                live[(agent, task)] -= 1
                continue
            result = results.get(call.id)
            status = "stopped" if result is None else "failed" if result.is_error else "completed"
            task_text = task if isinstance(task, str) else ""
            out.append(
                {
                    "agent_name": agent,
                    "task": task_text,
                    "observed": {"status": status},
                    "restored": True,
                }
            )
    return out


class _SubagentPanel:
    """One session's panel: what it has seen of the lead, and how it answers a click.

    Plain state, read and written only by the panel's effects (which never await): the
    lead's subscription (for whom, to which lead), the newest events per delegation,
    the delegations the requester may see now, whether one is still running, and
    which transcripts were open at the last read. :meth:`poll` says what to show,
    :meth:`click` acts on a button; :func:`subagent_panel_server` only wires them to
    the Shiny session.

    Args:
        agent: The session's agent, or a function returning it.
        requester: Whom the lead's disclosure policy judges, or a function returning it.

    Examples:
        >>> _SubagentPanel(None, "ann").poll(frozenset(), ("loading",))
        ('not_lead',)
    """

    def __init__(self, agent: AgentArg, requester: Any) -> None:
        self._agent = agent
        self._requester = requester
        self.subscription: DelegationSubscription | None = None
        self.subscribed_lead: Agent | None = None
        self.subscribed_requester: Any = None
        self.opened: frozenset[str] | None = None  # the transcripts open at the last read
        self.live = False  # a delegation shown was running (or was just stopped)
        self.recent: dict[str, deque[str]] = {}
        self.visible: set[str] = set()
        self.turns_seen = -1  # the lead's turn count at the last read (restored rows)

    def lead(self) -> Agent | None:
        agent = self._agent
        target = agent() if callable(agent) and not isinstance(agent, Agent) else agent
        return target if isinstance(target, Agent) else None

    def who(self) -> Any:
        return self._requester() if callable(self._requester) else self._requester

    def due(self) -> bool:
        """Whether a poll could show something new: the lead or requester changed, the
        requester was refused (the policy is asked again, as it may change its mind), the
        lead has events not read yet, or a delegation shown is running. Cheap, so the
        tick asks it before it takes the reactive lock (an idle panel then costs nothing).
        """
        lead = self.lead()
        if lead is not self.subscribed_lead:
            return True
        if lead is None:
            return False
        subscription = self.subscription
        if subscription is None or self.who() != self.subscribed_requester:
            return True
        if self.live or subscription.pending:
            return True
        # A conversation restored on reload (in the background, as the session starts)
        # brings delegations the lead has no record of: watched until turns arrive.
        return self.turns_seen <= 0 and len(lead.get_turns()) != self.turns_seen

    def poll(self, opened: frozenset[str], shown: tuple[Any, ...]) -> tuple[Any, ...]:
        """What the panel shows now, with ``opened`` transcripts open (``shown``: unchanged).

        The result is ``("not_lead",)``, ``("denied",)`` or ``("rows", [(view, events,
        transcript), ...])``, newest first. A failure is logged and changes nothing.
        """
        lead = self.lead()
        if lead is None:
            self._unsubscribe()
            return ("not_lead",)
        try:
            return self._snapshot(lead, self.who(), opened, shown)
        except Exception:
            logger.warning("subagent panel: polling failed", exc_info=True)
            return shown

    def click(self, value: Any, opened: frozenset[str]) -> frozenset[str]:
        """Act on a button's input ``value``; the transcripts open afterwards.

        Only a delegation of this agent that this requester may see, and only these
        actions: a forged value from the browser (another session's id, anything)
        changes nothing.
        """
        if not isinstance(value, dict):
            return opened
        delegation_id, action = value.get("delegation_id"), value.get("action")
        if not isinstance(delegation_id, str) or action not in ("interrupt", "transcript"):
            return opened
        lead = self.lead()
        if lead is None or delegation_id not in self.visible:
            return opened
        try:
            lead.inspect_subagents(self.who(), delegation_id)
        except (DelegationDisclosureError, DelegationError):
            return opened
        if action == "interrupt":
            lead.interrupt_subagent(delegation_id, "stopped from the panel")
            self.live = True  # re-read at the next poll
            return opened
        return opened ^ {delegation_id}  # open or close this one

    def close(self) -> None:
        """The session ended: let go of the lead and its subscription (the panel's
        effects sit in Shiny's session, a cycle freed only by a full collection; the
        agent is freed by reference count as the session ends)."""
        self._unsubscribe()
        self._agent = None

    def _unsubscribe(self) -> None:
        if self.subscription is not None:
            self.subscription.close()
        self.subscription, self.subscribed_lead, self.opened = None, None, None
        self.recent.clear()

    def _subscribe(self, lead: Agent, who: Any) -> DelegationSubscription | None:
        """The subscription to ``lead`` for ``who``: kept while both stay the same."""
        current = self.subscription
        if (
            current is not None
            and self.subscribed_requester == who
            and self.subscribed_lead is lead
        ):
            return current
        if current is not None:
            current.close()
        self.recent.clear()
        self.subscription, self.opened, self.turns_seen = None, None, -1
        self.subscribed_lead, self.subscribed_requester = lead, who
        try:
            self.subscription = lead.observe_subagents(who)
        except DelegationDisclosureError:
            return None
        return self.subscription

    def _snapshot(
        self, lead: Agent, who: Any, opened: frozenset[str], shown: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        subscription = self._subscribe(lead, who)
        if subscription is None:
            self.visible.clear()
            return ("denied",)
        fresh = subscription.poll()
        for event in fresh:
            kept = self.recent.setdefault(event.delegation_id, deque(maxlen=RECENT_EVENTS))
            if event.kind != "status":
                kept.append(event.summary)
        turns = lead.get_turns()
        same_turns, self.turns_seen = len(turns) == self.turns_seen, len(turns)
        if not fresh and not self.live and opened == self.opened and same_turns:
            return shown  # nothing new, nothing running: keep what is shown
        try:
            views = lead.inspect_subagents(who)
        except DelegationDisclosureError:
            self.visible.clear()
            return ("denied",)
        views = views[-MAX_SHOWN:]
        self.visible.clear()
        self.visible.update(str(v.get("delegation_id")) for v in views)
        self.live = any((v.get("observed") or {}).get("status") in _LIVE for v in views)
        self.opened = opened
        rows = []
        for view in reversed(views):  # newest first
            delegation_id = str(view.get("delegation_id"))
            transcript = None
            if delegation_id in opened:
                transcript = _read_transcript(lead, who, delegation_id)
            rows.append((view, list(self.recent.get(delegation_id, ())), transcript))
        rows.extend((view, [], None) for view in reversed(_restored(turns, views)))
        return ("rows", rows)


def _panel(shown: tuple[Any, ...], input_id: str, strings: KitStrings = DEFAULT_STRINGS) -> Tag:
    """The panel's content for what :meth:`_SubagentPanel.poll` said to show."""
    kind, *rest = shown
    if kind == "loading":
        return tags.p("…", class_="text-muted small")
    if kind == "not_lead":
        return tags.p(strings.subagents_no_agent, class_="text-muted small deputy-subagent-note")
    if kind == "denied":
        return tags.p(strings.subagents_denied, class_="text-muted small deputy-subagent-note")
    rows = rest[0]
    if not rows:
        return tags.p(strings.subagents_none, class_="text-muted small deputy-subagent-note")
    return tags.div(*[_row(view, events, t, input_id, strings) for view, events, t in rows])


async def _tick(tick: reactive.Value[int], interval: float, due: Callable[[], bool]) -> None:
    """Count up ``tick`` every ``interval`` seconds while ``due()``, holding the lock only
    for the set."""
    count = 0
    while True:
        await asyncio.sleep(interval)
        if not due():
            continue
        count += 1
        async with reactive.lock():
            tick.set(count)
            await reactive.flush()


@kit_module.server
def subagent_panel_server(
    input: Any,
    output: Any,
    session: Any,
    agent: AgentArg,
    requester: Any,
    *,
    interval: float = 0.4,
    strings: KitStrings = DEFAULT_STRINGS,
) -> None:
    """Show ``agent``'s delegations, as ``requester`` may see them, while they run.

    Args:
        agent: The session's agent (a :class:`~deputy_shiny.delegation.LeadAgent`, or any
            agent with retained agents or a delegation graph), or a function returning it
            (e.g. ``lambda: handle.agent``; None shows a note).
        requester: Whom the lead's disclosure policy judges: a value, or a function
            returning it (e.g. ``session.user``, else the session id).
        interval: Seconds between polls of the lead.
        strings: The panel's words (the app's :class:`KitStrings`, e.g. ``handle.strings``).

    Examples:
        >>> from shiny import App, ui
        >>> from deputy_shiny.delegation import AgentDefinition, DelegationDisclosure, LeadAgent
        >>> from deputy_shiny.shiny import (agent_chat_server, agent_chat_ui,
        ...     subagent_panel_server, subagent_panel_ui)
        >>> def make_agent(ctx):
        ...     return LeadAgent("deputy/demo", working_dir=ctx.working_dir,
        ...         subagents=[AgentDefinition(name="helper", description="Helps.")],
        ...         delegation_scope={"owner": ctx.session_id},
        ...         delegation_disclosure=DelegationDisclosure(
        ...             authorize=lambda who, scope, record: who == scope["owner"]))
        >>> def server(input, output, session):
        ...     handle = agent_chat_server("chat", make_agent)
        ...     subagent_panel_server("team", lambda: handle.agent, session.id)
        >>> app = App(ui.page_sidebar(ui.sidebar(subagent_panel_ui("team")),
        ...     agent_chat_ui("chat")), server)
    """
    if session.is_stub_session():
        return
    input_id = session.ns("action")
    tick = reactive.value(0, name="deputy_subagent_tick")
    shown = reactive.value[tuple[Any, ...]](("loading",), name="deputy_subagent_shown")
    expanded = reactive.value[frozenset[str]](frozenset(), name="deputy_subagent_expanded")
    panel = _SubagentPanel(agent, requester)
    # Not reactive.invalidate_later: a cancelled timer keeps its context (and with it
    # the session) alive until its deadline; this task's context holds nothing.
    ticker = asyncio.get_running_loop().create_task(
        _tick(tick, interval, panel.due), context=contextvars.Context()
    )

    def _end() -> None:
        ticker.cancel()
        panel.close()

    session.on_ended(_end)

    @reactive.effect
    def _poll() -> None:
        tick()
        opened = expanded()
        with reactive.isolate():
            current = shown.get()
            new = panel.poll(opened, current)
            if new != current:
                shown.set(new)

    @render.ui
    def delegations() -> Tag:
        return _panel(shown(), input_id, strings)

    @reactive.effect
    @reactive.event(input.action)  # no ignore_init: see _prompts.session_prompts
    def _clicked() -> None:
        opened = expanded.get()
        new = panel.click(input.action(), opened)
        if new != opened:
            expanded.set(new)


def _read_transcript(lead: Agent, who: Any, delegation_id: str) -> Any:
    try:
        (view,) = lead.inspect_subagents(who, delegation_id, transcript=True)
    except (DelegationDisclosureError, DelegationError, ValueError):
        return None
    return view.get("transcript", [])
