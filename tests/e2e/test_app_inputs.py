"""A tool the app defines sets and reads the app's own inputs, where the chat sits.

Core and Express, a chat in the app itself and one inside a module of the app's own;
sync tools (worker threads) and async ones (the event loop), with and without
``session=``. The browser's inputs change, and so does the output the app's server
renders from them; the inputs of the other place on the page stay as they were.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.apps._app_inputs import SPECIES
from tests.e2e.conftest import AppServer, open_chat

E2E_APPS = ("app_inputs.py", "express_inputs.py")

START = "species=setosa colour=red region=North size=10"
# kind, how, species, colour, region, size: each call changes every input
CALLS = [
    ("sync", "explicit", "versicolor+virginica", "blue", "West", 40),
    ("sync", "implicit", "setosa+virginica", "green", "East", 70),
    ("async", "explicit", "versicolor", "red", "South", 20),
    ("async", "implicit", "setosa+versicolor", "blue", "North", 90),
]


@pytest.mark.parametrize(
    ("app_file", "where"),
    [
        ("app_inputs.py", ""),
        ("app_inputs.py", "panel-"),
        ("express_inputs.py", ""),
        ("express_inputs.py", "panel-"),
    ],
    ids=["core", "core-module", "express", "express-module"],
)
def test_a_tool_sets_and_reads_the_apps_inputs(
    page: Page, serve_app: Callable[..., AppServer], app_file: str, where: str
) -> None:
    chat = open_chat(page, serve_app(app_file), f"{where}chat")
    summary = page.locator(f"#{where}summary")
    expect(summary).to_have_text(START)
    for kind, how, species, colour, region, size in CALLS:
        chat.send(f"set {kind} {how} {species} {colour} {region} {size}")
        done = f"set {species} {colour} {region} {size}"
        chat.expect_latest_reply(f"Done: {done}")
        expect(page.locator(".shiny-notification", has_text=f"Notified: {done}")).to_be_visible()
        shown = f"species={species} colour={colour} region={region} size={size}"
        expect(summary).to_have_text(shown)  # the app's own output reacted
        for name in SPECIES:
            box = page.locator(f"#{where}species input[value={name}]")
            expect(box).to_be_checked(checked=name in species.split("+"))
        expect(page.locator(f"#{where}colour input[value={colour}]")).to_be_checked()
        expect(page.locator(f"#{where}region")).to_have_value(region)
        expect(page.locator(f"#{where}size")).to_have_value(str(size))
        if how == "implicit":  # read back, with no reactive.isolate() in the tool
            chat.send(f"read {kind}")
            chat.expect_latest_reply(f"Done: {shown}")
        chat.expect_idle()
    other = "panel-" if where == "" else ""
    expect(page.locator(f"#{other}summary")).to_have_text(START)


def test_a_shared_tool_sets_only_the_calling_sessions_input(
    new_page: Callable[[], Page], serve_app: Callable[..., AppServer]
) -> None:
    app = serve_app("app_inputs.py")
    mine, theirs = new_page(), new_page()  # two users, each their own session
    chat = open_chat(mine, app, "chat")
    open_chat(theirs, app, "chat")
    chat.send("region East")
    chat.expect_latest_reply("Done: region East")
    expect(mine.locator("#summary")).to_have_text(START.replace("North", "East"))
    chat.expect_idle()
    expect(theirs.locator("#summary")).to_have_text(START)  # the other user's is untouched
    expect(mine.locator("#panel-summary")).to_have_text(START)  # and so is the module's
