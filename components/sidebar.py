"""The app's sidebar: model in use, permission mode, workspace files, conversation
(new conversation, rewind files), usage, team.

It only lays out the pieces; each has its own module (:mod:`components.model_choice`,
:mod:`components.workspace`, :mod:`components.usage_meter`, and the kit's permission
mode switcher and subagent panel). On a phone the sidebar folds away behind a toggle
above the chat.

Examples:
    >>> from components.model_choice import ModelChoice
    >>> demo = ModelChoice("deputy/demo", "deputy/demo", True)
    >>> html = str(ui.page_sidebar(app_sidebar(demo), "main"))
    >>> sections = ["Model", "Permission mode", "Workspace", "Conversation", "Usage", "Team"]
    >>> all(s in html for s in sections)
    True
"""

from __future__ import annotations

from collections.abc import Callable

from htmltools import Tag, TagChild, TagList, tags
from shiny import Inputs, Outputs, Session, module, render, ui

from components.model_choice import ModelChoice, model_summary
from components.usage_meter import usage_meter_ui
from components.workspace import workspace_ui
from deputy_shiny.shiny import _module as kit_module
from deputy_shiny.shiny import (
    conversation_panel_ui,
    mcp_panel_ui,
    permission_mode_ui,
    subagent_panel_ui,
)

__all__ = ["app_sidebar", "model_section_server", "model_section_ui", "show_not_saved"]

SAVED_HINT_ID = "deputy-saved-hint"
NOT_SAVED_HINT = (
    "Not saved: this conversation ends with the page (the chat says why). Rewind puts "
    "the files the agent wrote back as they were when that run started."
)


def _section(title: str, *children: TagChild, class_: str = "") -> Tag:
    return tags.section(
        tags.h2(title, class_="deputy-section-title"),
        *children,
        class_=f"deputy-section {class_}".strip(),
    )


@kit_module.ui
def model_section_ui(initial: ModelChoice, live: bool = True) -> Tag:
    """The model in use; ``initial`` is shown until the server renders (and without JS).

    ``live=False`` (the model check has settled): plain markup, no output to follow.
    """
    if not live:
        return tags.div(*model_summary(initial), id=module.resolve_id("info"))
    placeholder = ui.output_ui("info")
    placeholder.children.extend(model_summary(initial))
    return placeholder


@kit_module.server
def model_section_server(
    input: Inputs, output: Outputs, session: Session, choice: Callable[[], ModelChoice]
) -> None:
    """Keep the model section in step with the session's model choice."""

    @render.ui
    def info() -> TagList:
        return model_summary(choice())


def _shell_note(bash_unavailable: str | None) -> Tag:
    if bash_unavailable:
        return tags.p(
            "Shell commands are off on this server: they run only inside a sandbox, and "
            "bubblewrap is not available here (apt-get install bubblewrap).",
            class_="deputy-muted deputy-hint deputy-shell-off",
        )
    return tags.p(
        "Shell commands run in a sandbox: this session's workspace only, no network, "
        "none of the server's secrets.",
        class_="deputy-muted deputy-hint deputy-shell-on",
    )


def app_sidebar(
    initial: ModelChoice,
    bash_unavailable: str | None = None,
    mcp: bool = False,
    live_model: bool = True,
) -> ui.Sidebar:
    """The sidebar, with ``initial`` as the model shown before the server renders.

    ``bash_unavailable`` is why the app left shell commands out (None: they are on);
    ``mcp`` adds the MCP servers panel (the app has an MCP config); ``live_model=False``
    shows ``initial`` as final (the model check has settled).
    """
    return ui.sidebar(
        _section(
            "Model", model_section_ui("model", initial, live=live_model), class_="deputy-model"
        ),
        tags.section(
            permission_mode_ui("mode"),
            tags.p(
                "Standard: writes and shell commands ask you first. Read-only refuses "
                "them. A mode can only be narrowed, from the next tool call on.",
                class_="deputy-muted deputy-hint",
            ),
            _shell_note(bash_unavailable),
            class_="deputy-section deputy-mode",
        ),
        _section("Workspace", workspace_ui("workspace"), class_="deputy-workspace-section"),
        _section(
            "Conversation",
            conversation_panel_ui("conversation"),
            tags.p(
                "Saved as you go: a reload brings it back. Rewind puts the files the agent "
                "wrote back as they were when that run started.",
                id=SAVED_HINT_ID,
                class_="deputy-muted deputy-hint",
            ),
            class_="deputy-conversation-section",
        ),
        _section("Usage", usage_meter_ui("usage")),
        _section(
            "Team",
            subagent_panel_ui("team"),
            tags.p(
                "The agent's subagents (a researcher and a writer) at work: only you see "
                "them here.",
                class_="deputy-muted deputy-hint",
            ),
            class_="deputy-team-section",
        ),
        _section("MCP servers", mcp_panel_ui("mcp"), class_="deputy-mcp-section") if mcp else None,
        id="sidebar",
        width=350,
        open="desktop",
        class_="deputy-sidebar",
        gap="1.25rem",
    )


def show_not_saved() -> None:
    """Replace the Conversation section's "Saved as you go" with the truth for a session
    whose conversation is not saved (an anonymous visitor on Connect, a blocked cookie).

    The page is the same for every visitor; only the session knows, so its server sends
    this one change, and only when it applies (a saved session pays nothing).
    """
    ui.insert_ui(
        tags.p(NOT_SAVED_HINT, class_="deputy-muted deputy-hint deputy-not-saved-hint"),
        selector=f"#{SAVED_HINT_ID}",
        where="afterEnd",
        immediate=True,
    )
    ui.remove_ui(f"#{SAVED_HINT_ID}", immediate=True)
