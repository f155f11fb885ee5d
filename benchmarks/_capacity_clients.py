"""capacity.py's clients: websocket sessions that speak Shiny's protocol (no browser).

:func:`measure` opens N sessions at once, waits until all have started, then all submit
at once; each records its start, its time to first text and every text arrival.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import websockets
from _capacity_setup import AppSpec, Config


@dataclass
class Sample:
    """What one websocket session saw."""

    start: float | None = None  # init -> first values message, seconds
    first: float | None = None  # submit -> first text, seconds
    arrivals: list[float] = field(default_factory=list)  # perf_counter of each text message
    chars: int = 0
    complete: bool = False
    error: str = ""


def _update(chat_input: str, text: str) -> str:
    return json.dumps({"method": "update", "data": {chat_input: {"text": text, "attachments": []}}})


def _chat_action(raw: str | bytes) -> dict[str, object] | None:
    """The shinychat action a websocket message carries, if any (cheap check first)."""
    if isinstance(raw, bytes):
        raw = raw.decode()
    if "shinyChatMessage" not in raw:
        return None
    message = json.loads(raw)
    action = message.get("custom", {}).get("shinyChatMessage", {}).get("action")
    return action if isinstance(action, dict) else None


async def _read_reply(ws: websockets.ClientConnection, sample: Sample, sent: float) -> None:
    """Record every text arrival of the reply to the message sent at ``sent``."""
    started = False
    while True:
        raw = await ws.recv()
        now = time.perf_counter()
        action = _chat_action(raw)
        if action is None:
            continue
        kind = action.get("type")
        if kind == "chunk_start":
            started = True
        elif kind == "chunk":
            content = str(action.get("content") or "")
            if action.get("operation") == "replace":
                sample.chars = len(content)
            else:
                sample.chars += len(content)
            if content:
                if sample.first is None:
                    sample.first = now - sent
                sample.arrivals.append(now)
        elif kind == "chunk_end" and (started or sample.arrivals):
            return


async def session(
    port: int,
    chat_input: str,
    prompt: str,
    sample: Sample,
    started: asyncio.Event | None,
    go: asyncio.Event,
    deadline: float,
    route: str | None = None,
) -> None:
    """One browser session: start, tell ``started``, wait for ``go``, submit, read the reply.

    ``route``: the process behind nginx (its ``route`` cookie), with ``--processes``.
    Anything that goes wrong (a refused connection, a timeout at ``deadline``, on the
    loop's clock) is recorded in ``sample.error``; the session then simply is incomplete.
    """
    headers = {"Cookie": f"route={route}"} if route else None
    try:
        async with asyncio.timeout_at(deadline):
            url = f"ws://127.0.0.1:{port}/websocket/"
            async with websockets.connect(
                url, max_size=None, ping_interval=None, additional_headers=headers
            ) as ws:
                began = time.perf_counter()
                await ws.send(json.dumps({"method": "init", "data": {}}))
                while True:
                    raw = await ws.recv()
                    text = raw.decode() if isinstance(raw, bytes) else raw
                    if '"values"' in text and "values" in json.loads(text):
                        break
                sample.start = time.perf_counter() - began
                if started is not None:
                    started.set()
                await go.wait()
                sent = time.perf_counter()
                await ws.send(_update(chat_input, prompt))
                await _read_reply(ws, sample, sent)
                sample.complete = True
    except Exception as error:  # any failure (a timeout too) makes the session incomplete
        sample.error = f"{type(error).__name__} {error}".strip()[:200]


async def warm_up(port: int, chat_input: str, route: str | None = None) -> Sample:
    """One session with a short reply, so first-request costs are paid before measuring."""
    go = asyncio.Event()
    go.set()
    sample = Sample()
    deadline = asyncio.get_running_loop().time() + 120
    await session(port, chat_input, "warm up", sample, None, go, deadline, route)
    return sample


async def measure(
    port: int, app: AppSpec, n: int, config: Config, routes: Sequence[str] = ()
) -> list[Sample]:
    """Open ``n`` sessions at once, wait until all started, then all submit at once
    (behind nginx, session ``i`` goes to process ``routes[i % len(routes)]``)."""
    loop = asyncio.get_running_loop()
    start_timeout = 30 + 0.5 * n
    deadline = loop.time() + start_timeout + 30 + 3 * config.duration
    samples = [Sample() for _ in range(n)]
    flags = [asyncio.Event() for _ in range(n)]
    go = asyncio.Event()
    tasks = [
        asyncio.create_task(
            session(
                port,
                app.chat_input,
                "stream please",
                s,
                f,
                go,
                deadline,
                routes[i % len(routes)] if routes else None,
            )
        )
        for i, (s, f) in enumerate(zip(samples, flags, strict=True))
    ]
    everyone = asyncio.gather(*(flag.wait() for flag in flags))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(everyone, start_timeout)  # a session that never starts fails
    go.set()
    await asyncio.wait(tasks, timeout=max(1.0, deadline - loop.time() + 5))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return samples
