"""Playwright page controllers for apps built on the kit: chat, approvals, questions, team.

Test your own app the way ``shinychat.playwright.ChatController`` tests a chat: open the
app in a Playwright :class:`~playwright.sync_api.Page`, then drive the kit's parts with
:class:`AgentChat` (messages, the stop button, tool cards, the usage line),
:class:`ApprovalModal` (a tool call waiting for a human), :class:`QuestionModal`
(the ``ask_user`` tool's questions) and :class:`SubagentPanel` (a lead's delegations).
Every ``expect_*`` method waits, like Playwright's own ``expect``.

This module needs the ``playwright`` package (the ``[test]`` extra). Importing
``deputy_shiny`` never imports it.

Every action (``send``, ``approve``, ``choose``...) and every ``expect_*`` method takes
a keyword-only ``timeout`` in milliseconds, passed through to Playwright (None: its
default).

Examples:
    >>> from deputy_shiny.shiny.playwright import AgentChat, ApprovalModal
    >>> page.goto(app_url)  # doctest: +SKIP
    >>> chat = AgentChat(page, "agent")  # doctest: +SKIP
    >>> chat.expect_ready()  # doctest: +SKIP
    >>> chat.send("Write notes.txt")  # doctest: +SKIP
    >>> approval = ApprovalModal(page)  # doctest: +SKIP
    >>> approval.expect_open(tool_name="write_file")  # doctest: +SKIP
    >>> approval.approve()  # doctest: +SKIP
    >>> chat.expect_latest_reply("Wrote")  # doctest: +SKIP
"""

from __future__ import annotations

import re
from pathlib import Path
from re import Pattern
from typing import Literal

from playwright.sync_api import Locator, Page, expect
from shinychat.playwright import ChatController

__all__ = [
    "AgentChat",
    "ApprovalModal",
    "ConversationPanel",
    "HistoryDrawer",
    "QuestionModal",
    "SubagentPanel",
]

ArgumentValue = str | int | float | bool
"""A value for one scalar argument input of the approval form."""

_IDLE_STATES = re.compile(r"^(empty|ready)$")


