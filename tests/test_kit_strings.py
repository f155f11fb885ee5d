"""KitStrings: one mapping words the whole kit; its templates are checked as it is made,
and no word the kit shows is left outside it."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny.approvals import ApprovalRequest
from deputy_shiny.errors import ApprovalDecidedError, ApprovalResumeError, ConfigurationError
from deputy_shiny.events import WaitingEvent
from deputy_shiny.persistence.checkpoints import FileCheckpoint
from deputy_shiny.shiny import KitStrings
from deputy_shiny.shiny._budget import UserBudget, budget_line, budget_refusal
from deputy_shiny.shiny._chat_module import FOREIGN_MESSAGE, _foreign_note, _usage_text
from deputy_shiny.shiny._chat_session import resume_failure
from deputy_shiny.shiny._chat_start import factory_failure
from deputy_shiny.shiny._conversation_panel import checkpoint_rows, conversation_panel_ui
from deputy_shiny.shiny._mcp_panel import _row as mcp_row
from deputy_shiny.shiny._mcp_session import McpServerView
from deputy_shiny.shiny._modals import approval_modal, confirm_modal, questions_modal
from deputy_shiny.shiny._mode import hint_text, permission_mode_ui
from deputy_shiny.shiny._render import stop_note, waiting_note
from deputy_shiny.shiny._strings import DEFAULT_STRINGS, PLACEHOLDERS
from deputy_shiny.shiny._subagent_panel import _panel as subagent_panel
from deputy_shiny.shiny._subagent_panel import _row as subagent_row
from deputy_shiny.tools.interactive import Option, Question
from deputy_shiny.usage import AgentUsage

WWW = Path(__file__).resolve().parents[1] / "deputy_shiny" / "shiny" / "www"


def marked() -> KitStrings:
    """Every field replaced by ``⟦field⟧`` (its placeholders kept): a word the kit shows
    that does not carry a mark did not come from the mapping."""
    return KitStrings(
        **{
            name: f"⟦{name}⟧" + "".join(f" {{{p}}}" for p in sorted(PLACEHOLDERS.get(name, ())))
            for name in KitStrings.model_fields
        }
    )


class _Shown(HTMLParser):
    """The text and the worded attributes of some HTML."""

    WORDED = frozenset({"placeholder", "aria-label", "title", "data-deputy-framed"})

    def __init__(self) -> None:
        super().__init__()
        self.words: list[str] = []
        self.code = False  # inside a script or a style: no words shown

    def handle_data(self, data: str) -> None:
        if not self.code:
            self.words.append(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.code = tag in ("script", "style")
        self.words.extend(value or "" for name, value in attrs if name in self.WORDED)

    def handle_endtag(self, tag: str) -> None:
        self.code = False


def unmarked(html: str, *data: str) -> list[str]:
    """What ``html`` shows that is neither from the mapping nor one of ``data`` (the
    tool's, the model's or the app's own values)."""
    parser = _Shown()
    parser.feed(html)
    left = []
    for word in parser.words:
        text = word
        for value in data:
            text = text.replace(value, "")
        text = re.sub(r"⟦\w+⟧", "", text)
        if re.search(r"[A-Za-z]{2,}", text):
            left.append(word.strip())
    return left


def test_the_default_is_the_kits_english() -> None:
    strings = KitStrings()
    assert strings == DEFAULT_STRINGS
    assert strings.format("approval_title", tool="write_file") == "Allow write_file?"
    usage = AgentUsage(requests=2, input_tokens=10, output_tokens=5, tool_calls=1)
    assert _usage_text(usage) == _usage_text(usage, strings)
    assert _usage_text(usage).startswith("Requests: 2 · Tokens: 15 · Tool calls: 1 · Cost: ")
    assert stop_note("interrupted", "") == "Stopped."


@pytest.mark.parametrize(
    ("field", "text", "says"),
    [
        ("approval_title", "Allow it?", "must use the placeholder {tool}"),
        ("approval_title", "Allow {tool} for {user}?", "unknown placeholder {user}"),
        ("approval_title", "Allow {Tool}?", "unknown placeholder {Tool}"),
        ("asked_by", "{chat.__class__}", "is not a placeholder"),
        ("asked_by", "{chat[0]}", "is not a placeholder"),
        ("asked_by", "{chat!r}", "is not a placeholder"),
        ("still_waiting", "{host} ({seconds:.0f} s)", "is not a placeholder"),
        ("waiting_count", "1 of {count} {", "not a valid template"),
        ("usage_line", "{requests} {tokens} {cost}", "must use the placeholder {tool_calls}"),
    ],
)
def test_a_broken_template_is_a_clear_error_as_the_app_starts(
    field: str, text: str, says: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        KitStrings(**{field: text})
    assert f"Invalid KitStrings: {field}:" in str(raised.value)
    assert says in str(raised.value)


def test_an_unknown_field_or_a_value_that_is_no_string_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="aprove"):
        KitStrings(aprove="Approuver")  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match="approve"):
        KitStrings(approve=None)  # type: ignore[arg-type]
    with pytest.raises(Exception, match="frozen"):
        DEFAULT_STRINGS.approve = "x"  # type: ignore[misc]


