"""The kit's Playwright controllers, re-exported from :mod:`deputy_shiny.shiny.playwright`.

Example:
    >>> from deputy_shiny.playwright import AgentChat
    >>> from deputy_shiny.shiny.playwright import AgentChat as Same
    >>> AgentChat is Same
    True
"""

from .shiny.playwright import (
    AgentChat,
    ApprovalModal,
    ArgumentValue,
    ConversationPanel,
    QuestionModal,
    SubagentPanel,
)

__all__ = [
    "AgentChat",
    "ApprovalModal",
    "ArgumentValue",
    "ConversationPanel",
    "QuestionModal",
    "SubagentPanel",
]
