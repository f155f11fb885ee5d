"""The conversation panel: "New conversation", "Download" and "Rewind files", for one chat.

"Rewind files" lists the agent's file checkpoints (one is made as each run starts,
with ``Agent(enable_file_checkpointing=True)``) of the runs that changed files (and any
made by hand), the newest few first and the rest behind "more"; with checkpoints off the
section is not shown. Its Rewind button asks
the user to confirm, then restores the files ``write_file``, ``edit_file`` and
``multi_edit`` changed since then (:meth:`~deputy_shiny.agent.Agent.rewind_files`). The
conversation itself does not change. "New conversation" asks too, then starts over
(:meth:`AgentChatHandle.new_conversation`). "Download" gives the conversation as the
agent has it, as Markdown or JSON (:meth:`AgentChatHandle.conversation_markdown`,
:meth:`AgentChatHandle.conversation_json`): nothing in either is markup from the model.

The two download buttons are plain buttons, not Shiny outputs (``render.download_button``
makes an output, an effect and a URL for each, at every session's start). A click asks
this session over its own websocket (``Shiny.shinyapp.makeRequest``, from the kit's
script; ``session.set_message_handler`` on the server), and the answer is the file
itself, built then from the agent's turns; the script saves it as a download. No URL
serves a conversation, so only this session's page gets it: another session's user has
no route to ask, not even with this session's id.

Confirmations queue with the session's other prompts (one modal at a time) and are
awaited in a task of the session's own, never in a reactive effect (Shiny has one
reactive lock for the whole process). A forged input naming a checkpoint this agent
does not have is refused by the agent.

Examples:
    >>> from deputy_shiny.shiny import conversation_panel_ui
    >>> "deputy-conversation-panel" in str(conversation_panel_ui("history"))
    True
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from htmltools import Tag, TagList, tags
from shiny import reactive, render, ui
from shiny.module import resolve_id

from ..errors import DeputyError
from ..persistence.checkpoints import FileCheckpoint
from . import _module as kit_module
from ._chat_module import AgentChatHandle

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["conversation_panel_server", "conversation_panel_ui"]

logger = logging.getLogger(__name__)

MAX_SHOWN = 20
"""Checkpoints listed at most (the newest)."""
SHOWN_FIRST = 5
"""Checkpoints shown before the rest fold under "more"."""

DOWNLOADS: dict[str, tuple[str, str]] = {
    "markdown": ("md", "text/markdown"),
    "json": ("json", "application/json"),
}
"""The download formats: the button's name -> (file extension, media type)."""


def _download_button(kind: str, label: str) -> Tag:
    # A plain button, not an output: the kit's script asks this session for the file.
    return tags.button(
        label,
        type="button",
        id=resolve_id(f"download_{kind}"),
        class_=f"btn btn-sm btn-outline-secondary deputy-download-{kind}",
        data_deputy_download=kind,
        data_method=resolve_id("download"),
    )


@kit_module.ui
def conversation_panel_ui() -> Tag:
    """The panel's buttons and checkpoint list, for :func:`conversation_panel_server`."""
    return tags.div(
        ui.input_action_button(
            "new", "New conversation", class_="btn-sm btn-outline-primary deputy-new-conversation"
        ),
        tags.div(
            tags.span("Download conversation", class_="deputy-muted"),
            _download_button("markdown", "Markdown"),
            _download_button("json", "JSON"),
            class_="deputy-download-conversation",
        ),
        # The "Rewind files" heading comes with the list: no section where the agent
        # keeps no checkpoints.
        ui.output_ui("checkpoints"),
        class_="deputy-conversation-panel",
    )


def _label(checkpoint: FileCheckpoint, number: int) -> str:
    name = checkpoint.name or (f"Start of run {number}" if checkpoint.run_id else "Checkpoint")
    return f"{name} · {time.strftime('%H:%M:%S', time.localtime(checkpoint.created_at))}"


def _changes(count: int) -> str:
    return (
        "no file changes after it"
        if count == 0
        else ("1 file change after it" if count == 1 else f"{count} file changes after it")
    )


