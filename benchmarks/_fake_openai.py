"""A fake OpenAI chat-completions server for capacity.py's wire mode, in its own process.

``POST .../chat/completions`` with ``"stream": true`` answers with server-sent events,
as OpenAI does: ``--chunks`` content chunks (``_capacity_reply``'s text, the role on the
first), ``--interval`` seconds apart, then a finish chunk, a usage chunk
(``choices: []``) and ``data: [DONE]``. A prompt containing "warm" gets the short reply.
Without ``stream`` it answers one JSON completion. Any ``GET`` answers ``ok`` (the
benchmark polls it until it serves).

It is plain asyncio (HTTP/1.1, keep-alive, chunked transfer encoding) with every event
encoded once at start, so that at 160 streams x 50 chunks a second the server is not
the bottleneck it measures through. Loopback only.

Usage: python _fake_openai.py --port P [--chunks 200] [--interval 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from _capacity_reply import MODEL_NAME, WARM_CHUNKS, chunks

HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def _frame(payload: bytes) -> bytes:
    """One HTTP chunk (chunked transfer encoding) carrying ``payload``."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(body: dict[str, Any] | str) -> bytes:
    data = body if isinstance(body, str) else json.dumps(body, separators=(",", ":"))
    return _frame(f"data: {data}\n\n".encode())


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": MODEL_NAME,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


class Replies:
    """Every event of the long and the short reply, encoded once."""

    def __init__(self, count: int) -> None:
        self.content = [
            _event(_chunk({"role": "assistant", "content": text} if i == 0 else {"content": text}))
            for i, text in enumerate(chunks(max(count, WARM_CHUNKS)))
        ]
        self.long = count

    def tail(self, count: int) -> bytes:
        usage = {"prompt_tokens": 10, "completion_tokens": count, "total_tokens": 10 + count}
        end = _chunk({}, "stop")
        usage_chunk = {**_chunk({}), "choices": [], "usage": usage}
        return _event(end) + _event(usage_chunk) + _event("[DONE]") + b"0\r\n\r\n"

    def whole(self, count: int) -> bytes:
        text = "".join(chunks(count))
        body = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 1700000000,
            "model": MODEL_NAME,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": count, "total_tokens": 10 + count},
        }
        data = json.dumps(body).encode()
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
        return head % len(data) + data


def _prompt(request: dict[str, Any]) -> str:
    """The last user message's text (a string, or OpenAI content parts)."""
    for message in reversed(request.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(part.get("text", "")) for part in content)
            return str(content)
    return ""


async def _answer(
    writer: asyncio.StreamWriter, replies: Replies, body: bytes, interval: float
) -> None:
    request = json.loads(body or b"{}")
    count = WARM_CHUNKS if "warm" in _prompt(request) else replies.long
    if not request.get("stream"):
        writer.write(replies.whole(count))
        return
    writer.write(HEAD)
    for i in range(count):
        if i:
            await asyncio.sleep(interval)
        writer.write(replies.content[i])
        await writer.drain()
    writer.write(replies.tail(count))


async def _connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, replies: Replies, interval: float
) -> None:
    try:
        while True:  # keep-alive: one request after another
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method = lines[0].split(" ", 1)[0]
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = await reader.readexactly(length) if length else b""
            if method == "POST":
                await _answer(writer, replies, body, interval)
            else:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main(port: int, count: int, interval: float) -> None:
    replies = Replies(count)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _connection(reader, writer, replies, interval)

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.02)
    args = parser.parse_args()
    asyncio.run(main(args.port, args.chunks, args.interval))