def _css_string(value: str) -> str:
    """``value`` as a quoted CSS string, for attribute selectors."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\a ")
    return f'"{escaped}"'


class AgentChat:
    """Controller for ``agent_chat_ui(id)``: the chat, its stop button, tool cards and usage.

    Attributes:
        chat: shinychat's ``ChatController`` for the inner chat (id ``<id>-chat``).
        loc: The chat element.
        loc_replies: Every assistant message, oldest first.
        loc_latest_reply: The newest assistant message.
        loc_user_messages: Every message of the user, oldest first.
        loc_tool_cards: Every tool card (one per tool call).
        loc_stop: The stop button (present only while a reply streams).
        loc_send: The send/stop button, whatever its state.
        loc_usage: The usage line (``Requests: 2 · Tokens: 150 · Cost: unknown``).

    Examples:
        >>> from deputy_shiny.shiny.playwright import AgentChat
        >>> chat = AgentChat(page, "agent")  # doctest: +SKIP
        >>> chat.send("Hello")  # doctest: +SKIP
        >>> chat.expect_latest_reply("Hello")  # doctest: +SKIP
        >>> chat.expect_usage(re.compile(r"Requests: 1 "))  # doctest: +SKIP
    """

    def __init__(self, page: Page, id: str) -> None:
        """Control the kit's chat module ``id`` on ``page``."""
        self.page = page
        self.id = id
        self.chat = ChatController(page, f"{id}-chat")
        self.loc = self.chat.loc
        self.loc_replies = self.chat.loc_messages.locator("> .shiny-chat-message")
        self.loc_user_messages = self.chat.loc_messages.locator("> .shiny-chat-user-message")
        self.loc_latest_reply = self.loc_replies.last
        self.loc_tool_cards = self.chat.loc_messages.locator(".shiny-chat-tool-group")
        self.loc_send = self.chat.loc_input_button
        self.loc_stop = self.chat.loc_input_container.locator(
            '.shiny-chat-btn-send[data-state="cancel"]'
        )
        self.loc_usage = page.locator(f"#{id}-usage")

    def expect_ready(self, *, timeout: float | None = None) -> None:
        """Wait until the chat can take a message: input shown, Shiny connected.

        Examples:
            >>> from deputy_shiny.shiny.playwright import AgentChat
            >>> page.goto(app_url)  # doctest: +SKIP
            >>> AgentChat(page, "agent").expect_ready()  # doctest: +SKIP
        """
        expect(self.chat.loc_input).to_be_visible(timeout=timeout)
        self.page.wait_for_function(
            "() => !!(window.Shiny && Shiny.shinyapp && Shiny.shinyapp.isConnected())",
            timeout=timeout,
        )

    def send(self, text: str, *, timeout: float | None = None) -> None:
        """Type ``text`` into the chat input and send it.

        Examples:
            >>> from deputy_shiny.shiny.playwright import AgentChat
            >>> AgentChat(page, "agent").send("What is in data.csv?")  # doctest: +SKIP
        """
        # Filled at once and checked, not typed key by key (shinychat's set_user_input):
        # on a busy machine the input may still be settling from the last reply (disabled
        # for a moment, or the focus handed back from a closed prompt), and a keystroke
        # landing then is lost, so the message sent would be cut short.
        self.chat.loc_input.fill(text, timeout=timeout)
        expect(self.chat.loc_input).to_have_text(text, timeout=timeout)
        self.chat.send_user_input(timeout=timeout)

    def stop(self, *, timeout: float | None = None) -> None:
        """Click the stop button of the reply that is streaming.

        Examples:
            >>> from deputy_shiny.shiny.playwright import AgentChat
            >>> AgentChat(page, "agent").stop()  # doctest: +SKIP
        """
        self.loc_stop.click(timeout=timeout)

    def latest_reply_text(self) -> str:
        """The newest assistant message's text as shown ("" when there is none yet).

        Examples:
            >>> from deputy_shiny.shiny.playwright import AgentChat
            >>> AgentChat(page, "agent").latest_reply_text()  # doctest: +SKIP
            'Hello! How can I help?'
        """
        if self.loc_replies.count() == 0:
            return ""
        return self.loc_latest_reply.inner_text()

    def expect_latest_reply(
        self, value: str | Pattern[str], *, timeout: float | None = None
    ) -> None:
        """Wait until the newest assistant message contains ``value`` (text or regex).

        Examples:
            >>> from deputy_shiny.shiny.playwright import AgentChat
            >>> AgentChat(page, "agent").expect_latest_reply("Done")  # doctest: +SKIP
        """
        expect(self.loc_latest_reply).to_contain_text(value, use_inner_text=True, timeout=timeout)

    def expect_idle(self, *, timeout: float | None = None) -> None:
        """Wait until no reply streams: the send button is back (no stop button).

        Examples:
            >>> from deputy_shiny.shiny.playwright import AgentChat
            >>> AgentChat(page, "agent").expect_idle(timeout=5_000)  # doctest: +SKIP
        """
        expect(self.loc_send).to_have_attribute("data-state", _IDLE_STATES, timeout=timeout)

    def tool_card(self, text: str | Pattern[str]) -> Locator:
        """The tool cards whose title or content contains ``text``.

        Examples:
            >>> from deputy_shiny.shiny.playwright import AgentChat
            >>> AgentChat(page, "agent").tool_card("Denied:").count()  # doctest: +SKIP
            1
        """
        return self.loc_tool_cards.filter(has_text=text)

    def tool_card_title(self, card: Locator) -> Locator:
        """The title shown on a (collapsed) tool card, e.g. "Used write_file".

        Examples:
            >>> from deputy_shiny.shiny.playwright import AgentChat
            >>> chat = AgentChat(page, "agent")  # doctest: +SKIP
            >>> chat.tool_card_title(chat.loc_tool_cards.last).inner_text()  # doctest: +SKIP
            'Denied: Denied by the user'
        """
        return card.locator(".shiny-chat-tool-group__title").first

    def expand_tool_card(self, card: Locator, *, timeout: float | None = None) -> Locator:
        """Open a collapsed tool card and return its detail region (arguments and output).

        Examples:
            >>> from deputy_shiny.shiny.playwright import AgentChat
            >>> chat = AgentChat(page, "agent")  # doctest: +SKIP
            >>> chat.expand_tool_card(chat.loc_tool_cards.last).inner_text()  # doctest: +SKIP
            'Wrote 5 B to notes.txt ...'
        """
        row = card.locator(".shiny-chat-tool-group__row").first
        if row.get_attribute("aria-expanded", timeout=timeout) != "true":
            row.click(timeout=timeout)
        detail = card.locator(".shiny-chat-tool-call-row__detail").first
        expect(detail).to_be_visible(timeout=timeout)
        return detail

    def expect_usage(self, value: str | Pattern[str], *, timeout: float | None = None) -> None:
        """Wait until the usage line contains ``value`` (text or regex).

        Examples:
            >>> from deputy_shiny.shiny.playwright import AgentChat
            >>> AgentChat(page, "agent").expect_usage("Cost: unknown")  # doctest: +SKIP
        """
        expect(self.loc_usage).to_contain_text(value, timeout=timeout)

    def edit_message(self, index: int, text: str, *, timeout: float | None = None) -> None:
        """Edit the user's message ``index`` (0: the first) to ``text`` and resend it, with
        shinychat's own control (the kit may ask to confirm the files that go back).

        Examples:
            >>> from deputy_shiny.shiny.playwright import AgentChat
            >>> AgentChat(page, "agent").edit_message(1, "Plot it by year")  # doctest: +SKIP
        """
        message = self.loc_user_messages.nth(index)
        message.hover(timeout=timeout)
        message.get_by_role("button", name="Edit message").click(timeout=timeout)
        editor = message.locator("[contenteditable='true']")
        # The editor receives the message's text just after it opens: wait for it, or on a
        # busy machine it lands after the fill and the two run together.
        expect(editor).not_to_have_text(re.compile(r"^\s*$"), timeout=timeout)
        editor.fill(text, timeout=timeout)
        expect(editor).to_have_text(text, timeout=timeout)
        message.get_by_role("button", name="Save and resend").click(timeout=timeout)

    def versions(self, index: int) -> Locator:
        """The "‹ 1 / 2 ›" under the user's message ``index`` (present once it was edited);
        its buttons are named "Previous version" and "Next version".

        Examples:
            >>> from deputy_shiny.shiny.playwright import AgentChat
            >>> nav = AgentChat(page, "agent").versions(1)  # doctest: +SKIP
            >>> nav.get_by_role("button", name="Previous version").click()  # doctest: +SKIP
        """
        return self.loc_user_messages.nth(index).locator(".shiny-chat-sibling-nav")


