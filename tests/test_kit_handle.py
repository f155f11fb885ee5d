"""What an app reaches of the chat through its handle, and the conversation downloads.

The handle does not hand out shinychat's ``Chat``; it offers ``update_user_input``,
``submit`` (a prompt through the agent's run), ``append_message`` (the app's note, as
text) and the conversation as Markdown and JSON. The tests drive a real handle over one
browser session built as ``agent_chat_server`` builds it (``tests/test_chat_session.py``'s
harness: a real Agent on a ScriptedModel through litellm, fakes where Shiny would be),
and read the downloads as a Markdown renderer and a JSON parser would. The browser test
of the download buttons is in ``tests/e2e/test_conversations.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from shiny import reactive

from deputy_shiny import Agent
from deputy_shiny.errors import ConfigurationError
from deputy_shiny.events import AgentUsage
from deputy_shiny.messages import ContentText, ContentToolRequest, ContentToolResult, Turn
from deputy_shiny.shiny import AgentChatContext, AgentChatHandle
from deputy_shiny.shiny._chat_module import _handle_without_agent
from deputy_shiny.shiny._chat_session import BUSY_MESSAGE
from deputy_shiny.shiny._conversation_panel import download_file
from deputy_shiny.shiny._export import JSON_FORMAT, conversation_json, conversation_markdown
from deputy_shiny.shiny._mcp_session import SessionMcp
from deputy_shiny.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from tests.helpers import local_tool
from tests.test_chat_session import WRITE, Kit, approving_agent, start, wait_until

INJECTION = (
    '<img src=x onerror="alert(1)"> <script>alert(2)</script> ![p](https://evil.example/p.png)'
)
# Tool output that tries to close any fence it is put in, then inject markup.
HOSTILE_OUTPUT = "ok\n```\n````````\n<script>alert(3)</script>\n<iframe src=https://evil.example>"
REPLY = (
    "Here it is: <iframe src=https://evil.example></iframe>\n\n```python\nif a<b:\n    pass\n```\n"
)

# Model text that leaves a fence open: the tool output's first "```" would close it.
OPEN_FENCE = "Let me look:\n\n```\nunclosed"


def handle_of(kit: Kit) -> AgentChatHandle:
    """The handle ``agent_chat_server`` returns for this session."""
    return AgentChatHandle(
        kit.agent,
        reactive.value(False, name="running"),
        reactive.value(AgentUsage(), name="usage"),
        kit.prompts.pending,
        reactive.value(0, name="tool_events"),
        kit.session.working_dir,
        kit.session.mcp,
        _prompts=kit.prompts,
        _chat_session=kit.session,
    )


def look(path: str) -> str:
    """Look at a file (its content is whatever the test says)."""
    return HOSTILE_OUTPUT


def looking_agent(replies: list[Any]) -> Any:
    def factory(ctx: AgentChatContext) -> Agent:
        return Agent(
            ScriptedModel(list(replies)),
            tools=[local_tool(look)],
            working_dir=ctx.working_dir,
            approval_handler=ctx.approval_handler,
            system_prompt="SECRET app instructions",
        )

    return factory


async def conversed(tmp_path: Path) -> tuple[Kit, AgentChatHandle]:
    """A session whose conversation holds an injection attempt everywhere: the user's
    message, a tool's arguments and output, the model's text."""
    call = ScriptedToolCall("look", {"path": "<b>notes</b>.md"})
    first = ScriptedReply(text=OPEN_FENCE, tool_calls=[call])
    kit = start(tmp_path, looking_agent([first, REPLY]))
    handle = handle_of(kit)
    assert await handle.submit(f"Look at this {INJECTION}")
    await kit.chat.settled()
    return kit, handle


# --------------------------------------------------------------------------- submit


async def test_submit_shows_the_prompt_as_the_users_and_runs_it_through_the_agent(
    tmp_path: Path,
) -> None:
    kit = start(tmp_path, approving_agent(["The chart shows sales."]))
    handle = handle_of(kit)
    assert await handle.submit(f"Explain this chart {INJECTION}")
    await kit.chat.settled()
    (user, reply) = kit.chat.messages
    assert (user.role, reply.role, reply.text) == ("user", "assistant", "The chart shows sales.")
    # Shown inert, as the chat renders model text: no tag forms, the image is blocked.
    assert user.text.startswith("Explain this chart ")
    assert "<img" not in user.text and "<script" not in user.text
    assert "https://evil.example" not in user.text.split("blocked")[0]
    assert "image blocked" in user.text
    # The agent got the prompt exactly as the app sent it, in a run of its own.
    turns = kit.agent.get_turns()
    assert [t.role for t in turns] == ["user", "assistant"]
    assert turns[0].text == f"Explain this chart {INJECTION}"
    assert kit.values.running == [True, False]


async def test_a_submitted_prompt_is_governed_like_a_typed_one(tmp_path: Path) -> None:
    kit = start(tmp_path, approving_agent([ScriptedReply(tool_calls=[WRITE]), "Written."]))
    handle = handle_of(kit)
    assert await handle.submit("write a.txt")
    # The write needs approval: the modal shows it, and nothing is written until it is.
    await wait_until(lambda: bool(kit.browser.modals))
    assert "write_file" in kit.browser.modals[0]
    assert not (kit.session.working_dir / "a.txt").exists()
    assert kit.click("approve")
    await kit.chat.settled()
    assert (kit.session.working_dir / "a.txt").read_text() == "A"
    assert kit.chat.messages[-1].text.endswith("Written.")


async def test_a_second_submit_before_the_first_stream_starts_is_refused(
    tmp_path: Path,
) -> None:
    kit = start(tmp_path, approving_agent(["first reply", "second reply"]))
    handle = handle_of(kit)
    # A double click: the second comes before the first's stream task has started.
    assert await handle.submit("first")
    assert kit.session.streams == 0
    assert not await handle.submit("second")
    await kit.chat.settled()
    assert kit.chat.said() == [
        ("user", "first"),
        ("assistant", BUSY_MESSAGE),
        ("assistant", "first reply"),
    ]
    assert [t.text for t in kit.agent.get_turns() if t.role == "user"] == ["first"]
    # Once the run is over, the app may send again.
    assert await handle.submit("again")
    await kit.chat.settled()
    assert kit.chat.said()[-1] == ("assistant", "second reply")


# --------------------------------------------------------------------------- the others


async def test_append_message_shows_the_apps_note_as_text_only_on_the_page(
    tmp_path: Path,
) -> None:
    kit = start(tmp_path, approving_agent(["unused"]))
    handle = handle_of(kit)
    await handle.append_message("**Done**: see <img src=x onerror=alert(1)> [here](javascript:x)")
    (note,) = kit.chat.messages
    rendered = MarkdownIt().render(note.text)
    # Exactly the text, as a renderer shows it: no emphasis, no element, no link.
    assert "<strong>" not in rendered and "<img" not in rendered and "<a " not in rendered
    assert "**Done**" in note.plain
    assert kit.agent.get_turns() == []  # the agent never sees it
    assert "Done" not in handle.conversation_markdown()


def test_update_user_input_sets_the_input_box(tmp_path: Path) -> None:
    kit = start(tmp_path, approving_agent(["unused"]))
    handle = handle_of(kit)
    handle.update_user_input("Explain <b>this</b>", focus=True)
    handle.update_user_input(placeholder="Ask about the chart")
    handle.update_user_input("send it", submit=True)
    assert kit.chat.input_updates == [
        {"value": "Explain <b>this</b>", "placeholder": None, "submit": False, "focus": True},
        {"value": None, "placeholder": "Ask about the chart", "submit": False, "focus": False},
        {"value": "send it", "placeholder": None, "submit": True, "focus": False},
    ]
    with pytest.raises(ConfigurationError, match="needs a value"):
        handle.update_user_input(submit=True)


async def test_a_session_without_an_agent_offers_nothing() -> None:
    handle = _handle_without_agent(
        reactive.value(False, name="r"),
        reactive.value(AgentUsage(), name="u"),
        reactive.value(0, name="t"),
    )
    assert isinstance(handle.mcp, SessionMcp)
    assert not await handle.submit("hi")
    await handle.append_message("hi")
    handle.update_user_input("hi")
    assert handle.conversation_markdown() == "# Conversation\n"
    assert json.loads(handle.conversation_json())["turns"] == []


# --------------------------------------------------------------------------- downloads


def elements(html: str) -> list[str]:
    """The tags a browser would make of ``html`` (a quick scan: enough to see any)."""
    return re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", html)


async def test_the_markdown_download_holds_the_conversation_as_text(tmp_path: Path) -> None:
    _kit, handle = await conversed(tmp_path)
    markdown = handle.conversation_markdown()
    assert markdown.startswith("# Conversation\n\n## User\n\nLook at this ")
    assert "## Assistant" in markdown and "SECRET" not in markdown  # no system prompt
    assert "**Tool call** look" in markdown and "**Tool result** look" in markdown
    # Rendered as any Markdown viewer would (raw HTML on): nothing but the document's
    # own structure forms, and no image loads.
    html = MarkdownIt("commonmark").render(markdown)
    # ("em": the kit's own "*[image blocked: ...]*").
    assert set(elements(html)) <= {"h1", "h2", "p", "strong", "em", "pre", "code"}
    assert "evil.example/p.png" not in html.split("blocked")[-1]
    # The tool's output and arguments are each one code block, byte-exact; so is the
    # model's code (copying it gives runnable code).
    fences = [t.content for t in MarkdownIt("commonmark").parse(markdown) if t.type == "fence"]
    assert HOSTILE_OUTPUT + "\n" in fences
    assert "unclosed\n" in fences  # the model's open fence was closed where it ends
    assert json.loads(fences[1]) == {"path": "<b>notes</b>.md"}
    assert "if a<b:\n    pass\n" in fences


async def test_the_json_download_is_the_agents_turns_and_holds_no_markup(
    tmp_path: Path,
) -> None:
    kit, handle = await conversed(tmp_path)
    text = handle.conversation_json()
    assert "<" not in text and ">" not in text  # not even to a viewer that sniffs HTML
    document = json.loads(text)
    assert document["format"] == JSON_FORMAT and document["exported_at"]
    turns = [Turn.model_validate(t) for t in document["turns"]]
    assert turns == [t for t in kit.agent.get_turns() if t.role != "system"]
    assert [t.role for t in turns] == ["user", "assistant", "user", "assistant"]
    # The injection attempts decode to exactly the text the agent has.
    assert turns[0].text == f"Look at this {INJECTION}"
    assert turns[2].contents[0].output == HOSTILE_OUTPUT  # type: ignore[union-attr]
    assert "SECRET" not in text


@pytest.mark.parametrize(
    "text",
    [
        "```\nopen",
        "~~~~ python\nopen\n~~~",
        "- item\n\n   ```\n   open in a list\n```",
        "> ```\n> open in a quote",
        "    indented\n```",
        "````\n```\nstill open",
    ],
)
def test_text_that_leaves_code_open_cannot_expose_what_follows(text: str) -> None:
    turns = [
        Turn(role="assistant", contents=[ContentText(text=text), _request()]),
        Turn(
            role="user",
            contents=[ContentToolResult(call_id="c1", name="look", output=HOSTILE_OUTPUT)],
        ),
    ]
    markdown = conversation_markdown(turns)
    html = MarkdownIt("commonmark").render(markdown)
    assert "<script" not in html and "<iframe" not in html
    fences = [t.content for t in MarkdownIt("commonmark").parse(markdown) if t.type == "fence"]
    assert HOSTILE_OUTPUT + "\n" in fences  # the output is still one code block, exact


def _result() -> ContentToolResult:
    return ContentToolResult(call_id="c1", name="look", output=HOSTILE_OUTPUT)


def _request() -> ContentToolRequest:
    return ContentToolRequest(id="c1", name="look", arguments={"path": "x"})


async def test_a_download_button_gets_the_conversation_as_the_handle_gives_it(
    tmp_path: Path,
) -> None:
    _kit, handle = await conversed(tmp_path)
    markdown, document = download_file(handle, "markdown"), download_file(handle, "json")
    assert markdown["text"] == handle.conversation_markdown()
    assert markdown["media_type"] == "text/markdown"
    assert re.fullmatch(r"conversation-\d{8}-\d{6}\.md", markdown["filename"])
    assert json.loads(document["text"])["turns"] == json.loads(handle.conversation_json())["turns"]
    assert document["media_type"] == "application/json"
    assert re.fullmatch(r"conversation-\d{8}-\d{6}\.json", document["filename"])
    for kind in ("pdf", "", None, ["markdown"]):  # what a forged request could send
        with pytest.raises(ValueError, match="unknown download format"):
            download_file(handle, kind)


def test_a_system_turn_is_never_downloaded() -> None:
    turns = [
        Turn(role="system", contents=[ContentText(text="SECRET app instructions")]),
        Turn(role="user", contents=[ContentText(text="hi")]),
    ]
    assert "SECRET" not in conversation_markdown(turns)
    assert [t["role"] for t in json.loads(conversation_json(turns))["turns"]] == ["user"]


async def test_both_downloads_record_that_a_person_edited_the_arguments(tmp_path: Path) -> None:
    """An audit trail: the model asked for one thing, a person approved another."""
    from deputy_shiny.approvals import ApprovalDecision, ApprovalRequest
    from deputy_shiny.permissions import Permissions
    from deputy_shiny.tools import tool_write_file

    async def edit(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.approve(updated_input={**request.arguments, "content": "safe"})

    asked = ScriptedToolCall("write_file", {"path": "a.txt", "content": "rm -rf /"})
    agent = Agent(
        ScriptedModel([ScriptedReply(tool_calls=[asked]), "Done."]),
        tools=[tool_write_file()],
        permissions=Permissions(approval_tools=("write_file",)),
        approval_handler=edit,
        working_dir=tmp_path,
    )
    await agent.run_async("write it")
    assert (tmp_path / "a.txt").read_text() == "safe"
    turns = [t for t in agent.get_turns() if t.role != "system"]
    markdown = conversation_markdown(turns)
    fences = [t.content for t in MarkdownIt("commonmark").parse(markdown) if t.type == "fence"]
    assert json.loads(fences[0])["content"] == "rm -rf /"  # what the model asked for
    assert "**Edited by a person before approval**; the tool ran with:" in markdown
    assert json.loads(fences[1]) == {"path": "a.txt", "content": "safe"}
    document = json.loads(conversation_json(turns))
    [result] = [c for t in document["turns"] for c in t["contents"] if c["type"] == "tool_result"]
    assert result["approved_arguments"] == {"path": "a.txt", "content": "safe"}
    [request] = [c for t in document["turns"] for c in t["contents"] if c["type"] == "tool_request"]
    assert request["arguments"]["content"] == "rm -rf /"


async def test_an_unedited_approval_records_no_edit(tmp_path: Path) -> None:
    from deputy_shiny.approvals import ApprovalDecision, ApprovalRequest
    from deputy_shiny.permissions import Permissions
    from deputy_shiny.tools import tool_write_file

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.approve()

    asked = ScriptedToolCall("write_file", {"path": "a.txt", "content": "x"})
    agent = Agent(
        ScriptedModel([ScriptedReply(tool_calls=[asked]), "Done."]),
        tools=[tool_write_file()],
        permissions=Permissions(approval_tools=("write_file",)),
        approval_handler=approve,
        working_dir=tmp_path,
    )
    await agent.run_async("write it")
    assert "Edited by a person" not in conversation_markdown(agent.get_turns())
    assert '"approved_arguments":null' in conversation_json(agent.get_turns()).replace(" ", "")
