"""The values MCP calls return: load records, catalogue pages, prompt messages.

Frozen pydantic models, so a list of them turns into a table with
``pandas.DataFrame([r.model_dump() for r in records])``.

Examples:
    >>> McpPage(kind="resources", items=({"uri": "notes://1"},), next_cursor="2").next_cursor
    '2'
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["McpLoadRecord", "McpLoadStatus", "McpPage", "McpPromptMessage"]

McpLoadStatus = Literal["connected", "empty", "failed", "unavailable"]
"""How a load went: tools loaded, none offered, something failed, or nothing configured."""


class McpLoadRecord(BaseModel):
    """One ``agent.load_mcp()`` call, as ``agent.mcp_status()`` lists it.

    Examples:
        >>> from datetime import datetime, timezone
        >>> McpLoadRecord(status="empty", config=None, servers=("time",), tools=(),
        ...               loaded_at=datetime.now(timezone.utc)).status
        'empty'
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    status: McpLoadStatus = Field(
        description="connected (tools loaded), empty (the servers offer none), failed (see "
        "error; tools that did load stay), or unavailable (no config or no servers)."
    )
    config: str | None = Field(description="The config file read (None: given in code).")
    servers: tuple[str, ...] = Field(description="The servers this call loaded from.")
    tools: tuple[str, ...] = Field(description="The tools it registered.")
    loaded_at: datetime = Field(description="When the call finished (UTC).")
    error: str | None = Field(default=None, description="What went wrong, if anything.")


class McpPage(BaseModel):
    """One page of a server's catalogue (``McpConnection.discover``) and the next cursor.

    Examples:
        >>> McpPage(kind="tools", items=()).next_cursor is None
        True
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    kind: Literal["tools", "resources", "prompts"]
    items: tuple[dict[str, Any], ...] = Field(
        description="The entries as the server describes them (name, uri, description...)."
    )
    next_cursor: str | None = Field(default=None, description="Pass to get the next page.")


class McpPromptMessage(BaseModel):
    """One message of a prompt a server returned (``McpConnection.get_prompt``).

    Examples:
        >>> McpPromptMessage(role="user", text="Summarize the report.").role
        'user'
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    role: Literal["user", "assistant"]
    text: str
