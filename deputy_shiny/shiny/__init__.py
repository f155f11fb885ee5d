"""The Shiny kit: one governed Agent per browser session behind a streaming chat.

Importing this module imports shiny and shinychat; the runtime (``deputy_shiny``)
never does.

Examples:
    >>> from deputy_shiny.shiny import agent_chat_server, agent_chat_ui
    >>> agent_chat_ui("assistant").get_html_string().count("assistant-chat") > 0
    True
"""

from ._approval_review import ApprovalReview, approval_review_server, approval_review_ui
from ._attachments import AttachmentPolicy
from ._budget import DailyAllowance, UserBudget
from ._chat_module import AgentChatContext, AgentChatHandle, agent_chat_server, agent_chat_ui
from ._conversation_panel import conversation_panel_server, conversation_panel_ui
from ._conversations import KitPersistence
from ._identity import on_posit_connect, trusted_session_user
from ._image_guard import ImageGuard
from ._inert_stream import inert_stream
from ._mcp_panel import mcp_panel_server, mcp_panel_ui
from ._mcp_session import McpServerState, McpServerView, SessionMcp
from ._mode import allowed_modes, permission_mode_server, permission_mode_ui
from ._render import render_events
from ._source_refs import install as _install_source_refs
from ._strings import KitStrings
from ._subagent_panel import subagent_panel_server, subagent_panel_ui

# shiny reads each reactive function's source for its spans as the function's Calc,
# Effect or renderer is made: once per code object, not once per session (_source_refs).
_install_source_refs()

__all__ = [
    "AgentChatContext",
    "AgentChatHandle",
    "ApprovalReview",
    "AttachmentPolicy",
    "DailyAllowance",
    "ImageGuard",
    "KitPersistence",
    "KitStrings",
    "McpServerState",
    "McpServerView",
    "SessionMcp",
    "UserBudget",
    "agent_chat_server",
    "agent_chat_ui",
    "allowed_modes",
    "approval_review_server",
    "approval_review_ui",
    "conversation_panel_server",
    "conversation_panel_ui",
    "inert_stream",
    "mcp_panel_server",
    "mcp_panel_ui",
    "on_posit_connect",
    "permission_mode_server",
    "permission_mode_ui",
    "render_events",
    "subagent_panel_server",
    "subagent_panel_ui",
    "trusted_session_user",
]