def checkpoint_rows(checkpoints: list[FileCheckpoint], input_id: str, busy: bool) -> TagList:
    """The list: the runs that changed files (and checkpoints made by hand), newest
    first, with a Rewind button each (off while the agent works); past
    :data:`SHOWN_FIRST`, the older ones fold under "more".

    Examples:
        >>> cp = FileCheckpoint(id="cp_1", created_at=0.0, run_id="run_1", changes=2)
        >>> quiet = FileCheckpoint(id="cp_2", created_at=1.0, run_id="run_2", changes=0)
        >>> html = str(checkpoint_rows([cp, quiet], "history-rewind", False))
        >>> "2 file changes after it" in html, "cp_2" in html
        (True, False)
    """
    numbered = [
        (number, checkpoint)
        for number, checkpoint in enumerate(checkpoints, start=1)
        if checkpoint.changes > 0 or checkpoint.run_id is None
    ]
    if not numbered:
        return TagList(
            _REWIND_HEADING,
            tags.p(
                "No file changes to rewind: each run that changes files is listed here.",
                class_="deputy-muted deputy-hint deputy-no-checkpoints",
            ),
        )
    rows = [
        _checkpoint_row(checkpoint, number, checkpoints, input_id, busy)
        for number, checkpoint in reversed(numbered[-MAX_SHOWN:])
    ]
    listed = TagList(_REWIND_HEADING, tags.ul(*rows[:SHOWN_FIRST], class_=_LIST_CLASS))
    if rows[SHOWN_FIRST:]:
        more = rows[SHOWN_FIRST:]
        listed.append(
            tags.details(
                tags.summary(f"{len(more)} more", class_="deputy-muted"),
                tags.ul(*more, class_=_LIST_CLASS),
                class_="deputy-more-checkpoints",
            )
        )
    return listed


def rewind_section(agent: Agent | None, input_id: str, busy: bool) -> TagList:
    """The "Rewind files" section for ``agent``: nothing at all when it keeps no file
    checkpoints (an app that never asked for them sees no section saying they are off).

    Examples:
        >>> from deputy_shiny import Agent
        >>> str(rewind_section(Agent("deputy/demo"), "history-rewind", False))
        ''
    """
    if agent is None or agent.file_checkpoints is None:
        return TagList()
    return checkpoint_rows(agent.list_checkpoints(), input_id, busy)


_REWIND_HEADING = tags.h3("Rewind files", class_="deputy-subsection-title")
_LIST_CLASS = "list-unstyled deputy-checkpoints"


def _checkpoint_row(
    checkpoint: FileCheckpoint,
    number: int,
    checkpoints: list[FileCheckpoint],
    input_id: str,
    busy: bool,
) -> Tag:
    later = sum(c.changes for c in checkpoints[number - 1 :])
    return tags.li(
        tags.div(_label(checkpoint, number), class_="deputy-checkpoint-label"),
        tags.div(_changes(later), class_="deputy-muted deputy-checkpoint-changes"),
        tags.button(
            "Rewind",
            type="button",
            class_="btn btn-sm btn-outline-danger deputy-rewind",
            disabled=busy or later == 0,
            data_deputy_rewind=checkpoint.id,
            data_input=input_id,
        ),
        class_="deputy-checkpoint",
        data_checkpoint=checkpoint.id,
    )


def _filename(extension: str) -> str:
    """``conversation-<local time>.<extension>``: a name no user input reaches."""
    return f"conversation-{time.strftime('%Y%m%d-%H%M%S')}.{extension}"


def download_file(handle: AgentChatHandle, kind: object) -> dict[str, str]:
    """The file a download button asks for (``kind``: ``"markdown"`` or ``"json"``):
    its name, media type and text, built now from the agent's turns.

    Examples:
        >>> from deputy_shiny.shiny import AgentChatHandle
        >>> empty = AgentChatHandle(None, None, None, None, None, None, None)  # no agent
        >>> file = download_file(empty, "markdown")
        >>> file["text"], file["media_type"], file["filename"].endswith(".md")
        ('# Conversation\\n', 'text/markdown', True)
    """
    if not isinstance(kind, str) or kind not in DOWNLOADS:
        raise ValueError("unknown download format")
    extension, media_type = DOWNLOADS[kind]
    text = handle.conversation_markdown() if kind == "markdown" else handle.conversation_json()
    return {"filename": _filename(extension), "media_type": media_type, "text": text}


