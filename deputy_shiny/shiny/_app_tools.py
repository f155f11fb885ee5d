"""The app's own tools run where the app called ``agent_chat_server``: in its session.

A run streams inside the kit's module (``agent_chat_server("chat", ...)`` is a Shiny
module), in an ExtendedTask. Without help, a tool the app defined would run with the
kit's module session as the current one and its namespace: ``ui.update_select("region")``
went to ``chat-region``, and even with ``session=session``, ``ui.update_checkbox_group``
built its options under ``chat-`` (py-shiny resolves their ids in the current
namespace), so nothing changed and the tool said it had. And the ExtendedTask forbids
reactive reads, so ``input.region()`` raised.

:func:`app_tool_scope` gives the runtime a tool scope (``tools/_scope.py``) for the app's
tools (functions outside this package; built-ins, MCP tools and the kit's delegation
keep the kit's namespace): each call runs in the session, and with the namespace, that
called ``agent_chat_server`` (the app's, or the app's module's), in a fresh isolated
reactive context (reads work, and subscribe nothing), as an app's own effect would.

A sync tool runs in a worker thread, and py-shiny's session is not thread-safe: a
message queued from another thread can be dropped by a flush running meanwhile on
the loop, and a message sent at once (a notification, a modal) needs the loop. So
the root session's two ways out (``send_input_message``, ``_send_message_sync``) hop
to the event loop when called from another thread, and a message a tool sends is
flushed to the browser at once (a coalesced reactive flush), not at the next flush
something else makes. Both stay as shiny made them on the loop, outside tools, and
they are removed when the session ends. The isolated reactive context is made on the
loop too: py-shiny numbers contexts with a plain counter.

Examples:
    >>> from deputy_shiny.tools import tool, tool_read_file
    >>> def set_region(region: str) -> str:
    ...     '''Set the region.'''
    ...     return region
    >>> set_region.__module__ = "app"  # defined in the app's app.py
    >>> is_app_tool(tool(set_region)), is_app_tool(tool_read_file())
    (True, False)
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from shiny import reactive
from shiny.session import Session, session_context

from ..tools import Tool
from ..tools._scope import ToolScope

__all__ = ["app_tool_scope", "is_app_tool"]

_PACKAGE = __name__.split(".", 1)[0] + "."
_in_app_tool: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "deputy_in_app_tool", default=False
)
_SENDS = "_deputy_loop_sends"  # the root session's attribute: its _LoopSends


def is_app_tool(tool: Tool) -> bool:
    """True for a tool the app wrote: a function outside this package (not a built-in,
    not an MCP server's, not the kit's delegation)."""
    source = tool.source
    return source.type == "function" and not (source.module or "").startswith(_PACKAGE)


def app_tool_scope(app_session: Session) -> ToolScope:
    """The tool scope that runs the app's tools in ``app_session`` (the session that
    called ``agent_chat_server``, a module's included). Call it on the event loop."""
    _LoopSends.install(app_session.root_scope())

    def scope(tool: Tool) -> AbstractContextManager[object] | None:
        if not is_app_tool(tool):
            return None
        with reactive.isolate():  # made here, on the loop (see the module's docstring)
            reads = reactive.get_current_context()
        return _in_app(app_session, reads)

    return scope


@contextmanager
def _in_app(session: Session, reads: reactive.Context) -> Iterator[None]:
    token = _in_app_tool.set(True)
    try:
        with session_context(session), reads():
            yield
    finally:
        _in_app_tool.reset(token)


class _LoopSends:
    """A root session's sends, made safe from a tool's worker thread and flushed at once
    when a tool sends (installed once per session, removed when it ends)."""

    def __init__(self, session: Session, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.thread = threading.get_ident()
        self.send_input_message: Callable[[str, dict[str, object]], None] = (
            session.send_input_message
        )
        self.send_message_sync: Callable[[dict[str, object]], None] = session._send_message_sync
        self.flush_scheduled = False
        self.flushes: set[asyncio.Task[None]] = set()

    @classmethod
    def install(cls, session: Session) -> _LoopSends:
        installed = getattr(session, _SENDS, None)
        if isinstance(installed, _LoopSends):
            return installed  # a second chat of the same session
        sends = cls(session, asyncio.get_running_loop())
        # Instance attributes: this session's sends only, every other session untouched.
        session.send_input_message = sends.input_message  # type: ignore[method-assign]
        session._send_message_sync = sends.message_sync  # type: ignore[method-assign]
        setattr(session, _SENDS, sends)
        session.on_ended(_uninstaller(session))
        return sends

    def input_message(self, id: str, message: dict[str, object]) -> None:
        self._on_loop(self.send_input_message, id, message)
        if _in_app_tool.get():
            self._call(self._flush_soon)

    def message_sync(self, message: dict[str, object]) -> None:
        self._on_loop(self.send_message_sync, message)

    def _on_loop(self, fn: Callable[..., None], *args: Any) -> None:
        if threading.get_ident() == self.thread:
            fn(*args)
        else:  # in order: queued before the tool's result reaches the loop
            self.loop.call_soon_threadsafe(fn, *args, context=contextvars.Context())

    def _call(self, fn: Callable[[], None]) -> None:
        if threading.get_ident() == self.thread:
            fn()
        else:
            self.loop.call_soon_threadsafe(fn, context=contextvars.Context())

    def _flush_soon(self) -> None:
        if self.flush_scheduled:
            return
        self.flush_scheduled = True
        task = self.loop.create_task(self._flush(), context=contextvars.Context())
        self.flushes.add(task)  # held until done (a task nothing references may vanish)
        task.add_done_callback(self.flushes.discard)

    async def _flush(self) -> None:
        self.flush_scheduled = False  # a message sent from now on needs another flush
        async with reactive.lock():
            await reactive.flush()


def _uninstaller(session: Session) -> Callable[[], None]:
    """The session's ``on_ended`` callback: its sends are shiny's own again."""

    def uninstall() -> None:
        for name in ("send_input_message", "_send_message_sync", _SENDS):
            vars(session).pop(name, None)

    return uninstall
