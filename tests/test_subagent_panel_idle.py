"""The subagent panel's tick takes the reactive lock only when a poll could show news."""

from __future__ import annotations

from pathlib import Path

from deputy_shiny.delegation import AgentDefinition, DelegationDisclosure, LeadAgent
from deputy_shiny.shiny._subagent_panel import _panel, _SubagentPanel
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall


def _lead(tmp_path: Path, replies: list[ScriptedReply | str]) -> LeadAgent:
    return LeadAgent(
        ScriptedModel(replies),
        working_dir=tmp_path,
        subagents=[AgentDefinition(name="writer", description="Writes.", tools=[])],
        subagent_models={"writer": ScriptedModel(["The report."] * 3)},
        delegation_scope={"owner": "ana"},
        delegation_disclosure=DelegationDisclosure(
            authorize=lambda requester, scope, record: requester == scope["owner"]
        ),
    )


def _delegate(task: str) -> ScriptedReply:
    return ScriptedReply(
        tool_calls=[ScriptedToolCall("delegate", {"agent": "writer", "task": task})]
    )


def test_an_idle_panel_is_not_due_and_news_makes_it_due(tmp_path: Path) -> None:
    agent: list[LeadAgent | None] = [None]
    panel = _SubagentPanel(lambda: agent[0], "ana")
    shown = panel.poll(frozenset(), ("loading",))
    assert shown == ("not_lead",)
    assert not panel.due()  # no agent yet, and nothing to show but that

    lead = _lead(tmp_path, [_delegate("report"), "done", "nothing more"])
    agent[0] = lead
    assert panel.due()  # the session's agent arrived: subscribe and show it
    shown = panel.poll(frozenset(), shown)
    assert shown == ("rows", [])
    assert not panel.due()  # idle: the tick skips the lock

    lead.run_sync("go")  # one delegation, run to completion
    assert panel.due()
    shown = panel.poll(frozenset(), shown)
    assert shown[0] == "rows" and len(shown[1]) == 1
    assert shown[1][0][0]["observed"]["status"] == "completed"
    assert not panel.due()

    lead.run_sync("chat")  # a run that delegates nothing adds no event
    assert not panel.due()

    agent[0] = None  # the agent went away: show that once, then idle again
    assert panel.due()
    assert panel.poll(frozenset(), shown) == ("not_lead",)
    assert not panel.due()


def test_a_refused_requester_is_asked_again_at_every_tick(tmp_path: Path) -> None:
    lead = _lead(tmp_path, [_delegate("report"), "done"])
    who = ["bob"]
    panel = _SubagentPanel(lead, lambda: who[0])
    assert panel.due()
    assert panel.poll(frozenset(), ("loading",)) == ("denied",)
    assert panel.due()  # the policy may change its mind: it is asked at every tick
    lead.run_sync("go")
    assert panel.poll(frozenset(), ("denied",)) == ("denied",)  # bob sees nothing of it
    who[0] = "ana"
    assert panel.due()
    shown = panel.poll(frozenset(), ("denied",))
    assert shown[0] == "rows" and len(shown[1]) == 1


def test_a_restored_conversation_shows_its_delegations(tmp_path: Path) -> None:
    # A reload: the new session's lead gets the saved turns, but not the records of the
    # delegations, which lived in the old session's memory.
    before = _lead(tmp_path, [_delegate("report <b>"), "done"])
    before.run_sync("go")
    lead = _lead(tmp_path, [_delegate("second"), "done again"])
    panel = _SubagentPanel(lead, "ana")
    assert panel.poll(frozenset(), ("loading",)) == ("rows", [])
    assert not panel.due()
    lead.set_turns(before.get_turns())  # the kit restores in the background
    assert panel.due()
    shown = panel.poll(frozenset(), ("rows", []))
    (restored,) = [view for view, _, _ in shown[1]]
    assert restored["agent_name"] == "writer" and restored["task"] == "report <b>"
    assert restored["observed"]["status"] == "completed"
    html = str(_panel(shown, "team-action"))
    assert "From the saved conversation." in html and "report &lt;b&gt;" in html
    assert "data-deputy-subagent" not in html  # no record: no transcript, no stop
    assert not panel.due()

    lead.run_sync("more")  # a new delegation is listed first, the restored one stays
    shown = panel.poll(frozenset(), shown)
    assert [view["task"] for view, _, _ in shown[1]] == ["second", "report <b>"]
    assert not shown[1][0][0].get("restored") and shown[1][1][0]["restored"]
