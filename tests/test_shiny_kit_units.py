"""The kit's pieces that need no browser: image guard, event rendering, mode choices."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from deputy_shiny import Agent
from deputy_shiny.permissions import Permissions
from deputy_shiny.shiny import ImageGuard, allowed_modes, render_events
from deputy_shiny.shiny._render import stop_note
from deputy_shiny.testing import ProviderFailure, ScriptedModel, ScriptedReply, ScriptedToolCall
from deputy_shiny.tools import tool_write_file


def guarded(chunks: list[str], allowed: tuple[str, ...] = ()) -> str:
    guard = ImageGuard(allowed)
    return "".join(guard.feed(c) for c in chunks) + guard.flush()


@pytest.mark.parametrize(
    "chunks",
    [
        ["![x](http://127.0.0.1:9/a.png)"],
        ["![x](http://127.0.0.1:9", "/a.png)"],
        ["!", "[x]", "(http://127.0.0.1:9/a.png)"],
        ["<img src='http://127.0.0.1:9/a.png'>"],
        ["<im", "g src=http://127.0.0.1:9/a.png onerror=alert(1)>"],
        ['<IMG\nSRC="http://127.0.0.1:9/a.png">'],
        ["<picture><source srcset='http://127.0.0.1:9/a.png 1x'></picture>"],
        ["<img srcset='https://ok.example/a.png 1x, http://127.0.0.1:9/b.png 2x'>"],
        ["![x][ref]\n\n[ref]: http://127.0.0.1:9/a.png"],
        ["<img src=http://127.0.0.1:9/a.png"],  # unfinished at the end of the stream
        ["![x](//127.0.0.1:9/a.png)"],  # scheme-relative
        ["![x](/local/path.png)"],  # relative: same origin, but not allowed either
    ],
)
def test_images_from_other_origins_never_survive(chunks: list[str]) -> None:
    out = guarded(chunks, ("https://ok.example",))
    assert re.search(r"<[A-Za-z/!?]", out) is None  # no tag can open
    assert "![x](" not in out  # no live markdown image


@pytest.mark.parametrize(
    "text",
    [
        "![x](https://ok.example/a.png)",
        "![inline](data:image/png;base64,iVBORw0KGgo=)",
        "a < b, c > d, wow! and [a link](https://x.example)",
        "plain text with no images",
    ],
)
def test_allowed_images_and_ordinary_text_pass(text: str) -> None:
    assert guarded([text], ("https://ok.example",)) == text


@pytest.mark.parametrize(
    "html",
    [
        '<iframe srcdoc="<script>parent.x=1</script>"></iframe>',
        "<style>button{display:none}</style>",
        "<link rel=stylesheet href=http://127.0.0.1:9/x.css>",
        '<div style="background:url(http://127.0.0.1:9/a.png)">x</div>',
        "<video poster=http://127.0.0.1:9/p.png></video>",
        "<svg><image href=http://127.0.0.1:9/s.png /></svg>",
        "<!-- comment --><?php x ?></p>",
        "<object data=http://127.0.0.1:9/o.png></object><embed src=x>",
    ],
)
def test_raw_html_never_forms_an_element(html: str) -> None:
    for chunks in ([html], list(html)):  # whole, and one character at a time
        out = guarded(chunks)
        assert re.search(r"<[A-Za-z/!?]", out) is None
        assert out.replace("\u200b", "") == html  # it reads the same


def test_guard_does_not_hold_ordinary_text_back() -> None:
    guard = ImageGuard()
    assert guard.feed("Hello ") == "Hello "
    assert guard.feed("wor") == "wor"
    assert guard.feed("ld!") == "ld"  # a trailing "!" may start an image: held
    assert guard.flush() == "!"


def test_bad_origins_are_refused() -> None:
    with pytest.raises(ValueError, match="origin"):
        ImageGuard(["ftp://x.example"])


async def test_render_events_builds_tool_cards_and_denied_titles(tmp_path) -> None:
    reply = ScriptedReply(
        text="Writing.",
        tool_calls=[
            ScriptedToolCall("write_file", {"path": "ok.txt", "content": "x"}, id="a"),
            ScriptedToolCall("write_file", {"path": "../no.txt", "content": "x"}, id="b"),
        ],
    )
    agent = Agent(
        ScriptedModel([reply, "Done ![p](http://evil.example/x.png)"]),
        tools=[tool_write_file()],
        working_dir=tmp_path,
        permissions=Permissions(),
    )
    seen: list[str] = []
    chunks = [
        c async for c in render_events(agent.run("go"), on_event=lambda e: seen.append(e.type))
    ]
    texts = [c for c in chunks if isinstance(c, str)]
    blocks = [b for c in chunks if not isinstance(c, str) for b in c.blocks]
    requests = [b for b in blocks if b["type"] == "tool_request"]
    results = {b["request_id"].split("-")[-1]: b for b in blocks if b["type"] == "tool_result"}
    assert [json.loads(r["arguments"])["path"] for r in requests] == ["ok.txt", "../no.txt"]
    assert results["a"]["status"] == "success" and "title" not in results["a"]
    assert results["b"]["status"] == "error" and results["b"]["title"].startswith("Denied: ")
    # A denied card stands alone, so its title is what the user sees.
    assert results["b"]["grouping"] == "none" and requests[1]["grouping"] == "none"
    assert requests[1]["title"] == results["b"]["title"]
    assert "grouping" not in requests[0] and "grouping" not in results["a"]
    assert all(b["value_type"] == "code" for b in results.values())
    assert "".join(texts).startswith("Writing.")
    assert "evil.example/x.png)" not in "".join(texts) and "image blocked" in "".join(texts)
    assert seen[0] == "start" and seen[-1] == "stop"


async def test_render_events_reports_failures_readably() -> None:
    agent = Agent(ScriptedModel([ProviderFailure(503)]))
    chunks = [c async for c in render_events(agent.run("go"))]
    assert "The model request failed" in "".join(c for c in chunks if isinstance(c, str))


def test_stop_notes() -> None:
    assert stop_note("complete", "") is None
    assert stop_note("interrupted", "") == "Stopped."
    assert "cost limit" in (stop_note("cost_limit", "") or "")
    assert stop_note("something new", "why") == "Stopped: why."


@pytest.mark.parametrize(
    ("mode", "choices"),
    [
        ("full", ["full", "standard", "plan", "readonly"]),
        ("standard", ["standard", "readonly"]),
        ("plan", ["plan", "readonly"]),
        ("readonly", ["readonly"]),
    ],
)
def test_only_narrower_modes_are_offered(mode: str, choices: list[str]) -> None:
    assert allowed_modes(mode) == choices


def test_answers_from_the_browser_become_json_types() -> None:
    from deputy_shiny.shiny._prompts import _plain

    raw = {"answers": (("A little",), ("Hooks", "Skills"), "free text"), "values": {"tags": ("a",)}}
    assert _plain(raw) == {
        "answers": [["A little"], ["Hooks", "Skills"], "free text"],
        "values": {"tags": ["a"]},
    }


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        ({}, None),  # nothing touched: the model's arguments exactly
        ({"content": "\nfirst\r\nsecond\r\n"}, None),  # sent back unchanged
        ({"content": "first\nsecond\n"}, {"content": "first\nsecond\n", "count": 2}),
        ({"count": 2.0}, {"content": "\nfirst\r\nsecond\r\n", "count": 2.0}),  # type counts
        ({"unknown": "x"}, None),  # fields the call does not have are ignored
    ],
)
def test_only_exact_changes_count_as_edits(
    sent: dict[str, object], expected: dict[str, object] | None
) -> None:
    from deputy_shiny.approvals import ApprovalRequest
    from deputy_shiny.shiny._answers import edited_arguments

    request = ApprovalRequest(
        call_id="c", tool_name="t", arguments={"content": "\nfirst\r\nsecond\r\n", "count": 2}
    )
    assert edited_arguments(request, sent) == expected


def test_a_modal_names_its_chat_by_module_id_only_when_the_page_has_several() -> None:
    from types import SimpleNamespace

    from deputy_shiny.shiny._prompts import SessionPrompts
    from deputy_shiny.shiny._session_asks import SessionAsks

    prompts = SessionPrompts(SimpleNamespace())  # type: ignore[arg-type]
    only = SessionAsks(prompts, None, default_name="chat")
    assert only.chat is None  # one chat on the page: "Asked by chat" would say nothing
    named = SessionAsks(prompts, None, "Analyst", default_name="right")
    assert [asks.chat for asks in (only, named)] == ["chat", "Analyst"]  # two share it now
    assert SessionAsks(prompts, None, "", default_name="x").chat == ""


def test_the_prompt_modals_name_the_asking_chat_as_text_and_leave_the_page_usable() -> None:
    from deputy_shiny.approvals import ApprovalRequest
    from deputy_shiny.shiny._modals import approval_modal, confirm_modal, questions_modal
    from deputy_shiny.tools.interactive import Option, Question

    request = ApprovalRequest(call_id="c", tool_name="write_file", arguments={"path": "a"})
    html = str(approval_modal(request, 1, "Analyst <img src=x>"))
    assert "Asked by <strong>Analyst &lt;img src=x&gt;</strong>" in html
    assert "Asked by" not in str(approval_modal(request, 1, ""))
    options = [Option(label="a", description="A"), Option(label="b", description="B")]
    question = Question(question="Which?", header="Pick", options=options, multi_select=False)
    asked = str(questions_modal("r1", [question], 3, "Writer"))
    assert "Asked by <strong>Writer</strong>" in asked and "1 of 3 waiting" in asked
    for shown in map(str, (approval_modal(request), asked, confirm_modal("r", "T", "B", "OK"))):
        assert 'data-bs-backdrop="false"' in shown and 'data-bs-focus="false"' in shown
        assert "deputy-modeless" in shown


def test_the_approval_modal_says_how_many_wait_and_offers_to_stop() -> None:
    from deputy_shiny.approvals import ApprovalRequest
    from deputy_shiny.shiny._modals import approval_modal

    request = ApprovalRequest(call_id="c", tool_name="write_file", arguments={"path": "a"})
    alone, flood = str(approval_modal(request)), str(approval_modal(request, 30))
    assert "waiting" not in alone and "1 of 30 waiting" in flood
    assert 'data-deputy-action="stop"' in alone


class _FakeSession:
    """Just enough of a Shiny session for SessionPrompts: it records what is sent."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.keys: dict[str, str] = {}
        self.waiting: list[tuple[str, str]] = []  # the open modal's count updates

    def _process_ui(self, ui: object) -> str:
        return str(ui)

    async def send_custom_message(self, kind: str, message: dict[str, str]) -> None:
        if kind == "deputy-prompt-waiting":
            self.waiting.append((message["request_id"], message["text"]))
            return
        assert kind == "deputy-prompt-key"
        self.keys[message["request_id"]] = message["key"]

    def _send_message_sync(self, message: dict[str, dict[str, object]]) -> None:
        modal = message["modal"]
        if modal["type"] == "show":
            self.shown.append(str(modal["message"]))


