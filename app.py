"""The reference deputy_shiny chat app (deployable to Posit Connect as is).

Run it with ``./scripts/run-app``. The model comes from ``DEPUTY_MODEL`` (any litellm
model string, with the provider's usual API key variable); without it the app runs on
the offline demo model ``deputy/demo`` and says so in a banner.
"""

from __future__ import annotations

import threading
from pathlib import Path

from shiny import App, Inputs, Outputs, Session, ui
from shinychat import Chat, chat_ui

from components.model_choice import chosen_model
from deputy_shiny import DEMO_MODEL, Agent, warm_up

MODEL = chosen_model()
SYSTEM_PROMPT = "You are a helpful assistant in a Shiny app. Answer clearly and briefly."

# litellm takes seconds to import: pay it once, in a worker thread, at app start,
# so no session pays it on the event loop.
threading.Thread(target=warm_up, name="litellm-warm-up", daemon=True).start()


def _banner() -> ui.Tag | None:
    if MODEL != DEMO_MODEL:
        return None
    return ui.div(
        ui.strong("Offline demo model. "),
        "Replies are scripted, not from an LLM. Set DEPUTY_MODEL (and the provider's API "
        "key) to chat with a real model.",
        class_="alert alert-info deputy-banner",
        role="status",
    )


app_ui = ui.page_fillable(
    ui.head_content(ui.include_css(Path(__file__).parent / "www" / "app.css")),
    _banner(),
    chat_ui("chat", enable_cancel=True, placeholder="Ask the agent something"),
    title="deputy_shiny",
)


def server(input: Inputs, output: Outputs, session: Session) -> None:
    agent = Agent(MODEL, system_prompt=SYSTEM_PROMPT)
    chat = Chat("chat", history=False)

    @chat.on_user_submit
    async def _(user_input: str) -> None:
        await chat.append_message_stream(agent.stream_async(user_input))


app = App(app_ui, server, static_assets=Path(__file__).parent / "www")