class _Modal:
    """What the kit's modals share: Shiny's single ``#shiny-modal`` and its buttons."""

    root_selector = ""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.loc_modal = page.locator("#shiny-modal")
        self.loc = page.locator(
            f"#shiny-modal {self.root_selector}, #shiny-modal{self.root_selector}"
        )

    def button(self, name: str) -> Locator:
        """The modal's button whose accessible name is exactly ``name``."""
        return self.loc_modal.get_by_role("button", name=name, exact=True)

    def action(self, action: str) -> Locator:
        """The modal's button for ``action`` (``approve``, ``deny``, ``always``, ``stop``,
        ``submit``, ``cancel``, ``confirm``), whatever its words (``KitStrings``)."""
        return self.loc_modal.locator(f"button[data-deputy-action={_css_string(action)}]")

    def request_id(self, *, timeout: float | None = None) -> str:
        """The ``data-request-id`` of the open modal (the kit's routing key).

        Examples:
            >>> from deputy_shiny.shiny.playwright import ApprovalModal
            >>> ApprovalModal(page).request_id()  # doctest: +SKIP
            'Zk3q...'
        """
        expect(self.loc).to_be_visible(timeout=timeout)
        value = self.loc.get_attribute("data-request-id", timeout=timeout)
        if not value:
            raise AssertionError(f"the open {self.root_selector} modal has no data-request-id")
        return value

    def expect_open(self, *, timeout: float | None = None) -> None:
        """Wait until the modal is shown."""
        expect(self.loc).to_be_visible(timeout=timeout)

    def expect_closed(self, *, request_id: str | None = None, timeout: float | None = None) -> None:
        """Wait until the modal is gone (only the one for ``request_id``, when given).

        Examples:
            >>> from deputy_shiny.shiny.playwright import ApprovalModal
            >>> ApprovalModal(page).expect_closed()  # doctest: +SKIP
        """
        loc = self.loc
        if request_id is not None:
            loc = loc.and_(self.page.locator(f"[data-request-id={_css_string(request_id)}]"))
        expect(loc.filter(visible=True)).to_have_count(0, timeout=timeout)