async def test_stop_answers_every_prompt_of_the_same_run_and_no_other() -> None:
    import asyncio

    from htmltools import tags

    from deputy_shiny.shiny._prompts import SessionPrompts

    session = _FakeSession()
    prompts = SessionPrompts(session)  # type: ignore[arg-type]

    def ask(request_id: str, group: str, also: int = 0) -> asyncio.Task[dict[str, object]]:
        modal = lambda waiting: tags.p(f"{request_id}: {waiting} waiting")  # noqa: E731
        return asyncio.ensure_future(
            prompts.ask(request_id, modal, None, group=group, also_waiting=also)
        )

    first, second, other = ask("a1", "run-a", also=5), ask("a2", "run-a"), ask("b1", "run-b")
    for _ in range(5):
        await asyncio.sleep(0)
    # Counted when shown: itself and the 5 calls behind it; the two queued later (one
    # from another chat's run) update the open modal's count, not a new modal.
    assert session.shown == ["<p>a1: 6 waiting</p>"]
    assert session.waiting == [("a1", "1 of 7 waiting"), ("a1", "1 of 8 waiting")]
    assert prompts.answer({"request_id": "a1", "action": "stop", "key": session.keys["a1"]})
    assert (await first)["action"] == "stop"
    assert (await second) == {"action": "stop", "request_id": "a2"}
    for _ in range(5):
        await asyncio.sleep(0)
    assert session.shown[-1] == "<p>b1: 1 waiting</p>"  # another run's prompt stays
    assert not other.done()
    prompts.answer({"request_id": "b1", "action": "deny", "key": session.keys["b1"]})
    assert (await other) == {"request_id": "b1", "action": "deny"}  # the key stays here


