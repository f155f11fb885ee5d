"""SessionOwner: one MCP session, opened, held and closed by one task on the MCP loop.

The SDK's client runs its transport in anyio task groups, whose cancel scopes must be
left by the task that entered them (closing from another task raises "exit cancel
scope in a different task"). So one owner task enters the transport and the client
session, reports that it is ready, and then only waits for its stop event; leaving the
``async with`` closes the session and stops the server process.
Requests run in the callers' own tasks on the MCP loop, one at a time, each under a
timeout: an overlapping request fails at once (:class:`McpBusyError`), and a request
that outlives its timeout or finds the server gone closes the connection for good.

Every method here runs on the MCP loop (see :mod:`deputy_shiny.mcp._loop`), except
:meth:`SessionOwner.stop_soon`, which any thread may call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import IO, TYPE_CHECKING, Any, Literal, TextIO, TypeVar, cast

from .._util.version import package_version
from ..errors import McpBusyError, McpConnectionError, McpError, McpTimeoutError
from ._process import capture_spawns, is_alive, stop_process_group, track, untrack
from .config import McpHttpServer, McpInProcessServer, McpServerConfig, McpStdioServer

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["McpStatus", "SessionOwner"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

McpStatus = Literal["connecting", "connected", "failed", "closed"]
"""A connection's state: starting, usable, broken (see its error), or closed."""

_STDERR_TAIL = 600


