"""Small helpers shared by the tests (tools with honest annotations, event collection, a
fake OpenAI-compatible streaming server)."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import threading
from collections.abc import AsyncIterator, Callable, Iterator
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