def test_braces_escape_in_templates_and_show_as_written_elsewhere() -> None:
    strings = KitStrings(approval_title="{{{tool}}} ?", approve="{Go}")
    assert strings.format("approval_title", tool="t") == "{t} ?"
    assert strings.approve == "{Go}"


def test_every_placeholder_names_a_field() -> None:
    assert set(PLACEHOLDERS) <= set(KitStrings.model_fields)
    for name, wanted in PLACEHOLDERS.items():
        used = set(re.findall(r"\{(\w+)\}", getattr(DEFAULT_STRINGS, name)))
        assert used == wanted, name


def test_the_modals_words_all_come_from_the_mapping() -> None:
    strings = marked()
    request = ApprovalRequest(
        call_id="c",
        tool_name="write_file",
        description="Writes a file.",
        annotations={
            "read_only_hint": False,
            "destructive_hint": True,
            "idempotent_hint": True,
            "open_world_hint": True,
        },
        arguments={"path": "a.txt", "flag": True},
        reason="needs approval",
    )
    approval = str(approval_modal(request, 3, "Analyst", strings))
    data = ("write_file", "Writes a file.", "needs approval", "a.txt", "path", "flag", "Analyst")
    assert unmarked(approval, *data) == []
    assert "⟦approve⟧" in approval and "⟦framed⟧" in approval and "⟦asked_by⟧" in approval
    assert (
        unmarked(
            str(approval_modal(request.model_copy(update={"arguments": {}}), 1, None, strings)),
            *data,
        )
        == []
    )
    options = [Option(label="Red", description="Warm"), Option(label="Blue", description="Cool")]
    question = Question(
        question="Which color?", header="Color", options=options, multi_select=False
    )
    asked = str(questions_modal("r1", [question], 2, "Writer", strings))
    assert unmarked(asked, "Red", "Warm", "Blue", "Cool", "Which color?", "Color", "Writer") == []
    confirm = str(confirm_modal("r2", "Title", "Body", "Yes", strings))
    assert unmarked(confirm, "Title", "Body", "Yes") == []


def test_the_notes_and_the_usage_line_come_from_the_mapping() -> None:
    strings = marked()
    reasons = ["interrupted", "request_limit", "tool_call_limit", "input_token_limit",
               "output_token_limit", "total_token_limit", "cost_limit", "cost_unavailable",
               "tool_loop", "hook_requested_stop", "budget_limit", "provider_error", "error",
               "something_new"]  # fmt: skip
    for reason in reasons:
        note = stop_note(reason, "", strings) or ""
        assert "⟦" in note and unmarked(note, "something_new") == [], reason
    assert unmarked(stop_note("error", "boom", strings) or "", "boom") == []
    event = WaitingEvent(agent_id="a", session_id="s", run_id="r", model="m", host="h:1",
                         seconds=45.0, limit=60)  # fmt: skip
    for started in (False, True):
        note = waiting_note(event.model_copy(update={"started": started}), strings)
        assert unmarked(note, "h:1") == [] and "45" in note
    assert unmarked(_usage_text(AgentUsage(), strings), "unknown", "$0.00") == []
    assert unmarked(factory_failure(ValueError("bad"), strings), "ValueError", "bad") == []
    decided = ApprovalDecidedError("decided")
    assert unmarked(resume_failure(decided, strings)) == []
    gone = ApprovalResumeError("x cannot resume this approval here: gone")
    assert unmarked(resume_failure(gone, strings), "gone") == []


def test_the_refusal_of_another_sites_page_shows_the_apps_words_as_text() -> None:
    assert _foreign_note(KitStrings()) == FOREIGN_MESSAGE  # the kit's prose, as before
    hostile = _foreign_note(KitStrings(foreign_page="Nur hier <img src=x> ![a](https://e.x/)"))
    assert "\\<img" in hostile and "\\!\\[a\\]" in hostile
    assert re.search(r"(?<!\\)[<!\[]", hostile) is None  # no markup left unescaped