@kit_module.server
def conversation_panel_server(
    input: Any, output: Any, session: Any, handle: AgentChatHandle
) -> None:
    """Serve the panel for the chat whose ``handle`` ``agent_chat_server`` returned.

    Examples:
        >>> from shiny import App, ui
        >>> from deputy_shiny import Agent
        >>> from deputy_shiny.shiny import (agent_chat_server, agent_chat_ui,
        ...     conversation_panel_server, conversation_panel_ui)
        >>> def server(input, output, session):
        ...     handle = agent_chat_server("chat", lambda ctx: Agent("deputy/demo",
        ...         working_dir=ctx.working_dir, enable_file_checkpointing=True))
        ...     conversation_panel_server("history", handle)
        >>> app = App(ui.page_sidebar(ui.sidebar(conversation_panel_ui("history")),
        ...     agent_chat_ui("chat")), server)
    """
    if session.is_stub_session():
        return
    input_id = session.ns("rewind")
    changed = reactive.value(0, name="deputy_conversation_changed")
    tasks: set[asyncio.Task[Any]] = set()

    def spawn(work: Any) -> None:
        # The confirmation waits for the user: in a task, not in the effect (the lock).
        task = asyncio.get_running_loop().create_task(work)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def bump() -> None:
        async with reactive.lock():
            changed.set(changed() + 1)
            await reactive.flush()

    @render.ui
    def checkpoints() -> TagList:
        handle.tool_events()
        busy = handle.running()
        changed()
        return rewind_section(handle.agent, input_id, busy)

    # The file is built when the browser asks for it (a request over this session's own
    # websocket: no URL serves it), from the agent's turns, never from the page. Shiny
    # runs the handler under its reactive lock, so it only builds the text (no await).
    session.set_message_handler("download", lambda kind: download_file(handle, kind))

    async def rewind(checkpoint_id: str) -> None:
        confirmed = await handle.confirm(
            "Rewind files?",
            "The files the agent wrote or edited since this checkpoint go back to how "
            "they were then (files it created are deleted), and later checkpoints are "
            "dropped. The conversation stays as it is.",
            "Rewind",
        )
        if not confirmed:
            return
        try:
            result = await handle.rewind_files(checkpoint_id)
        except DeputyError as exc:
            logger.warning("rewind refused: %s", exc)
            ui.notification_show(f"Rewind refused: {exc}", type="error", duration=8)
        else:
            count = result.restored_changes
            ui.notification_show(
                f"Rewound: {count} file change{'' if count == 1 else 's'} undone.", duration=5
            )
        await bump()

    async def start_new() -> None:
        confirmed = await handle.confirm(
            "Start a new conversation?",
            "This one stays in your conversations (the history drawer), with its files."
            if handle.persistent
            else "The chat and its file checkpoints are cleared, and this session's "
            "workspace and its files are deleted.",
            "Start anew",
        )
        if confirmed:
            await handle.new_conversation()

    @reactive.effect
    @reactive.event(input.rewind)  # no ignore_init: see _prompts.session_prompts
    def _rewind() -> None:
        value = input.rewind()
        checkpoint_id = value.get("checkpoint_id") if isinstance(value, dict) else None
        if isinstance(checkpoint_id, str) and checkpoint_id:
            spawn(rewind(checkpoint_id))

    @reactive.effect
    @reactive.event(input.new, ignore_init=True)
    def _new() -> None:
        if handle.running():
            ui.notification_show("The agent is working: stop it first.", duration=5)
            return
        spawn(start_new())

    def _end() -> None:
        for task in list(tasks):
            task.cancel()

    session.on_ended(_end)