class ApprovalModal(_Modal):
    """Controller for the approval modal: a tool call waiting for the user's decision.

    Attributes:
        loc: The ``.deputy-approval`` root (it carries ``data-request-id``).
        loc_heading: The heading(s) of the modal (they name the tool).
        loc_description: The tool's description.
        loc_badges: The annotation badges (``read-only``, ``destructive``, ...).
        loc_reason: Why the call needs approval.
        loc_deny_message: The optional message for the model when denying.
        loc_waiting: "1 of N waiting", shown when more prompts wait behind this one
            (kept current while other chats of the page queue theirs).
        loc_asker: "Asked by <chat>": which chat of the page asks.

    Examples:
        >>> from deputy_shiny.shiny.playwright import ApprovalModal
        >>> approval = ApprovalModal(page)  # doctest: +SKIP
        >>> approval.expect_open(tool_name="write_file")  # doctest: +SKIP
        >>> approval.set_argument("path", "notes-v2.txt")  # doctest: +SKIP
        >>> approval.approve()  # doctest: +SKIP
    """

    root_selector = ".deputy-approval"

    def __init__(self, page: Page) -> None:
        """Control the approval modal on ``page`` (it need not be open yet)."""
        super().__init__(page)
        self.loc_heading = self.loc_modal.get_by_role("heading")
        self.loc_description = self.loc.locator(".deputy-tool-description")
        self.loc_badges = self.loc.locator(".deputy-badge")
        self.loc_reason = self.loc.locator(".deputy-reason")
        self.loc_deny_message = self.loc_modal.locator("textarea.deputy-deny-message")
        self.loc_waiting = self.loc.locator(".deputy-waiting")
        self.loc_asker = self.loc.locator(".deputy-asker")

    def expect_open(self, tool_name: str | None = None, *, timeout: float | None = None) -> None:
        """Wait until an approval is shown, for ``tool_name`` when given.

        Examples:
            >>> from deputy_shiny.shiny.playwright import ApprovalModal
            >>> ApprovalModal(page).expect_open("write_file", timeout=10_000)  # doctest: +SKIP
        """
        expect(self.loc).to_be_visible(timeout=timeout)
        if tool_name is not None:
            expect(self.loc_heading.filter(has_text=tool_name).first).to_be_visible(timeout=timeout)

    def argument(self, name: str) -> Locator:
        """The input for the scalar argument ``name``.

        Examples:
            >>> from deputy_shiny.shiny.playwright import ApprovalModal
            >>> ApprovalModal(page).argument("path").input_value()  # doctest: +SKIP
            'notes.txt'
        """
        return self.loc_modal.locator(f"[data-arg={_css_string(name)}]")

    def set_argument(
        self, name: str, value: ArgumentValue, *, timeout: float | None = None
    ) -> None:
        """Edit the argument ``name`` before approving (checkboxes take a bool).

        Examples:
            >>> from deputy_shiny.shiny.playwright import ApprovalModal
            >>> ApprovalModal(page).set_argument("path", "other.txt")  # doctest: +SKIP
        """
        field = self.argument(name)
        expect(field).to_be_visible(timeout=timeout)
        if field.get_attribute("type", timeout=timeout) == "checkbox":
            field.set_checked(bool(value), timeout=timeout)
        else:
            text = str(value).lower() if isinstance(value, bool) else str(value)
            field.fill(text, timeout=timeout)

    def approve(self, *, timeout: float | None = None) -> None:
        """Click "Approve".

        Examples:
            >>> from deputy_shiny.shiny.playwright import ApprovalModal
            >>> ApprovalModal(page).approve(timeout=5_000)  # doctest: +SKIP
        """
        expect(self.loc).to_be_visible(timeout=timeout)
        self.action("approve").click(timeout=timeout)

    def deny(self, message: str | None = None, *, timeout: float | None = None) -> None:
        """Type the optional ``message`` for the model, then click "Deny".

        Examples:
            >>> from deputy_shiny.shiny.playwright import ApprovalModal
            >>> ApprovalModal(page).deny("Write to drafts/ instead.")  # doctest: +SKIP
        """
        expect(self.loc).to_be_visible(timeout=timeout)
        if message is not None:
            self.loc_deny_message.fill(message, timeout=timeout)
        self.action("deny").click(timeout=timeout)

    def always_allow(self, *, timeout: float | None = None) -> None:
        """Click "Always allow" (approves this tool for the rest of the conversation).

        Examples:
            >>> from deputy_shiny.shiny.playwright import ApprovalModal
            >>> ApprovalModal(page).always_allow()  # doctest: +SKIP
        """
        expect(self.loc).to_be_visible(timeout=timeout)
        self.action("always").click(timeout=timeout)

    def stop_run(self, *, timeout: float | None = None) -> None:
        """Click "Stop the run": deny this call and every call waiting behind it.

        Examples:
            >>> from deputy_shiny.shiny.playwright import ApprovalModal
            >>> ApprovalModal(page).stop_run()  # doctest: +SKIP
        """
        expect(self.loc).to_be_visible(timeout=timeout)
        self.action("stop").click(timeout=timeout)