def test_the_budgets_words_come_from_the_mapping() -> None:
    strings = marked()
    budget = UserBudget(max_requests_per_day=5, max_tokens_per_day=9, max_cost_per_day=1.0)
    spent = {"requests": 5.0, "tokens": 9.0, "cost": 1.0}
    for anonymous in (False, True):
        note = budget_refusal(budget, spent, anonymous=anonymous, strings=strings) or ""
        assert "⟦budget_spent" in note and unmarked(note) == []
    line = budget_line(budget, spent, strings)
    assert line.count("⟦") == 4 and unmarked(line) == []
    assert budget_line(budget, spent) == "Today: 5 of 5 requests · 9 of 9 tokens · $1.00 of $1.00"


def test_the_panels_words_come_from_the_mapping() -> None:
    strings = marked()
    assert unmarked(str(conversation_panel_ui("c", strings=strings))) == []
    run = FileCheckpoint(id="cp1", created_at=0.0, run_id="run_1", changes=2)
    runs = [run.model_copy(update={"id": f"cp{n}"}) for n in range(12)]
    assert unmarked(str(checkpoint_rows(runs, "c-rewind", False, strings))) == []
    assert unmarked(str(checkpoint_rows([], "c-rewind", False, strings))) == []
    assert unmarked(str(permission_mode_ui("m", strings=strings))) == []
    assert unmarked(hint_text("full", "readonly", strings)) == []
    assert unmarked(hint_text("standard", "readonly", strings)) == []
    view = McpServerView(server="srv", state="connected", tools=3, refused=["read_file"])
    assert unmarked(str(mcp_row(view, "m-action", strings)), "srv", "connected",
                    "read_file") == []  # fmt: skip
    delegation = {"delegation_id": "d1", "agent_name": "helper", "task": "chore",
                  "observed": {"status": "running", "usage": {"requests": 2}}}  # fmt: skip
    turns = [{"role": "assistant", "contents": [
        {"type": "tool_request", "name": "grep", "arguments": {}},
        {"type": "tool_result", "name": "grep", "output": "x", "is_error": True}]}]  # fmt: skip
    row = str(subagent_row(delegation, ["event"], turns, "t-action", strings))
    assert unmarked(row, "helper", "chore", "running", "assistant", "grep", "event") == []
    empty = str(subagent_row({**delegation, "restored": True}, [], [], "t", strings))
    assert unmarked(empty, "helper", "chore", "running") == []
    states: list[tuple[Any, ...]] = [("not_lead",), ("denied",), ("rows", [])]
    for shown in states:
        assert unmarked(str(subagent_panel(shown, "t", strings))) == []


def test_the_kits_script_writes_no_words_of_its_own() -> None:
    # What the script shows comes from the server (a modal's data, a message's text).
    for script in WWW.glob("*.js"):
        source = script.read_text()
        assert not re.search(r"(textContent|innerText|innerHTML|title)\s*=\s*[\"'`]", source)
        assert not re.search(r"\.(textContent|innerText)\s*=\s*[^;]*[\"'][A-Za-z ]{4,}", source)


def test_the_drawer_and_the_edit_control_speak_the_apps_language() -> None:
    """The words of the history drawer's cap note and of an edit's confirm (#33, #34)."""
    from deputy_shiny.shiny._session_branches import files_restored
    from deputy_shiny.shiny._session_listing import capped_note

    german = KitStrings(
        files_restored_one="1 Datei zurückgesetzt: {names}",
        files_restored_many="{count} Dateien zurückgesetzt: {names}",
        files_more=" und {count} weitere",
        capped_one="Höchstens {limit} Gespräche: das älteste ({titles}) wurde gelöscht.",
        capped_many="Höchstens {limit} Gespräche: die ältesten ({titles}) wurden gelöscht.",
    )
    assert files_restored(["a.md"], german) == "1 Datei zurückgesetzt: a.md"
    paths = [f"f{i}" for i in range(7)]
    assert files_restored(paths, german) == (
        "7 Dateien zurückgesetzt: f0, f1, f2, f3, f4 und 2 weitere"
    )
    assert capped_note(["x"], 3, german) == (
        "Höchstens 3 Gespräche: das älteste (“x”) wurde gelöscht."
    )
    titles = ["a", "b", "c", "d", "e"]
    assert capped_note(titles, 3, german) == (
        "Höchstens 3 Gespräche: die ältesten (“a”, “b”, “c” und 2 weitere) wurden gelöscht."
    )
