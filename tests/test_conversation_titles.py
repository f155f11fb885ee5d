"""Model-made conversation titles (``KitPersistence(title_model=)``), on a real session.

The title request is governed like the user's own: charged to their daily budget and
counted in the conversation's usage (kept on reload); its text is a title, never markup
or a second line; any failure keeps the first message's title, and a title the user
gave is never replaced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deputy_shiny.shiny import KitPersistence, UserBudget
from deputy_shiny.shiny._conversation_list import read_listing
from deputy_shiny.shiny._conversation_titles import TITLE_PROMPT, plain_title
from deputy_shiny.testing import FunctionModel, ScriptedModel, ScriptedReply
from tests.test_chat_session import Kit, persistent_agent, restored, start, wait_until

FIRST = "Please plan my week: gym on Monday, dentist on Friday"
HOSTILE = '"<img src=x onerror=alert(1)> Week plan"\nIgnore this second line'


def persistence_for(tmp_path: Path, title_model: Any, **options: Any) -> KitPersistence:
    return KitPersistence(
        tmp_path / "root", trust_user_header=True, title_model=title_model, **options
    )


async def titles(kit: Kit) -> list[str]:
    conversation = kit.session.conversation
    assert conversation is not None
    listing = await conversation.listing.read()
    return [entry.title for entry in listing.entries]


async def first_exchange(kit: Kit) -> None:
    await restored(kit)
    await kit.session.submit(FIRST)
    await kit.chat.settled()
    # The title is asked for in the background once the reply has come.
    await wait_until(lambda: not kit.session.background)


async def test_a_model_titles_the_conversation_counted_in_usage_and_budget(
    tmp_path: Path,
) -> None:
    seen: list[Any] = []

    def titler(messages: list[dict[str, Any]], tools: Any) -> ScriptedReply:
        seen.append(messages)
        return ScriptedReply(text=HOSTILE, usage={"prompt_tokens": 40, "completion_tokens": 6})

    persistence = persistence_for(
        tmp_path, FunctionModel(titler), budget=UserBudget(max_requests_per_day=10)
    )
    kit = start(tmp_path, persistent_agent(["Here is your plan."]), persistence=persistence)
    await first_exchange(kit)
    # The model's words, as plain text: markup stays characters, the second line is gone.
    assert await titles(kit) == ["<img src=x onerror=alert(1)> Week plan"]
    assert seen[0][0] == {"role": "system", "content": TITLE_PROMPT}
    assert seen[0][-1]["content"] == FIRST
    # The run's request and the title's: in the conversation's usage and the budget.
    assert kit.agent.usage().requests == 2
    assert kit.values.usage[-1].requests == 2
    assert kit.values.budget[-1].startswith("Today: 2 of 10 requests")
    await kit.session.end()

    again = start(tmp_path, persistent_agent([]), persistence=persistence)
    await restored(again)  # the saved conversation keeps the title's usage
    assert again.agent.usage().requests == 2
    await again.session.end()


async def test_a_failed_or_refused_title_keeps_the_first_messages(tmp_path: Path) -> None:
    # No reply scripted: the title request fails.
    persistence = persistence_for(tmp_path / "a", ScriptedModel([]))
    kit = start(tmp_path, persistent_agent(["Here is your plan."]), persistence=persistence)
    await first_exchange(kit)
    assert await titles(kit) == [FIRST]
    await kit.session.end()

    # The budget has room for the user's run only: the title is never sent.
    titler = ScriptedModel(["Never sent"])
    persistence = persistence_for(tmp_path / "b", titler, budget=UserBudget(max_requests_per_day=1))
    kit = start(tmp_path, persistent_agent(["Here is your plan."]), persistence=persistence)
    await first_exchange(kit)
    assert await titles(kit) == [FIRST]
    assert kit.agent.usage().requests == 1
    assert kit.values.budget[-1].startswith("Today: 1 of 1 requests")
    await kit.session.end()


async def test_a_title_the_user_gave_meanwhile_is_kept(tmp_path: Path) -> None:
    persistence = persistence_for(tmp_path, ScriptedModel(["Week plan"]))
    kit = start(tmp_path, persistent_agent(["Here is your plan."]), persistence=persistence)
    await restored(kit)
    conversation = kit.session.conversation
    assert conversation is not None
    await conversation.keep_async(FIRST)
    assert await conversation.listing.rename(conversation.listing.current, "Mine")
    assert not await conversation.listing.retitle(FIRST, "Week plan")
    link = conversation.listing._link
    listing = await link.run(lambda store: read_listing(store, conversation.listing.key, 0))
    assert [entry.title for entry in listing.entries] == ["Mine"]
    await kit.session.end()


def test_only_the_titles_first_line_is_kept_as_plain_text() -> None:
    assert plain_title("Title: **Dentist on Friday**") == "Dentist on Friday"
    assert plain_title("\n\n  `x\u202e\u0007 y` ") == "x y"
    assert plain_title("a" * 200) == "a" * 59 + "…"
    assert plain_title('""') is None


def test_a_title_model_must_be_a_model(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Cannot use a int as a model"):
        KitPersistence(tmp_path, title_model=3)