class QuestionModal(_Modal):
    """Controller for the ``ask_user`` modal: 1-4 multiple-choice questions.

    Attributes:
        loc: The ``.deputy-questions`` root (it carries ``data-request-id``).
        loc_questions: One ``fieldset.deputy-question`` per question, in order.

    Examples:
        >>> from deputy_shiny.shiny.playwright import QuestionModal
        >>> questions = QuestionModal(page)  # doctest: +SKIP
        >>> questions.expect_open()  # doctest: +SKIP
        >>> questions.choose(0, "CSV")  # doctest: +SKIP
        >>> questions.other(1, "Only the 2024 rows")  # doctest: +SKIP
        >>> questions.submit()  # doctest: +SKIP
    """

    root_selector = ".deputy-questions"

    def __init__(self, page: Page) -> None:
        """Control the question modal on ``page`` (it need not be open yet)."""
        super().__init__(page)
        self.loc_questions = self.loc.locator("fieldset.deputy-question")

    def question(self, index: int) -> Locator:
        """The fieldset of question ``index`` (0-based).

        Examples:
            >>> from deputy_shiny.shiny.playwright import QuestionModal
            >>> QuestionModal(page).question(0).locator("legend").inner_text()  # doctest: +SKIP
            'Format'
        """
        return self.loc_questions.nth(index)

    def option(self, question_index: int, label: str) -> Locator:
        """The radio button or checkbox of option ``label`` in question ``question_index``.

        Examples:
            >>> from deputy_shiny.shiny.playwright import QuestionModal
            >>> QuestionModal(page).option(0, "CSV").is_checked()  # doctest: +SKIP
            False
        """
        value = _css_string(label)
        return self.question(question_index).locator(
            f"input[type=radio][value={value}], input[type=checkbox][value={value}]"
        )

    def choose(self, question_index: int, label: str, *, timeout: float | None = None) -> None:
        """Select option ``label`` (adds it, for a multi-select question).

        Examples:
            >>> from deputy_shiny.shiny.playwright import QuestionModal
            >>> QuestionModal(page).choose(0, "CSV")  # doctest: +SKIP
        """
        self.option(question_index, label).check(timeout=timeout)

    def other(self, question_index: int, text: str, *, timeout: float | None = None) -> None:
        """Answer question ``question_index`` in free text ("Other").

        Examples:
            >>> from deputy_shiny.shiny.playwright import QuestionModal
            >>> QuestionModal(page).other(0, "Parquet, please")  # doctest: +SKIP
        """
        self.question(question_index).locator("input.deputy-other").fill(text, timeout=timeout)

    def submit(self, *, timeout: float | None = None) -> None:
        """Click "Submit".

        Examples:
            >>> from deputy_shiny.shiny.playwright import QuestionModal
            >>> QuestionModal(page).submit()  # doctest: +SKIP
        """
        expect(self.loc).to_be_visible(timeout=timeout)
        self.action("submit").click(timeout=timeout)

    def cancel(self, *, timeout: float | None = None) -> None:
        """Click "Cancel" (the model is told the user declined to answer).

        Examples:
            >>> from deputy_shiny.shiny.playwright import QuestionModal
            >>> QuestionModal(page).cancel()  # doctest: +SKIP
        """
        expect(self.loc).to_be_visible(timeout=timeout)
        self.action("cancel").click(timeout=timeout)