def test_the_subagent_panel_renders_untrusted_text_inert() -> None:
    from deputy_shiny.shiny._subagent_panel import TASK_CHARS, _row

    hostile = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    view = {
        "delegation_id": "dlg_1",
        "agent_name": "<b>writer</b>",
        "task": hostile + " " + "x" * 500,
        "observed": {"status": "running", "usage": {"requests": 2, "total_tokens": 30}},
    }
    transcript = [
        {"role": "assistant", "contents": [{"type": "text", "text": hostile}]},
        {
            "role": "user",
            "contents": [{"type": "tool_result", "name": "read_file", "output": hostile}],
        },
    ]
    html = str(_row(view, [hostile], transcript, "team-action"))
    assert "<img" not in html and "<script" not in html and "<b>writer" not in html
    assert "&lt;img" in html and "2 requests · 30 tokens" in html
    assert "deputy-subagent-btn-interrupt" in html  # running: it can be stopped
    task_text = html.split('class="deputy-subagent-task">', 1)[1].split("</div>", 1)[0]
    assert len(task_text) < TASK_CHARS + 100  # cut for display (escaping adds a little)
    finished = {**view, "observed": {"status": "completed"}}
    assert "deputy-subagent-btn-interrupt" not in str(_row(finished, [], None, "team-action"))