class SessionOwner:
    """The owner of one MCP session (see the module docstring).

    Args:
        server: The configured server to connect to.
        timeout: Seconds for startup and for each request (default: the server's).
    """

    def __init__(
        self, server: McpServerConfig, *, timeout: float | None = None, mode: str = "auto"
    ) -> None:
        self.server = server
        self.mode = mode  # the SDK's connect mode: "auto" probes server/discover first
        self.timeout = float(timeout) if timeout is not None else server.timeout
        self.error: str | None = None
        self.pid: int | None = None
        self.capabilities: Any = None
        self._status: McpStatus = "connecting"
        self._client: Client | None = None
        self._busy: str | None = None
        self._request_task: asyncio.Task[Any] | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stderr: IO[str] | None = None

    @property
    def name(self) -> str:
        return self.server.name

    @property
    def status(self) -> McpStatus:
        """The state now; a connected stdio server whose process died reads as failed."""
        if self._status == "connected" and self.pid is not None and not is_alive(self.pid):
            self._fail("the server process exited")
        return self._status

    # ------------------------------------------------------------------ lifetime

    async def start(self) -> None:
        """Start the owner task and wait until the session is initialized (or failed)."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        ready: asyncio.Future[None] = self._loop.create_future()
        self._task = asyncio.create_task(self._own(ready), name=f"mcp-owner:{self.name}")
        try:
            async with asyncio.timeout(self.timeout):
                await asyncio.shield(ready)
        except TimeoutError:
            self._fail(f"it did not start within {self.timeout:g} s")
            self._task.cancel()
            await self._wait_owner()
            raise McpTimeoutError(self._message()) from None
        except BaseException:
            await self.stop()
            raise

    async def _own(self, ready: asyncio.Future[None]) -> None:
        from mcp import Client
        from mcp_types import Implementation

        assert self._stop is not None
        # The stderr file stays open until the failure is recorded, so the error can
        # quote the server's last words.
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as stderr:
            self._stderr = stderr
            try:
                client = Client(
                    self._transport(stderr),
                    cache=None,
                    client_info=Implementation(name="deputy_shiny", version=package_version()),
                    mode=self.mode,
                )
                with capture_spawns(self._spawned):
                    async with client:
                        self._client = client
                        self.capabilities = client.server_capabilities
                        self._status = "connected"
                        ready.set_result(None)
                        await self._stop.wait()
            except asyncio.CancelledError:
                self._fail(self.error or "the connection was cancelled")
            except Exception as exc:
                what = "it failed" if ready.done() else "it could not start"
                self._fail(f"{what}: {_describe(exc)}")
            finally:
                self._client = None
                if self._status != "failed":
                    self._status = "closed"
                if not ready.done():
                    ready.set_exception(McpConnectionError(self._message()))
                await self._release_process()
                self._stderr = None

    def _transport(self, stderr: IO[str]) -> Any:
        server = self.server
        if isinstance(server, McpStdioServer):
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=dict(server.env) or None,
                cwd=server.cwd,
            )
            return stdio_client(params, errlog=cast(TextIO, stderr))
        if isinstance(server, McpHttpServer):
            return _http_transport(server.url, dict(server.headers))
        if isinstance(server, McpInProcessServer):
            return server.server
        raise McpConnectionError(f"Unknown MCP server type {type(server).__name__}.")

    def _spawned(self, pid: int) -> None:
        self.pid = pid
        track(pid)

    async def _release_process(self) -> None:
        pid = self.pid
        if pid is None:
            return
        if is_alive(pid):  # the SDK gave up on it: stop it here
            await asyncio.to_thread(stop_process_group, pid)
        untrack(pid)

    async def stop(self) -> None:
        """Close the session: set the stop event and wait for the owner task to end."""
        if self._stop is not None:
            self._stop.set()
        await self._wait_owner()

    async def cancel(self) -> None:
        """Cancel the request in progress, then close the session."""
        request = self._request_task
        if request is not None and not request.done() and request is not asyncio.current_task():
            request.cancel()
        await self.stop()

    async def _wait_owner(self) -> None:
        task = self._task
        if task is not None and not task.done() and task is not asyncio.current_task():
            with contextlib.suppress(BaseException):
                await asyncio.shield(task)

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the owner task runs on (None before it started)."""
        return self._loop

    def stop_soon(self) -> None:
        """Ask the owner to close, from any thread, without waiting."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is shutting down
                loop.call_soon_threadsafe(stop.set)

    # ------------------------------------------------------------------ requests

    async def request(
        self, what: str, send: Callable[[Client], Awaitable[T]], limit: float | None = None
    ) -> T:
        """Run one request (``send(client)``) under the timeout; one at a time."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        client = self._client
        if self.status != "connected" or client is None:
            await self.stop()  # a server found dead: release its transport now
            raise McpConnectionError(self._message())
        if self._busy is not None:
            raise McpBusyError(
                f"MCP server {self.name!r} is busy with {self._busy}; a connection serves one "
                f"request at a time, so {what} was not sent. Wait for the first to finish."
            )
        limit = self.timeout if limit is None else limit
        self._busy, self._request_task = what, asyncio.current_task()
        try:
            async with asyncio.timeout(limit):
                return await send(client)
        except TimeoutError:
            self._fail(f"{what} took longer than {limit:g} s, so the connection was closed")
            await self.stop()
            raise McpTimeoutError(self._message()) from None
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise McpError(
                    f"MCP server {self.name!r} answered {what} with an error: {exc.error.message}"
                ) from None
            self._fail(f"the server closed the connection during {what}")
            await self.stop()
            raise McpConnectionError(self._message()) from None
        except (McpError, asyncio.CancelledError):
            raise
        except Exception as exc:
            if self.status != "connected":
                raise McpConnectionError(self._message()) from exc
            raise McpError(f"MCP server {self.name!r}: {what} failed: {_describe(exc)}") from exc
        finally:
            self._busy, self._request_task = None, None

    # ------------------------------------------------------------------ state

    def _fail(self, error: str) -> None:
        if self._status != "failed":
            self._status = "failed"
            self.error = error + self._stderr_tail()

    def _stderr_tail(self) -> str:
        stderr = self._stderr
        if stderr is None:
            return ""
        try:
            stderr.flush()
            size = stderr.seek(0, 2)
            stderr.seek(max(0, size - _STDERR_TAIL * 4))
            text = stderr.read().strip()
        except (OSError, ValueError):
            return ""
        if not text:
            return ""
        return f". Its last output: {text[-_STDERR_TAIL:]}"

    def _message(self) -> str:
        state = self._status if self._status != "connecting" else "not connected"
        reason = f" ({self.error})" if self.error else ""
        return (
            f"MCP server {self.name!r}: the connection is {state}{reason}. A closed connection "
            "never reconnects by itself; open a new one."
        )


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=headers or None) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _describe(exc: BaseException) -> str:
    """One line for an exception, looking inside exception groups for the real cause."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
