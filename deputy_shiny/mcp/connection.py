"""McpConnection: one agent's own connection to one configured MCP server.

Its allowlists of tools, resources and prompts are fixed when it opens: the tools,
the capability tools (``read_resource``, ``get_prompt``) and every host call are
limited to them, and discovery only reports what else exists. Its tools carry the
connection id (``tool_metadata(t)["source"]["connection_id"]``) and belong to the
agent: registering them with another agent or session fails.

The connection is served by one owner task on the MCP loop; it serves one request at
a time (an overlapping one fails with :class:`~deputy_shiny.errors.McpBusyError`), and
a request that outlives its timeout, or finds the server gone, closes it for good.
It closes with :meth:`McpConnection.close`, with its agent (``agent.close()``), when
it is garbage collected, and at exit; it never reconnects by itself.

Examples:
    >>> from mcp.server.mcpserver import MCPServer
    >>> from deputy_shiny import Agent
    >>> from deputy_shiny.mcp import McpConfig, McpInProcessServer
    >>> from deputy_shiny.testing import ScriptedModel
    >>> server = MCPServer("notes")
    >>> @server.tool()
    ... def count_notes() -> int:
    ...     "How many notes there are."
    ...     return 3
    >>> config = McpConfig(servers={"notes": McpInProcessServer(name="notes", server=server)})
    >>> agent = Agent(ScriptedModel([]))
    >>> connection = McpConnection(config, "notes", agent, tools=["count_notes"])
    >>> [t.name for t in connection.tools()], connection.status
    (['count_notes'], 'connected')
    >>> connection.close(); connection.status
    'closed'
"""

from __future__ import annotations

import asyncio
import uuid
import warnings
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

from .._util.sync import ensure_no_running_loop
from ..errors import ConfigurationError, McpError, ToolInvocationError
from ..tools import Tool, ToolSource, ToolState, tool_annotations
from ._convert import RejectedTool, ToolBinding, content_text, convert_tool, resource_text
from ._loop import block_on_mcp_loop, on_loop, on_mcp_thread, submit
from ._owner import McpStatus, SessionOwner
from .config import ConfigInput, McpServerConfig, load_mcp_config
from .records import McpPage, McpPromptMessage

__all__ = ["McpConnection", "McpOwnerAgent"]

T = TypeVar("T")

CatalogueKind = Literal["tools", "resources", "prompts"]

_MAX_TOOL_PAGES = 100
_CLOSE_WAIT = 15.0

_CAPABILITY_ANNOTATIONS = tool_annotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=True, idempotent_hint=True
)


class McpOwnerAgent(Protocol):
    """What a connection needs of its agent (an :class:`~deputy_shiny.Agent` has it)."""

    @property
    def agent_id(self) -> str: ...

    @property
    def session_id(self) -> str: ...

    @property
    def tool_state(self) -> ToolState: ...