class _OrderedSession:
    """What SessionPrompts uses of a Shiny session, recording the order of messages."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def _process_ui(self, ui: object) -> str:
        return str(ui)

    def _send_message_sync(self, message: dict[str, Any]) -> None:
        self.sent.append(("modal", message["modal"]["type"]))

    async def send_custom_message(self, kind: str, message: dict[str, str]) -> None:
        self.sent.append((kind, dict(message)))


async def test_an_answer_counts_only_with_its_prompts_key_sent_before_the_modal() -> None:
    from htmltools import tags

    from deputy_shiny.shiny._prompts import KEY_MESSAGE, SessionPrompts

    session = _OrderedSession()
    prompts = SessionPrompts(session)  # type: ignore[arg-type]
    waiting = asyncio.ensure_future(prompts.ask("r1", tags.p("approve?"), None))
    for _ in range(5):
        await asyncio.sleep(0)
    (kind, message), shown = session.sent[0], session.sent[1]
    assert kind == KEY_MESSAGE and message["request_id"] == "r1"
    assert shown == ("modal", "show")  # the key arrives first
    key = message["key"]
    assert len(key) >= 32 and key not in repr(prompts._current)  # kept out of logs too

    forged = [
        {"request_id": "r1", "action": "approve"},  # page script: no key
        {"request_id": "r1", "action": "approve", "key": ""},
        {"request_id": "r1", "action": "approve", "key": key[:-1]},
        {"request_id": "r1", "action": "approve", "key": key + "x"},
        {"request_id": "r1", "action": "approve", "key": "ключ"},  # non-ASCII: no crash
        {"request_id": "r1", "action": "approve", "key": ["list"]},
        {"request_id": "other", "action": "approve", "key": key},
    ]
    for answer in forged:
        assert not prompts.answer(answer)
    assert not waiting.done()
    assert prompts.answer({"request_id": "r1", "action": "deny", "key": key, "message": "no"})
    assert await waiting == {"request_id": "r1", "action": "deny", "message": "no"}
    # A second prompt gets a key of its own; the first one's no longer counts.
    second = asyncio.ensure_future(prompts.ask("r2", tags.p("again?"), None))
    for _ in range(5):
        await asyncio.sleep(0)
    keys = [m["key"] for k, m in session.sent if k == KEY_MESSAGE]
    assert len(keys) == 2 and keys[0] != keys[1]
    assert not prompts.answer({"request_id": "r2", "action": "approve", "key": key})
    assert prompts.answer({"request_id": "r2", "action": "approve", "key": keys[1]})
    assert (await second)["action"] == "approve"


def test_rewind_lists_only_runs_that_changed_files_and_folds_the_older_ones() -> None:
    from deputy_shiny.persistence.checkpoints import FileCheckpoint
    from deputy_shiny.shiny._conversation_panel import SHOWN_FIRST, checkpoint_rows

    def run(n: int, changes: int) -> FileCheckpoint:
        return FileCheckpoint(id=f"cp_{n}", created_at=float(n), run_id=f"r{n}", changes=changes)

    # Eight runs changed files, between runs that changed nothing.
    checkpoints = [run(n, n % 2) for n in range(16)]
    html = str(checkpoint_rows(checkpoints, "c-rewind", False))
    listed = re.findall(r'data-checkpoint="cp_(\d+)"', html)
    assert listed == ["15", "13", "11", "9", "7", "5", "3", "1"]  # newest first, changed only
    first, _, folded = html.partition("<details")
    assert first.count('deputy-checkpoint"') == SHOWN_FIRST
    assert "<summary" in folded and "3 more" in folded and folded.count('data-checkpoint="') == 3
    nothing = str(checkpoint_rows([run(1, 0), run(2, 0)], "c-rewind", False))
    assert "No file changes to rewind" in nothing and "data-checkpoint" not in nothing


def test_rewind_section_is_absent_when_checkpoints_were_never_asked_for(tmp_path: Path) -> None:
    from deputy_shiny.shiny._conversation_panel import rewind_section

    assert str(rewind_section(Agent("deputy/demo", working_dir=tmp_path), "x", False)) == ""
    on = Agent("deputy/demo", working_dir=tmp_path, enable_file_checkpointing=True)
    assert "Rewind files" in str(rewind_section(on, "x", False))