class SubagentPanel:
    """Controller for ``subagent_panel_ui(id)``: a lead agent's delegations.

    Attributes:
        loc: The panel's output (``#<id>-delegations``).
        loc_rows: One row per delegation shown, newest first.
        loc_note: The note shown instead of rows ("No delegations yet.", or that the
            user may not see them).

    Examples:
        >>> from deputy_shiny.shiny.playwright import SubagentPanel
        >>> team = SubagentPanel(page, "team")  # doctest: +SKIP
        >>> row = team.row("researcher")  # doctest: +SKIP
        >>> team.expect_status(row, "running")  # doctest: +SKIP
        >>> team.expect_event(row, "calls list_files")  # doctest: +SKIP
        >>> team.interrupt(row)  # doctest: +SKIP
        >>> team.expect_status(row, "stopped")  # doctest: +SKIP
    """

    def __init__(self, page: Page, id: str) -> None:
        """Control the kit's subagent panel ``id`` on ``page``."""
        self.page = page
        self.id = id
        self.loc = page.locator(f"#{id}-delegations")
        self.loc_rows = self.loc.locator(".deputy-subagent")
        self.loc_note = self.loc.locator(".deputy-subagent-note")

    def row(self, agent_name: str | None = None, *, index: int = 0) -> Locator:
        """The ``index``-th row (newest first), of subagent ``agent_name`` when given.

        Examples:
            >>> from deputy_shiny.shiny.playwright import SubagentPanel
            >>> SubagentPanel(page, "team").row("writer").inner_text()  # doctest: +SKIP
            'writer completed 1 requests · 30 tokens ...'
        """
        rows = self.loc_rows
        if agent_name is not None:
            name = self.page.locator(".deputy-subagent-name").get_by_text(agent_name, exact=True)
            rows = rows.filter(has=name)
        return rows.nth(index)

    def delegation_id(self, row: Locator, *, timeout: float | None = None) -> str:
        """The delegation id a row shows (its ``data-delegation``).

        Examples:
            >>> from deputy_shiny.shiny.playwright import SubagentPanel
            >>> team = SubagentPanel(page, "team")  # doctest: +SKIP
            >>> team.delegation_id(team.row())  # doctest: +SKIP
            'dlg_3f2a...'
        """
        value = row.get_attribute("data-delegation", timeout=timeout)
        if not value:
            raise AssertionError("the subagent row has no data-delegation")
        return value

    def expect_rows(self, count: int, *, timeout: float | None = None) -> None:
        """Wait until exactly ``count`` delegations are shown.

        Examples:
            >>> from deputy_shiny.shiny.playwright import SubagentPanel
            >>> SubagentPanel(page, "team").expect_rows(2)  # doctest: +SKIP
        """
        expect(self.loc_rows).to_have_count(count, timeout=timeout)

    def expect_note(self, value: str | Pattern[str], *, timeout: float | None = None) -> None:
        """Wait until the panel shows a note containing ``value`` instead of rows.

        Examples:
            >>> from deputy_shiny.shiny.playwright import SubagentPanel
            >>> SubagentPanel(page, "team").expect_note("may not see")  # doctest: +SKIP
        """
        expect(self.loc_note).to_contain_text(value, timeout=timeout)

    def expect_status(
        self, row: Locator, value: str | Pattern[str], *, timeout: float | None = None
    ) -> None:
        """Wait until a row's status badge reads ``value`` (``running``, ``stopped``...).

        Examples:
            >>> from deputy_shiny.shiny.playwright import SubagentPanel
            >>> team = SubagentPanel(page, "team")  # doctest: +SKIP
            >>> team.expect_status(team.row(), "completed")  # doctest: +SKIP
        """
        expect(row.locator(".deputy-subagent-status")).to_have_text(value, timeout=timeout)

    def expect_event(
        self, row: Locator, value: str | Pattern[str], *, timeout: float | None = None
    ) -> None:
        """Wait until one of a row's recent events contains ``value``.

        Examples:
            >>> from deputy_shiny.shiny.playwright import SubagentPanel
            >>> team = SubagentPanel(page, "team")  # doctest: +SKIP
            >>> team.expect_event(team.row(), "calls read_file")  # doctest: +SKIP
        """
        events = row.locator(".deputy-subagent-events li")
        expect(events.filter(has_text=value).first).to_be_visible(timeout=timeout)

    def interrupt(self, row: Locator, *, timeout: float | None = None) -> None:
        """Click a running delegation's "Stop" button.

        Examples:
            >>> from deputy_shiny.shiny.playwright import SubagentPanel
            >>> team = SubagentPanel(page, "team")  # doctest: +SKIP
            >>> team.interrupt(team.row("researcher"))  # doctest: +SKIP
        """
        row.locator(".deputy-subagent-btn-interrupt").click(timeout=timeout)

    def open_transcript(self, row: Locator, *, timeout: float | None = None) -> Locator:
        """Open a row's transcript and return it (read-only text).

        Examples:
            >>> from deputy_shiny.shiny.playwright import SubagentPanel
            >>> team = SubagentPanel(page, "team")  # doctest: +SKIP
            >>> team.open_transcript(team.row()).inner_text()  # doctest: +SKIP
            'user Research tides ...'
        """
        transcript = row.locator(".deputy-subagent-transcript")
        if transcript.count() == 0:
            row.locator(".deputy-subagent-btn-transcript").click(timeout=timeout)
        expect(transcript).to_be_visible(timeout=timeout)
        return transcript


