"""ToolRegistry: the tools an agent has registered, checked as a batch.

An :class:`~deputy_shiny.agent.Agent` keeps its tools here: ordinary tools, which every
call's permission check governs, and provider-native web search, which is authorized
once, at registration (it runs at the provider, where no per-call check can reach).
Whether the agent's model searches natively is the model's answer
(:func:`~deputy_shiny.models.supports_native_web_search`); the registry passes it to
:func:`~deputy_shiny.tools.web.bind_native_web_search`, so tools never probe a model.
The registry also caches the tool schemas the model sees and the request parameters
native tools add.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self

from ..errors import InvalidToolError, PermissionDeniedError, ToolNameConflictError
from ..models import ChatModel, supports_native_web_fetch, supports_native_web_search
from ..permissions import Permissions, native_web_refusal
from ..tools import NativeWebFetch, NativeWebSearch, NativeWebTool, Tool
from ..tools.web import bind_native_web_fetch, bind_native_web_search
from ._guard import Guard

__all__ = ["AgentTools", "ToolMethods", "ToolRegistry"]

_TOOL_NAME_HINT = "Wrap functions with deputy_shiny.tool(fn, description=...) first."

Batch = tuple[dict[str, Tool], dict[str, NativeWebTool]]
ToolSetCheck = Callable[[Mapping[str, Tool], Mapping[str, NativeWebTool]], None]
"""Checks a complete tool set before it replaces the registered one (raises to refuse)."""


class ToolRegistry:
    """The registered tools of one agent, by name.

    Examples:
        >>> from deputy_shiny import ChatModel, Permissions, tool_read_file
        >>> registry = ToolRegistry()
        >>> registry.add([tool_read_file()], Permissions(), model=ChatModel(model="openai/x"))
        >>> sorted(registry.all())
        ['read_file']
    """

    def __init__(self, check: ToolSetCheck | None = None) -> None:
        self.check = check  # e.g. a TrustedResults policy: every change must pass it
        self.tools: dict[str, Tool] = {}
        self.natives: dict[str, NativeWebTool] = {}
        self._schemas: list[dict[str, Any]] | None = None

    def add(
        self,
        items: Iterable[Tool | NativeWebTool],
        permissions: Permissions,
        *,
        model: ChatModel,
        replace: bool = False,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> None:
        """Add a checked batch; a name clash is an error unless ``replace=True``."""
        batch, natives = self.check_batch(
            items, permissions, model=model, agent_id=agent_id, session_id=session_id
        )
        if not replace:
            registered = set(self.tools) | set(self.natives)
            clashes = sorted(name for name in (*batch, *natives) if name in registered)
            if clashes:
                raise ToolNameConflictError(
                    f"Tools already registered: {', '.join(clashes)}. Pass replace=True to "
                    "replace them."
                )
        tools = {n: t for n, t in self.tools.items() if n not in natives}
        tools.update(batch)
        new_natives = {n: t for n, t in self.natives.items() if n not in batch}
        new_natives.update(natives)
        if self.check is not None:
            self.check(tools, new_natives)
        self.tools, self.natives = tools, new_natives
        self._schemas = None

    def replace_all(
        self,
        items: Iterable[Tool | NativeWebTool],
        permissions: Permissions,
        *,
        model: ChatModel,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> None:
        """Replace every registered tool with a checked batch."""
        tools, natives = self.check_batch(
            items, permissions, model=model, agent_id=agent_id, session_id=session_id
        )
        if self.check is not None:
            self.check(tools, natives)
        self.tools, self.natives = tools, natives
        self._schemas = None

    def remove(self, tools: Iterable[Tool]) -> None:
        """Remove these tools (each only while the registered tool of its name is it)."""
        for item in tools:
            if self.tools.get(item.name) is item:
                del self.tools[item.name]
                self._schemas = None

    def all(self) -> dict[str, Tool | NativeWebTool]:
        """Every registered tool by name (provider-native ones included)."""
        return {**self.tools, **self.natives}

    def drop_refused_natives(self, permissions: Permissions) -> None:
        """Remove the provider-native tools ``permissions`` no longer allow."""
        for name in list(self.natives):
            if native_web_refusal(permissions, name) is not None:
                del self.natives[name]

    def schemas(self) -> list[dict[str, Any]]:
        """The tool schemas the model sees (OpenAI format), cached until tools change."""
        if self._schemas is None:
            self._schemas = [t.openai_schema() for t in self.tools.values()]
        return self._schemas

    def request_extras(self) -> dict[str, Any]:
        """Request parameters the provider-native tools add to every request."""
        extras: dict[str, Any] = {}
        for native in self.natives.values():
            for key, value in native.request_kwargs().items():
                # tool entries (native fetch) add up; the request adds the function tools
                extras[key] = [*extras.get(key, []), *value] if key == "tools" else value
        return extras

    @staticmethod
    def check_batch(
        items: Iterable[Tool | NativeWebTool] | Tool | NativeWebTool,
        permissions: Permissions,
        *,
        model: ChatModel,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> Batch:
        """Check a batch: tools only, unique names, native tools bound to ``model`` (or the
        universal tool, when it does not search natively) and authorized for its provider,
        and tools bound to one agent or session (their source's ``agent_id`` /
        ``session_id``) registered only there."""
        if isinstance(items, Tool | NativeWebTool):
            items = [items]
        try:
            listed = list(items)
        except TypeError:
            raise InvalidToolError(
                f"tools must be a list of tools, not {type(items).__name__}. {_TOOL_NAME_HINT}"
            ) from None
        batch: dict[str, Tool] = {}
        natives: dict[str, NativeWebTool] = {}
        for item in listed:
            if isinstance(item, NativeWebSearch) and not item.bound:
                item = bind_native_web_search(
                    item,
                    supported=supports_native_web_search(model),
                    provider=model.provider,
                    model=model.model,
                )
            elif isinstance(item, NativeWebFetch) and not item.bound:
                item = bind_native_web_fetch(
                    item,
                    supported=supports_native_web_fetch(model),
                    provider=model.provider,
                    model=model.model,
                )
            if not isinstance(item, Tool | NativeWebTool):
                raise InvalidToolError(
                    f"{item!r} is not a tool ({type(item).__name__}). {_TOOL_NAME_HINT}"
                )
            if item.name in batch or item.name in natives:
                raise ToolNameConflictError(f"Two tools in one batch are named {item.name!r}.")
            if isinstance(item, Tool):
                _check_binding(item, agent_id, session_id)
                batch[item.name] = item
                continue
            refusal = native_web_refusal(permissions, item.name)
            if refusal is not None:
                raise PermissionDeniedError(
                    refusal,
                    tool_name=item.name,
                    permission_mode=permissions.mode,
                    reason=refusal,
                )
            if item.provider != model.provider:
                raise InvalidToolError(
                    f"Provider-native {item.name} is for {item.provider}, but this agent talks "
                    f"to {model.provider}."
                )
            natives[item.name] = item
        return batch, natives


class AgentTools(ToolRegistry):
    """The tools of one agent: a :class:`ToolRegistry` that checks every batch against the
    agent's current permissions and model, and binds it to the agent's ids.

    Args:
        check: As for :class:`ToolRegistry`.
        guard: The agent's guard (no tool changes while another agent retains it).
        permissions / model: Return the agent's current permissions and model.
        agent_id / session_id: The agent's (a tool bound to others is refused).
    """

    def __init__(
        self,
        check: ToolSetCheck | None,
        *,
        guard: Guard,
        permissions: Callable[[], Permissions],
        model: Callable[[], ChatModel],
        agent_id: str,
        session_id: str,
    ) -> None:
        super().__init__(check)
        self._guard = guard
        self._permissions = permissions
        self._model = model
        self._agent_id = agent_id
        self._session_id = session_id

    def register(self, items: Iterable[Tool | NativeWebTool], replace: bool = False) -> None:
        """See :meth:`ToolMethods.register_tools`."""
        self._guard.free("add tools")
        self.add_unguarded(items, replace=replace)

    def add_unguarded(
        self,
        items: Iterable[Tool | NativeWebTool],
        *,
        replace: bool = False,
        on_behalf_of: tuple[str, str] | None = None,
    ) -> None:
        """Add a batch without the retained check (package-internal: a graph's route tools
        before retaining, a lead's lent tools). ``on_behalf_of``: the (agent id, session
        id) tools must be bound to, when not this agent's (a lead's)."""
        agent_id, session_id = on_behalf_of or (self._agent_id, self._session_id)
        self.add(
            items,
            self._permissions(),
            model=self._model(),
            replace=replace,
            agent_id=agent_id,
            session_id=session_id,
        )

    def reset(self, items: Iterable[Tool | NativeWebTool]) -> None:
        """See :meth:`ToolMethods.set_tools`."""
        self._guard.free("replace the tools")
        self.replace_all(
            items,
            self._permissions(),
            model=self._model(),
            agent_id=self._agent_id,
            session_id=self._session_id,
        )


class ToolMethods:
    """An Agent's tool methods, façades over its :class:`AgentTools`."""

    _tools: AgentTools  # made by Agent.__init__

    def register_tool(self, tool: Tool, replace: bool = False) -> Self:
        """Add a tool; a name clash is an error unless ``replace=True``.

        Examples:
            >>> from deputy_shiny import Agent, tool
            >>> from deputy_shiny.testing import ScriptedModel
            >>> def now() -> str:
            ...     "The current time."
            ...     return "noon"
            >>> sorted(Agent(ScriptedModel([])).register_tool(tool(now)).get_tools())
            ['now']
        """
        return self.register_tools([tool], replace=replace)

    def register_tools(self, tools: Iterable[Tool | NativeWebTool], replace: bool = False) -> Self:
        """Add several tools; all are checked before any is added.

        Two tools with one name in the batch are always an error; a clash with a
        registered tool is an error unless ``replace=True``. Provider-native web search
        (from ``tools_web(model)``) is authorized here, once: it needs web access, an
        explicit ``tool_allowlist`` entry, and no ``can_use_tool`` callback.
        """
        self._tools.register(tools, replace=replace)
        return self

    def set_tools(self, tools: Iterable[Tool | NativeWebTool]) -> Self:
        """Replace all registered tools (the batch is checked first)."""
        self._tools.reset(tools)
        return self

    def get_tools(self) -> dict[str, Tool | NativeWebTool]:
        """The registered tools by name (provider-native ones included)."""
        return self._tools.all()


def _check_binding(item: Tool, agent_id: str | None, session_id: str | None) -> None:
    """A tool bound to one agent or session (an McpConnection's) refuses any other."""
    source = item.source
    where = f" (MCP connection {source.connection_id})" if source.connection_id else ""
    if source.agent_id is not None and source.agent_id != agent_id:
        raise InvalidToolError(
            f"Tool {item.name!r}{where} belongs to agent {source.agent_id!r} and cannot be "
            f"registered with agent {agent_id!r}. Open a connection for this agent instead."
        )
    if source.session_id is not None and source.session_id != session_id:
        raise InvalidToolError(
            f"Tool {item.name!r}{where} belongs to session {source.session_id!r} and cannot be "
            f"registered in session {session_id!r}. Open a connection for this session instead."
        )
