"""Small helpers shared by the tests (tools with honest annotations, event collection, a
fake OpenAI-compatible streaming server)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from deputy_shiny import (
    Agent,
    AgentEvent,
    JsonLogFormatter,
    RunLogFilter,
    Tool,
    tool,
    tool_annotations,
)

READ_ONLY = tool_annotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=False, idempotent_hint=True
)


def local_tool(fn: Callable[..., Any], **kwargs: Any) -> Tool:
    """A test tool declared read-only and closed-world (true for every test tool here)."""
    return tool(fn, annotations=READ_ONLY, **kwargs)


async def collect(events: AsyncIterator[AgentEvent]) -> list[AgentEvent]:
    return [event async for event in events]


def types_of(events: list[AgentEvent]) -> list[str]:
    return [e.type for e in events]


def without_chunks(events: list[AgentEvent]) -> list[str]:
    """Event types with runs of ``text`` chunks folded into one ``text``."""
    out: list[str] = []
    for e in events:
        if e.type == "text" and out and out[-1] == "text":
            continue
        out.append(e.type)
    return out


def assert_consistent(agent: Agent) -> None:
    """Every tool request in the conversation is answered by the next turn."""
    turns = agent.get_turns()
    for i, turn in enumerate(turns):
        if turn.role == "assistant" and turn.tool_requests:
            assert i + 1 < len(turns), "dangling tool request at the end"
            answered = {r.call_id for r in turns[i + 1].tool_results}
            assert {r.id for r in turn.tool_requests} <= answered


async def wait_until(predicate: Callable[[], bool], within: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


def sse_chat_server(deltas: list[dict[str, Any]], usage: dict[str, int] | None) -> Iterator[str]:
    """A fake OpenAI-compatible server on loopback, streaming ``deltas`` as
    chat-completion chunks (then a stop, then ``usage`` when given); yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "x"}
            events: list[dict[str, Any]] = [
                {**base, "choices": [{"index": 0, "delta": delta}]} for delta in deltas
            ]
            events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            if usage is not None:
                events.append({**base, "choices": [], "usage": usage})
            for event in events:
                self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


STALLED_CHUNK = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"x",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},'
    b'"finish_reason":null}]}\n\n'
)
"""What :func:`silent_chat_server` sends for a reply that starts ("Hello") and stalls."""


@dataclass
class SilentServer:
    """A :func:`silent_chat_server`: its base URL, and when requests came and clients left."""

    url: str
    on_request: Callable[[], object] | None = None
    on_hang_up: Callable[[], object] | None = None
    requests: list[float] = field(default_factory=list)  # time.monotonic() of each
    hang_ups: list[float] = field(default_factory=list)  # a client closed its connection


def silent_chat_server(reply: bytes = b"") -> Iterator[SilentServer]:
    """A loopback server that reads a chat request, sends ``reply`` and then nothing more
    until the client hangs up; yields it (for a fixture: ``yield from``).

    ``reply`` empty: a provider that accepts requests and never answers;
    :data:`STALLED_CHUNK`: one whose reply starts and stalls mid-stream; a whole response
    with ``connection: close``: one that answers at once (a 401, say).
    """
    state = SilentServer(url="")
    connections: list[socket.socket] = []

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            conn: socket.socket = self.request
            connections.append(conn)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536) or b"\r\n\r\n"
            head, _, body = data.partition(b"\r\n\r\n")
            length = re.search(rb"(?i)content-length:\s*(\d+)", head)
            while length is not None and len(body) < int(length.group(1)):
                body += conn.recv(65536) or b"x" * int(length.group(1))
            state.requests.append(time.monotonic())
            if state.on_request is not None:
                state.on_request()
            if reply:
                conn.sendall(reply)
            with contextlib.suppress(OSError):
                while conn.recv(65536):  # until the client hangs up (or teardown)
                    pass
            state.hang_ups.append(time.monotonic())
            if state.on_hang_up is not None:
                state.on_hang_up()

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        server.server_close()


class JsonLogCapture(logging.Handler):
    """Every record at DEBUG and up, with the run's ids (RunLogFilter), as records and as
    the JSON lines JsonLogFormatter writes."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []
        self.addFilter(RunLogFilter())
        self.setFormatter(JsonLogFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(self.format(record))


def capture_root_logs() -> Iterator[JsonLogCapture]:
    """A :class:`JsonLogCapture` on the root logger at DEBUG, removed afterwards (for a
    fixture: ``yield from capture_root_logs()``)."""
    handler = JsonLogCapture()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def run_confined(confined: Any, uid: int | None = None) -> str:
    """Start a sandbox's ``ConfinedCommand`` as run_bash would (as ``uid`` if given: the
    server of that user), wait for it, release it; its output, stdout then stderr."""
    try:
        done = subprocess.run(
            confined.argv,
            cwd=confined.cwd,
            env=confined.env,
            pass_fds=confined.pass_fds,
            capture_output=True,
            timeout=60,
            check=False,
            user=uid,
            group=uid,
            extra_groups=None if uid is None else [],
        )
    finally:
        confined.release()
    return (done.stdout + done.stderr).decode(errors="replace")


async def card_result(agent: Agent, task: str = "go") -> tuple[str, list[dict[str, Any]]]:
    """Run ``task`` through the kit's renderer; the one tool card's result block as its
    ``value_type`` and, for ``content_extra``, its items (else ``[]``)."""
    from deputy_shiny.shiny import render_events

    chunks = [c async for c in render_events(agent.run(task))]
    blocks: list[Any] = [b for c in chunks if not isinstance(c, str) for b in (c.blocks or [])]
    (block,) = [b for b in blocks if b["type"] == "tool_result"]
    extra = block["value_type"] == "content_extra"
    return block["value_type"], json.loads(block["value"]) if extra else []