class ConversationPanel:
    """Controller for ``conversation_panel_ui(id)``: new conversation, downloads, rewind.

    Attributes:
        loc: The checkpoint list's output (``#<id>-checkpoints``).
        loc_rows: One row per checkpoint, newest first.
        loc_new: The "New conversation" button.
        loc_confirm: The confirmation modal, while it is open.

    Examples:
        >>> from deputy_shiny.shiny.playwright import ConversationPanel
        >>> panel = ConversationPanel(page, "conversation")  # doctest: +SKIP
        >>> panel.expect_changes(0, "1 file change after it")  # doctest: +SKIP
        >>> panel.rewind(0)  # doctest: +SKIP
        >>> panel.download("markdown")  # doctest: +SKIP
    """

    def __init__(self, page: Page, id: str) -> None:
        """Control the kit's conversation panel ``id`` on ``page``."""
        self.page = page
        self.id = id
        self.loc = page.locator(f"#{id}-checkpoints")
        self.loc_rows = self.loc.locator(".deputy-checkpoint")
        self.loc_new = page.locator(f"#{id}-new")
        self.loc_confirm = page.locator("#shiny-modal .deputy-confirm")

    def expect_changes(
        self, index: int, value: str | Pattern[str], *, timeout: float | None = None
    ) -> None:
        """Wait until row ``index`` (0: the newest) says how many changes follow it."""
        row = self.loc_rows.nth(index)
        expect(row.locator(".deputy-checkpoint-changes")).to_have_text(value, timeout=timeout)

    def _answer(self, confirm: bool, timeout: float | None) -> None:
        expect(self.loc_confirm).to_be_visible(timeout=timeout)
        action = "confirm" if confirm else "cancel"
        self.loc_confirm.locator(f'[data-deputy-action="{action}"]').click(timeout=timeout)
        expect(self.loc_confirm).to_have_count(0, timeout=timeout)

    def rewind(self, index: int = 0, *, confirm: bool = True, timeout: float | None = None) -> None:
        """Click row ``index``'s Rewind (0: the newest), then confirm (or cancel)."""
        self.loc_rows.nth(index).locator(".deputy-rewind").click(timeout=timeout)
        self._answer(confirm, timeout)

    def download(self, kind: Literal["markdown", "json"], *, timeout: float | None = None) -> str:
        """Click "Markdown" or "JSON" under "Download conversation"; the file's text."""
        with self.page.expect_download(timeout=timeout) as info:
            self.page.locator(f"#{self.id}-download_{kind}").click(timeout=timeout)
        path = info.value.path()
        return Path(path).read_text(encoding="utf-8")

    def new_conversation(self, *, confirm: bool = True, timeout: float | None = None) -> None:
        """Click "New conversation", then confirm (the page reloads) or cancel."""
        self.loc_new.click(timeout=timeout)
        self._answer(confirm, timeout)