class McpConnection:
    """A connection to one configured MCP server, owned by one agent (see the module doc).

    ``McpConnection(...)`` connects and blocks (scripts); in async code use
    ``await McpConnection.open(...)`` with the same arguments.

    Args:
        config: The MCP config (path, dict, :class:`McpConfig`; None: the default file).
        server: The exact configured server name (checked before connecting).
        agent: The agent whose tools these are; they refuse to register elsewhere.
        tools: The exact tool names allowed; fixed.
        resources: The exact resource URIs allowed; fixed.
        prompts: The exact prompt names allowed; fixed.
        timeout: Seconds for startup and each request (default: the config's).

    Raises:
        McpConfigError: malformed config; McpUnknownServerError: no such server.
        McpConnectionError: the server could not start.
        McpError: an allowlisted tool is not offered by the server.
    """

    def __init__(
        self,
        config: ConfigInput,
        server: str,
        agent: McpOwnerAgent,
        *,
        tools: Sequence[str] = (),
        resources: Sequence[str] = (),
        prompts: Sequence[str] = (),
        timeout: float | None = None,
    ) -> None:
        ensure_no_running_loop("McpConnection")
        self._setup(load_mcp_config(config).server(server), agent, tools, resources, prompts)
        block_on_mcp_loop(self._connect(timeout), "McpConnection")

    @classmethod
    async def open(
        cls,
        config: ConfigInput,
        server: str,
        agent: McpOwnerAgent,
        *,
        tools: Sequence[str] = (),
        resources: Sequence[str] = (),
        prompts: Sequence[str] = (),
        timeout: float | None = None,  # noqa: ASYNC109 (the connection's limit, not this call's)
        loop: OwnerLoop = "mcp",
    ) -> McpConnection:
        """Connect without blocking the event loop; the arguments are the constructor's.

        ``loop`` is where the connection's owner task lives: ``"mcp"`` (the default) on
        the process-wide MCP loop thread, so the connection outlives the caller's loop
        (scripts that call ``asyncio.run`` more than once); ``"current"`` on the
        caller's loop, for apps whose loop outlives the connection (a Shiny app): each
        call then skips a hop between threads.
        """
        self = cls.__new__(cls)
        self._setup(load_mcp_config(config).server(server), agent, tools, resources, prompts)
        self._home = _home(loop)
        await on_loop(self._connect(timeout), self._home)
        return self

    @classmethod
    async def open_all_tools(
        cls,
        server: McpServerConfig,
        agent: McpOwnerAgent | None,
        limit: float | None = None,
        loop: OwnerLoop = "mcp",
    ) -> McpConnection:
        """A connection offering every tool the server has (``tools_mcp``, ``load_mcp``,
        the kit); ``loop`` as for :meth:`open`."""
        self = cls.__new__(cls)
        self._setup(server, agent, (), (), ())
        self._all_tools = True
        self._home = _home(loop)
        await on_loop(self._connect(limit), self._home)
        return self

    def _setup(
        self,
        server: McpServerConfig,
        agent: McpOwnerAgent | None,
        tools: Sequence[str],
        resources: Sequence[str],
        prompts: Sequence[str],
    ) -> None:
        if agent is not None and not all(
            hasattr(agent, a) for a in ("agent_id", "session_id", "tool_state")
        ):
            raise ConfigurationError(
                f"agent must be a deputy_shiny Agent, not {type(agent).__name__}."
            )
        self._id = f"mcp_{uuid.uuid4().hex[:16]}"
        self._server = server
        self._agent_id = agent.agent_id if agent is not None else None
        self._session_id = agent.session_id if agent is not None else None
        self._agent_state = agent.tool_state if agent is not None else None
        self._allowed_tools = _names("tools", tools)
        self._resources = _names("resources", resources)
        self._prompts = _names("prompts", prompts)
        self._all_tools = False
        self._home: asyncio.AbstractEventLoop | None = None  # None: the MCP loop
        self._tools: list[Tool] = []
        self._rejected: list[RejectedTool] = []
        self._owner: SessionOwner | None = None

    _connect_mode = "auto"
    """The SDK's connect mode; "legacy" for servers that need ``initialize`` first (mcp-repl)."""

    async def _connect(self, limit: float | None) -> None:
        owner = SessionOwner(self._server, timeout=limit, mode=self._connect_mode)
        await owner.start()
        self._owner = owner
        try:
            if self._all_tools or self._allowed_tools:
                await self._load_tools(owner)
        except BaseException:
            await owner.stop()
            raise
        weakref.finalize(self, owner.stop_soon)
        if self._agent_state is not None:
            self._agent_state.get(self, lambda: _OwnerCloser(owner))

    async def _load_tools(self, owner: SessionOwner) -> None:
        offered: list[Any] = []
        cursor: str | None = None
        for _ in range(_MAX_TOOL_PAGES):
            page = await owner.request("tools/list", _lister(cursor))
            offered.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        names = [getattr(t, "name", None) for t in offered]
        if not self._all_tools:
            missing = [n for n in self._allowed_tools if n not in names]
            if missing:
                raise McpError(
                    f"MCP server {self.server!r} does not offer the tools "
                    f"{', '.join(repr(m) for m in missing)}; it offers: "
                    f"{', '.join(str(n) for n in names) or 'none'}."
                )
            offered = [t for t in offered if t.name in self._allowed_tools]
        binding = ToolBinding(
            server=self.server,
            call=self._call_for_model,
            connection_id=self._id,
            agent_id=self._agent_id,
            session_id=self._session_id,
        )
        for remote in offered:
            converted = convert_tool(remote, binding)
            if isinstance(converted, RejectedTool):
                self._rejected.append(converted)
                warnings.warn(str(converted), UserWarning, stacklevel=2)
            elif any(t.name == converted.name for t in self._tools):
                self._rejected.append(
                    RejectedTool(self.server, converted.name, "the server lists it twice")
                )
            else:
                self._tools.append(converted)

    # ------------------------------------------------------------------ state

    @property
    def id(self) -> str:
        """This connection's id (in its tools' metadata, for permission callbacks and hooks)."""
        return self._id

    @property
    def server(self) -> str:
        """The configured server name."""
        return self._server.name

    @property
    def status(self) -> McpStatus:
        """``connected``, ``failed`` (see :attr:`error`) or ``closed``."""
        return self._live_owner().status

    @property
    def error(self) -> str | None:
        """Why the connection failed, or None."""
        return self._live_owner().error

    @property
    def pid(self) -> int | None:
        """The server process id (stdio servers), else None."""
        return self._live_owner().pid

    @property
    def rejected(self) -> list[RejectedTool]:
        """Server tools that were not converted (malformed name or schema), with reasons."""
        return list(self._rejected)

    def __repr__(self) -> str:
        return f"<McpConnection {self._id} server={self.server!r} status={self.status}>"

    def _live_owner(self) -> SessionOwner:
        assert self._owner is not None, "the connection never opened"
        return self._owner

    # ------------------------------------------------------------------ tools

    def tools(self) -> list[Tool]:
        """The allowlisted tools, ready for ``agent.register_tools``."""
        return list(self._tools)

    def capability_tools(self, prefix: str | None = None) -> list[Tool]:
        """Tools for the model to read the allowlisted resources and get the allowlisted prompts.

        ``read_resource`` (if resources are allowed) and ``get_prompt`` (if prompts are),
        named ``<prefix>_read_resource`` / ``<prefix>_get_prompt`` with a prefix (to tell
        several connections apart). They are read-only and open-world, so they need the
        agent's web capability.
        """
        if prefix is not None and (not isinstance(prefix, str) or not prefix):
            raise ConfigurationError("prefix must be a non-empty string or None.")
        start = f"{prefix}_" if prefix else ""
        made: list[Tool] = []
        if self._resources:
            made.append(self._resource_tool(start + "read_resource"))
        if self._prompts:
            made.append(self._prompt_tool(start + "get_prompt"))
        return made

    def _source(self, remote: str) -> ToolSource:
        return ToolSource(
            type="mcp",
            server=self.server,
            remote_name=remote,
            connection_id=self._id,
            agent_id=self._agent_id,
            session_id=self._session_id,
        )

    def _resource_tool(self, name: str) -> Tool:
        async def read(uri: str) -> str:
            return await self._for_model(self.read_resource(uri))

        schema = {
            "type": "object",
            "properties": {
                "uri": {"type": "string", "enum": list(self._resources), "description": "Which."}
            },
            "required": ["uri"],
        }
        return Tool(
            read,
            name=name,
            description=f"Read a resource of MCP server {self.server!r}.",
            arguments=schema,
            annotations=_CAPABILITY_ANNOTATIONS,
            source=self._source("resources/read"),
        )

    def _prompt_tool(self, name: str) -> Tool:
        async def get(prompt: str, arguments: dict[str, str] | None = None) -> str:
            messages = await self._for_model(self.get_prompt(prompt, arguments))
            return "\n\n".join(f"[{m.role}]\n{m.text}" for m in messages)

        schema = {
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "enum": list(self._prompts)},
                "arguments": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "The prompt's arguments, if it takes any.",
                },
            },
            "required": ["prompt"],
        }
        return Tool(
            get,
            name=name,
            description=f"Get a prompt of MCP server {self.server!r} (its messages, as text).",
            arguments=schema,
            annotations=_CAPABILITY_ANNOTATIONS,
            source=self._source("prompts/get"),
        )

    # ------------------------------------------------------------------ requests

    async def _request(
        self, what: str, send: Callable[[Any], Awaitable[T]], limit: float | None = None
    ) -> T:
        return await on_loop(self._live_owner().request(what, send, limit), self._home)

    async def _for_model(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except McpError as exc:
            raise ToolInvocationError(str(exc)) from exc

    async def _call_for_model(self, name: str, arguments: dict[str, Any]) -> Any:
        return await self._for_model(self.call_tool_result(name, arguments))

    async def call_tool_result(self, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Call an allowlisted tool and return the SDK's ``CallToolResult`` as is."""
        if not any(t.source.remote_name == name for t in self._tools):
            raise McpError(f"Tool {name!r} is not allowed on this connection to {self.server!r}.")
        args = dict(arguments or {})
        return await self._request(f"tools/call {name}", lambda c: c.call_tool(name, args))

    async def read_resource(self, uri: str) -> str:
        """The text of an allowlisted resource (binary parts as placeholders)."""
        if uri not in self._resources:
            raise McpError(
                f"Resource {uri!r} is not allowed on this connection to {self.server!r}; "
                f"allowed: {', '.join(self._resources) or 'none'}."
            )
        result = await self._request(f"resources/read {uri}", lambda c: c.read_resource(uri))
        return "\n".join(resource_text(c) for c in result.contents)

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[McpPromptMessage]:
        """The messages of an allowlisted prompt; nothing is added to any conversation."""
        if name not in self._prompts:
            raise McpError(
                f"Prompt {name!r} is not allowed on this connection to {self.server!r}; "
                f"allowed: {', '.join(self._prompts) or 'none'}."
            )
        args = {str(k): str(v) for k, v in (arguments or {}).items()}
        result = await self._request(
            f"prompts/get {name}", lambda c: c.get_prompt(name, args or None)
        )
        return [
            McpPromptMessage(role=m.role, text=content_text(m.content)) for m in result.messages
        ]

    def get_prompt_sync(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[McpPromptMessage]:
        """Blocking :meth:`get_prompt`, for scripts."""
        return block_on_mcp_loop(self.get_prompt(name, arguments), "get_prompt_sync", self._home)

    async def discover(self, kind: CatalogueKind, cursor: str | None = None) -> McpPage:
        """One page of the server's catalogue of ``kind``; never changes the allowlists.

        Nothing is fetched, retrieved or registered: pass ``page.next_cursor`` back for
        the next page (None: the last one).
        """
        listers: dict[str, Callable[[Any], Awaitable[Any]]] = {
            "tools": lambda c: c.list_tools(cursor=cursor),
            "resources": lambda c: c.list_resources(cursor=cursor),
            "prompts": lambda c: c.list_prompts(cursor=cursor),
        }
        if kind not in listers:
            raise ConfigurationError('kind must be "tools", "resources" or "prompts".')
        result = await self._request(f"{kind}/list", listers[kind])
        entries = getattr(result, kind)
        items = tuple(e.model_dump(mode="json", exclude_none=True) for e in entries)
        return McpPage(kind=kind, items=items, next_cursor=result.next_cursor or None)

    def discover_sync(self, kind: CatalogueKind, cursor: str | None = None) -> McpPage:
        """Blocking :meth:`discover`, for scripts."""
        return block_on_mcp_loop(self.discover(kind, cursor), "discover_sync", self._home)

    # ------------------------------------------------------------------ closing

    async def aclose(self) -> None:
        """Close the connection and stop its server; safe to repeat."""
        if self._owner is not None and not _loop_gone(self._home):
            await on_loop(self._owner.stop(), self._home)

    async def acancel(self) -> None:
        """Cancel the request in progress, close, and discard the server's session state."""
        if self._owner is not None and not _loop_gone(self._home):
            await on_loop(self._owner.cancel(), self._home)

    def close(self) -> None:
        """Blocking :meth:`aclose`; inside a running event loop it only starts closing."""
        if self._owner is not None:
            _close_blocking(self._owner)

    def cancel(self) -> None:
        """Blocking :meth:`acancel`; inside a running event loop it only starts cancelling."""
        if self._owner is not None:
            _close_blocking(self._owner, cancel=True)


class _OwnerCloser:
    """The agent's handle on a connection: ``agent.close()`` closes it (ToolState entry)."""

    def __init__(self, owner: SessionOwner) -> None:
        self._owner = owner

    def close(self) -> None:
        _close_blocking(self._owner)


def _close_blocking(owner: SessionOwner, *, cancel: bool = False) -> None:
    """Close ``owner`` and wait, unless this thread runs an event loop (then: signal only)."""
    home = owner.loop
    if home is None or home.is_closed() or not home.is_running():
        return  # never started, or its loop ended (and took the owner task with it)
    if on_mcp_thread():
        owner.stop_soon()
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        future = submit(owner.cancel() if cancel else owner.stop(), home)
        future.result(timeout=_CLOSE_WAIT)
        return
    if cancel and running is not home:
        submit(owner.cancel(), home)
    else:
        owner.stop_soon()


OwnerLoop = Literal["mcp", "current"]
"""Where a connection's owner task lives: the MCP loop thread, or the caller's loop."""


def _home(loop: OwnerLoop) -> asyncio.AbstractEventLoop | None:
    if loop == "mcp":
        return None
    if loop == "current":
        return asyncio.get_running_loop()
    raise ConfigurationError(f'loop must be "mcp" or "current", not {loop!r}')


def _loop_gone(loop: asyncio.AbstractEventLoop | None) -> bool:
    return loop is not None and (loop.is_closed() or not loop.is_running())


def _names(what: str, names: Sequence[str]) -> tuple[str, ...]:
    if isinstance(names, str):
        names = [names]
    out = tuple(dict.fromkeys(names))
    for name in out:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"{what} must be a list of non-empty names, got {name!r}.")
    return out


def _lister(cursor: str | None) -> Callable[[Any], Awaitable[Any]]:
    return lambda client: client.list_tools(cursor=cursor)
