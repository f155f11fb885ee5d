"""The MCP panel: the app's configured servers, their state in this session, and
connect / disconnect buttons.

Each row shows a server's state (not connected, connecting, connected, failed,
closed), how many of its tools the session's agent has, the tools refused because the
agent already had a tool by that name, and the last error. The
buttons act on this session's connections only (``handle.mcp``); a click starts the
connection in a task, so no reactive effect ever waits for a server.

Examples:
    >>> from deputy_shiny.shiny import mcp_panel_ui
    >>> "deputy-mcp-panel" in str(mcp_panel_ui("mcp"))
    True
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from htmltools import Tag, TagList, tags
from shiny import reactive, render, ui

from ..errors import McpError
from . import _module as kit_module
from ._chat_module import AgentChatHandle, kit_dependency
from ._mcp_session import McpServerView
from ._strings import DEFAULT_STRINGS, KitStrings

__all__ = ["mcp_panel_server", "mcp_panel_ui"]

logger = logging.getLogger(__name__)

_STATE_CLASS = {
    "connected": "text-bg-success",
    "connecting": "text-bg-info",
    "failed": "text-bg-danger",
}


@kit_module.ui
def mcp_panel_ui() -> TagList:
    """The panel's place on the page (filled in by :func:`mcp_panel_server`)."""
    return TagList(kit_dependency(), ui.div(ui.output_ui("servers"), class_="deputy-mcp-panel"))


def _row(view: McpServerView, input_id: str, strings: KitStrings = DEFAULT_STRINGS) -> Tag:
    busy = view.state == "connecting"
    action = "disconnect" if view.state == "connected" else "connect"
    button = tags.button(
        strings.mcp_disconnect if action == "disconnect" else strings.mcp_connect,
        type="button",
        class_="btn btn-sm btn-outline-secondary deputy-mcp-button",
        data_deputy_mcp=action,
        data_server=view.server,
        data_input=input_id,
    )
    if busy:
        button.attrs["disabled"] = "disabled"
    state = tags.span(
        strings.state_word(view.state),
        class_=f"badge {_STATE_CLASS.get(view.state, 'text-bg-secondary')} deputy-mcp-state",
    )
    tools = strings.format("mcp_tools", count=view.tools)
    details = [tags.span(tools, class_="deputy-mcp-tools text-muted small")]
    if view.refused:
        # Text children: htmltools escapes them (tool names come from the server).
        details.append(
            tags.div(
                strings.format("mcp_refused", names=", ".join(view.refused)),
                class_="deputy-mcp-refused text-warning-emphasis small",
            )
        )
    if view.error:
        details.append(tags.div(view.error, class_="deputy-mcp-error text-danger small"))
    return tags.div(
        tags.div(tags.strong(view.server, class_="deputy-mcp-name"), state, class_="d-flex gap-2"),
        *details,
        button,
        class_="deputy-mcp-server mb-2",
        data_server=view.server,
    )


@kit_module.server
def mcp_panel_server(input: Any, output: Any, session: Any, handle: AgentChatHandle) -> None:
    """Show ``handle.mcp``'s servers and connect or disconnect them on click."""
    mcp = handle.mcp
    input_id = session.ns("action")
    tasks: set[asyncio.Task[Any]] = set()

    @render.ui
    def servers() -> Tag:
        mcp.version()  # re-render whenever a connection changes
        views = mcp.views()
        if not views:
            return tags.p(handle.strings.mcp_none, class_="text-muted small")
        return tags.div(*[_row(view, input_id, handle.strings) for view in views])

    async def act(server: str, action: str) -> None:
        try:
            if action == "connect":
                await mcp.connect(server)
            else:
                await mcp.disconnect(server)
        except McpError:
            pass  # the panel shows the failure, and the chat was told
        except Exception:
            logger.warning("MCP panel: %s %r failed", action, server, exc_info=True)

    @reactive.effect
    @reactive.event(input.action)  # no ignore_init: see _prompts.session_prompts
    def _clicked() -> None:
        value = input.action()
        if not isinstance(value, dict):
            return
        server, action = value.get("server"), value.get("action")
        # Only this app's configured servers, only these two actions: a forged value
        # from the browser changes nothing.
        if server not in mcp.configured or action not in ("connect", "disconnect"):
            return
        task = asyncio.get_running_loop().create_task(act(server, action))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