class HistoryDrawer:
    """Controller for the chat's history drawer (shinychat's): the user's conversations.

    Attributes:
        loc: The drawer, while it is open.
        loc_trigger: The button that opens it.
        loc_titles: Each conversation's title, newest first.
        loc_active: The title of the conversation the page shows.

    Examples:
        >>> from deputy_shiny.shiny.playwright import HistoryDrawer
        >>> drawer = HistoryDrawer(page, "agent")  # doctest: +SKIP
        >>> drawer.expect_titles(["Second topic", "First topic"])  # doctest: +SKIP
        >>> drawer.select("First topic")  # doctest: +SKIP
    """

    def __init__(self, page: Page, id: str) -> None:
        """Control the history drawer of ``agent_chat_ui(id)`` on ``page``."""
        self.page = page
        chat = page.locator(f"#{id}-chat")
        self.loc = chat.locator(".shiny-chat-history")
        self.loc_trigger = chat.locator(".shiny-chat-history-trigger")
        self.loc_titles = self.loc.locator(".shiny-chat-history-item-title")
        self.loc_active = self.loc.locator(
            ".shiny-chat-history-item.active .shiny-chat-history-item-title"
        )

    def open(self, *, timeout: float | None = None) -> None:
        """Open the drawer (if it is not open)."""
        if self.loc_trigger.get_attribute("aria-expanded", timeout=timeout) != "true":
            self.loc_trigger.click(timeout=timeout)
        expect(self.loc).to_be_visible(timeout=timeout)

    def item(self, title: str) -> Locator:
        """The conversation titled ``title``."""
        exact = re.compile(f"^{re.escape(title)}$")
        return self.loc.locator(".shiny-chat-history-item").filter(
            has=self.page.locator(".shiny-chat-history-item-title", has_text=exact)
        )

    def expect_titles(self, titles: list[str], *, timeout: float | None = None) -> None:
        """Open the drawer and wait until it lists exactly ``titles``, newest first."""
        self.open(timeout=timeout)
        expect(self.loc_titles).to_have_text(titles, timeout=timeout)

    def select(self, title: str, *, timeout: float | None = None) -> None:
        """Open the conversation titled ``title`` (the page reloads to show it)."""
        self.open(timeout=timeout)
        self.item(title).locator(".shiny-chat-history-item-select").click(timeout=timeout)

    def new(self, *, timeout: float | None = None) -> None:
        """Click "New" (the page reloads with a new conversation)."""
        self.open(timeout=timeout)
        self.loc.locator(".shiny-chat-history-new").click(timeout=timeout)

    def _menu(self, title: str, timeout: float | None) -> Locator:
        self.open(timeout=timeout)
        self.item(title).locator("[aria-label='Conversation actions']").click(timeout=timeout)
        return self.page.locator(".shiny-chat-history-menu")

    def rename(self, title: str, new_title: str, *, timeout: float | None = None) -> None:
        """Rename the conversation titled ``title``."""
        self._menu(title, timeout).get_by_text("Rename").click(timeout=timeout)
        field = self.loc.locator(".shiny-chat-history-rename-input")
        field.fill(new_title, timeout=timeout)
        field.press("Enter", timeout=timeout)

    def delete(self, title: str, *, timeout: float | None = None) -> None:
        """Delete the conversation titled ``title`` (and confirm)."""
        self._menu(title, timeout).locator(".shiny-chat-history-menu-danger").click(timeout=timeout)
        self.item(title).locator(".shiny-chat-history-confirm-yes").click(timeout=timeout)

    def search(self, text: str, *, timeout: float | None = None) -> None:
        """Type ``text`` in the drawer's search box (it filters the list by title)."""
        self.open(timeout=timeout)
        self.loc.locator(".shiny-chat-history-search").fill(text, timeout=timeout)
