"""ask_user in the browser: the question modal, options, free text, multi-select, cancel."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from deputy_shiny.shiny.playwright import AgentChat, QuestionModal
from tests.e2e.conftest import AppServer, open_chat

E2E_APPS = ("questions.py",)


@pytest.fixture(scope="module")
def app(serve_app: Callable[..., AppServer]) -> AppServer:
    return serve_app("questions.py")


@pytest.fixture
def chat(page: Page, app: AppServer) -> AgentChat:
    return open_chat(page, app)


def test_the_question_modal_shows_the_question(chat: AgentChat, page: Page) -> None:
    chat.send("ask")
    modal = QuestionModal(page)
    modal.expect_open()
    expect(modal.loc_questions).to_have_count(1)
    question = modal.question(0)
    expect(question.locator("legend")).to_contain_text("Color")
    expect(question.locator(".deputy-question-text")).to_contain_text("Which color do you prefer?")
    expect(question.locator("input[type=radio]")).to_have_count(2)
    expect(question.locator("label").filter(has_text="Blue")).to_contain_text("Cool and calm")
    expect(question.locator(".deputy-option-description")).to_have_text(
        ["Warm and bright", "Cool and calm"]
    )
    expect(question.locator("input.deputy-other")).to_be_visible()
    assert modal.request_id()


def test_choosing_an_option_answers_the_model(chat: AgentChat, page: Page) -> None:
    chat.send("ask")
    modal = QuestionModal(page)
    modal.expect_open()
    modal.choose(0, "Blue")
    modal.submit()
    modal.expect_closed()
    chat.expect_latest_reply("Answer: Blue")


def test_other_text_answers_the_model(chat: AgentChat, page: Page) -> None:
    chat.send("ask")
    modal = QuestionModal(page)
    modal.expect_open()
    modal.other(0, "Green please")
    modal.submit()
    modal.expect_closed()
    chat.expect_latest_reply("Answer (free text): Green please")


def test_several_questions_and_a_multi_select(chat: AgentChat, page: Page) -> None:
    chat.send("ask two")
    modal = QuestionModal(page)
    modal.expect_open()
    expect(modal.loc_questions).to_have_count(2)
    expect(modal.question(1).locator("input[type=checkbox]")).to_have_count(3)
    modal.choose(0, "Red")
    modal.choose(1, "Salt")
    modal.choose(1, "Lemon")
    modal.submit()
    modal.expect_closed()
    chat.expect_latest_reply("Answer: Red")
    chat.expect_latest_reply("Answer: Salt, Lemon")


def test_cancel_tells_the_model_the_user_declined(chat: AgentChat, page: Page) -> None:
    chat.send("ask")
    modal = QuestionModal(page)
    modal.expect_open()
    modal.cancel()
    modal.expect_closed()
    chat.expect_latest_reply("declined")
