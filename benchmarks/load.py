"""Many simulated users for minutes against the reference app: errors, leftovers, memory.

Starts ``_load_app.py`` (the reference app, ``app.py``, on the offline demo model, with
a diagnostics route the benchmark reads) with ``shiny run`` on loopback, then drives it
with ``--users`` websocket clients speaking Shiny's protocol (no browser) for
``--seconds``. Everything stays on this machine: the demo model is offline, and
model-run shell commands run in the sandbox, without network.

Each user opens a session, says hello (the demo's long introduction streams), then
takes a few actions from a fixed mix, with a pause between them: plain chat, file tools
(list, read), a write that asks for approval, ``run `ls -la``` (approval, then bash in
the sandbox), a dangerous command (a hook blocks it), ``ask_user`` (the form is
answered or cancelled), a research task (delegation to two subagents), Stop in the
middle of a reply, and leaving in the middle of a reply. Approvals and questions are
answered as the browser does: through the ``deputy_modal_answer`` input, with the
request id from the modal and the key from the ``deputy-prompt-key`` message. After a
few actions the user leaves (closes the socket) and comes back as a new session.

First a warm-up, not counted: one user does every action once while every other user
opens a session, says hello and chats once (litellm's import, first requests, thread
pools, the allocator's working size at full concurrency); the baseline is read once
those sessions have ended. When the time is up
every user finishes its turn and leaves; once the server holds no session, the final
state is read. It prints:

* errors: log records at ERROR on the server (any logger), tracebacks in its output,
  and client protocol errors (a reply that never ends, a modal without its key, an
  output error, a dropped connection);
* what is left after every session ended, against the baseline: asyncio tasks,
  threads (idle workers of the bounded pools are shown apart), child processes,
  sandboxes (bwrap) and per-call cgroups, live sessions, Agents and Chats;
* the server's RSS before any session, at the baseline and at the end, and its growth
  from the baseline to the end;
* the p50, p99 and worst gap between consecutive text chunks of a reply.

The last line is PASS or FAIL against the targets: 0 errors, nothing left over, RSS
growth under 10 %.

Usage: .venv/bin/python benchmarks/load.py [--users 50] [--seconds 300] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import html
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websockets
from concurrent_sessions import free_port, percentile, wait_until_serving
from session_churn import rss_mib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHAT_INPUT = "chat-chat_user_input:shinychat.userInput"
CANCEL_INPUT = "chat-chat_cancel"
ANSWER_INPUT = "deputy_modal_answer"
KEY_MESSAGE = "deputy-prompt-key"
DIAGNOSTICS = "/__load/diagnostics"
TURN_TIMEOUT = 90.0  # seconds a reply may take under load before it counts as stuck
SETTLE_TIMEOUT = 90.0  # seconds for the server to end every session after the run
RSS_TARGET = 10.0  # percent
# Idle workers of bounded thread pools: they stay by design, up to the pool's size.
# (AnyIO's workers serve starlette's file responses; an idle one exits after 10 s.)
POOL_THREAD = re.compile(
    r"^((deputy-tool|ThreadPoolExecutor-\d+|asyncio)_\d+|AnyIO worker thread)$"
)

# (action, weight): what a user does after its hello.
MIX = (
    ("chat", 22),
    ("list", 8),
    ("read", 7),
    ("write", 15),
    ("bash", 10),
    ("dangerous", 5),
    ("ask", 10),
    ("research", 5),
    ("stop", 10),
    ("leave", 8),
)
MESSAGES = {
    "hello": "hello",
    "list": "list files",
    "read": "read welcome.md",
    "write": "write a note",
    "bash": "run `ls -la`",
    "dangerous": "run a dangerous command",
    "ask": "ask me something",
    "research": "research tides",
    "stop": "help",  # the menu: a long enough reply to stop in the middle
    "leave": "help",
}
CHATTER = ("how are you?", "tell me about tides", "thanks, that helps", "what now")


@dataclass
class Tally:
    """What the simulated users did and saw."""

    sessions: int = 0
    turns: collections.Counter[str] = field(default_factory=collections.Counter)
    answers: collections.Counter[str] = field(default_factory=collections.Counter)
    gaps: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: collections.defaultdict[str, list[float]] = field(
        default_factory=lambda: collections.defaultdict(list)
    )

    def error(self, text: str) -> None:
        self.errors.append(text)


@dataclass
class Result:
    """The run's figures (what the last line judges)."""

    errors: int
    leftovers: dict[str, int]
    rss_growth: float
    gap_p99: float
    turns: int
    passed: bool


class ProtocolError(Exception):
    """The server did something a browser would not expect."""


class User:
    """One simulated user: sessions one after another, each a few turns."""

    def __init__(self, port: int, rng: random.Random, tally: Tally) -> None:
        self.port = port
        self.rng = rng
        self.tally = tally
        self.keys: dict[str, str] = {}
        self.pause = 1.0  # scales the think times (the warm-up user hardly thinks)
        self.doing = ""  # for error messages: where the user was
        self.seen: collections.deque[str] = collections.deque(maxlen=4)  # the last messages

    async def run(self, deadline: float, plan: list[str] | None = None) -> None:
        """Sessions until ``deadline`` (monotonic); with ``plan``, one session of those actions."""
        if plan is not None:
            self.pause = 0.1
        while time.monotonic() < deadline:
            try:
                await self.session(deadline, plan)
            except (ProtocolError, OSError, websockets.WebSocketException) as exc:
                self.tally.error(f"{type(exc).__name__}: {exc}")
            if plan is not None:
                return
            await asyncio.sleep(self.rng.uniform(0.5, 2.0))

    async def session(self, deadline: float, plan: list[str] | None) -> None:
        url = f"ws://127.0.0.1:{self.port}/websocket/"
        async with websockets.connect(url, max_size=None, open_timeout=60) as ws:
            self.doing = "waiting for the session's first values"
            await ws.send(json.dumps({"method": "init", "data": {}}))
            while "values" not in await self.receive(ws):
                pass
            self.tally.sessions += 1
            self.keys.clear()
            actions = plan or self.actions()
            for action in ["hello", *actions]:
                began = time.monotonic()
                outcome = await self.turn(ws, action)
                self.tally.seconds[action].append(time.monotonic() - began)
                if outcome == "left":
                    return
                if plan is None and time.monotonic() >= deadline:
                    return
                await asyncio.sleep(self.rng.uniform(0.3, 1.5) * self.pause)

    def actions(self) -> list[str]:
        names = [name for name, _ in MIX]
        weights = [weight for _, weight in MIX]
        return self.rng.choices(names, weights, k=self.rng.randint(2, 6))

    async def receive(self, ws: Any) -> dict[str, Any]:
        try:
            raw = await asyncio.wait_for(ws.recv(), TURN_TIMEOUT)
        except TimeoutError:
            raise ProtocolError(
                f"nothing from the server for {TURN_TIMEOUT:.0f} s, {self.doing}; "
                f"the last messages: {list(self.seen)}"
            ) from None
        message: dict[str, Any] = json.loads(raw)
        self.seen.append(_kind(message))
        errors = message.get("errors")
        if errors:
            self.tally.error(f"output error: {json.dumps(errors)[:200]}")
        key = message.get("custom", {}).get(KEY_MESSAGE)
        if key:
            self.keys[key["request_id"]] = key["key"]
        return message

    async def turn(self, ws: Any, action: str) -> str:
        """Send one message and read its reply to the end; "left" if the user left."""
        text = self.rng.choice(CHATTER) if action == "chat" else MESSAGES[action]
        self.doing = f"in a {action!r} turn (turn {self.tally.turns[action] + 1} of its kind)"
        await send_input(ws, {CHAT_INPUT: {"text": text, "attachments": []}})
        self.tally.turns[action] += 1
        last: float | None = None
        chunks = 0
        while True:
            message = await self.receive(ws)
            if "modal" in message and message["modal"].get("type") == "show":
                await self.answer(ws, str(message["modal"]["message"]["html"]), action)
                last = None
                continue
            chat = message.get("custom", {}).get("shinyChatMessage", {}).get("action", {})
            kind = chat.get("type")
            if kind == "chunk_end":
                return "done"
            if kind != "chunk":
                if kind is not None:
                    last = None  # a tool card between two texts is no gap
                continue
            now = time.perf_counter()
            if last is not None:
                self.tally.gaps.append(now - last)
            last = now
            chunks += 1
            if chunks == 3 and action == "stop":
                await send_input(ws, {CANCEL_INPUT: int(time.time() * 1000)})
            if chunks == 3 and action == "leave":
                return "left"  # the socket closes in the middle of the reply

    async def answer(self, ws: Any, markup: str, action: str) -> None:
        """Answer the modal on screen as a person would, through the kit's input."""
        found = re.search(r'data-request-id="([^"]+)"', markup)
        if found is None:
            raise ProtocolError(f"a modal without a request id during {action!r}")
        request_id = html.unescape(found.group(1))
        key = self.keys.pop(request_id, None)
        if key is None:
            raise ProtocolError(f"a modal shown before its key during {action!r}")
        await asyncio.sleep(self.rng.uniform(0.2, 1.0) * self.pause)  # reading it
        answer: dict[str, Any]
        if "deputy-approval" in markup:
            choice = self.rng.choices(["approve", "deny", "always", "stop"], [60, 25, 5, 10])[0]
            answer = {
                "action": choice,
                "values": {},
                "message": "not now" if choice == "deny" else "",
            }
        elif "deputy-questions" in markup:
            choice = "submit" if self.rng.random() < 0.8 else "cancel"
            # Each question's first option (a list: the form sends checked boxes as one).
            firsts = [re.search(r'value="([^"]*)"', part) for part in markup.split("<fieldset")[1:]]
            picked = [[html.unescape(m.group(1))] if m else [] for m in firsts]
            answer = {"action": choice, "answers": picked}
        else:
            raise ProtocolError(f"an unknown modal during {action!r}")
        self.tally.answers[f"{action}:{choice}"] += 1
        answer.update(request_id=request_id, key=key)
        await send_input(ws, {ANSWER_INPUT: answer})
        self.doing += f", after answering {choice!r}"


def _kind(message: dict[str, Any]) -> str:
    """A short name for a server message (for error reports)."""
    custom = message.get("custom", {})
    if "shinyChatMessage" in custom:
        return str(custom["shinyChatMessage"].get("action", {}).get("type"))
    if custom:
        return f"custom {next(iter(custom))}"
    if "modal" in message:
        return f"modal {message['modal'].get('type')}"
    return next(iter(message), "empty")


async def send_input(ws: Any, data: dict[str, Any]) -> None:
    await ws.send(json.dumps({"method": "update", "data": data}))


def start(port: int, tmp: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """``shiny run`` the load app with diagnostics on; its output goes to a log file."""
    env = {k: v for k, v in os.environ.items() if k != "DEPUTY_MODEL"}
    env.update(
        DEPUTY_LOAD_DIAGNOSTICS="1",
        DEPUTY_CONVERSATIONS_DIR=str(tmp / "conversations"),
        TMPDIR=str(tmp),
        PYTHONUNBUFFERED="1",
    )
    log = tmp / "server.log"
    command = [sys.executable, "-m", "shiny", "run", str(HERE / "_load_app.py")]
    command += ["--port", str(port), "--host", "127.0.0.1"]
    with log.open("wb") as out:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    return wait_until_serving(server, port, "the load app"), log


def diagnostics(port: int, quick: bool = False) -> dict[str, Any]:
    """The server's state; ``quick``: only its sessions and child processes (cheaper)."""
    url = f"http://127.0.0.1:{port}{DIAGNOSTICS}" + ("?quick=1" if quick else "")
    with urllib.request.urlopen(url, timeout=30) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data


async def settle(port: int) -> dict[str, Any]:
    """The server's state once it holds no session (and no sandbox) any more."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        state = await asyncio.to_thread(diagnostics, port, True)
        if (state["sessions"] == 0 and not state["children"]) or time.monotonic() > deadline:
            await asyncio.sleep(1.0)  # let finished tasks and threads wind down
            return await asyncio.to_thread(diagnostics, port)
        await asyncio.sleep(0.5)


def leftovers(base: dict[str, Any], end: dict[str, Any]) -> tuple[dict[str, int], list[str]]:
    """What the end state holds beyond the baseline: counts by kind, and their names."""
    extra_tasks = collections.Counter(end["tasks"]) - collections.Counter(base["tasks"])
    extra_threads = collections.Counter(end["threads"]) - collections.Counter(base["threads"])
    pooled = [t for t in extra_threads.elements() if POOL_THREAD.match(t)]
    threads = [t for t in extra_threads.elements() if not POOL_THREAD.match(t)]
    counts = {
        "tasks": sum(extra_tasks.values()),
        "threads": len(threads),
        "child processes": len(end["children"]),
        "sandboxes": len(end["sandboxes"]),
        "cgroups": len(end["cgroups"]),
        "sessions": end["sessions"],
        "agents": end["agents"],
        "chats": end["chats"],
    }
    names = [*extra_tasks.elements(), *threads, *(c["name"] for c in end["children"])]
    names += [f"(idle pool worker) {t}" for t in pooled]
    return counts, names


def tracebacks(log: Path) -> int:
    return log.read_text(errors="replace").count("Traceback (most recent call last)")


async def warm_up(port: int, users: int, seed: int, tally: Tally) -> None:
    """One user takes every action once while a wave of ``users`` sessions say hello and
    chat once, all at the same time: the process reaches its working size (thread
    pools, allocator arenas, caches) before the baseline is read, so RSS growth measures
    what the run keeps, not the first peak."""
    far = time.monotonic() + 600
    every = [name for name, _ in MIX if name != "leave"]
    first = User(port, random.Random(seed), tally).run(far, every)
    wave = [User(port, random.Random(-seed - i), tally).run(far, ["chat"]) for i in range(users)]
    await asyncio.gather(first, *wave)


async def load(port: int, users: int, seconds: float, seed: int, tally: Tally) -> None:
    began = time.monotonic()
    deadline = began + seconds
    runners = []
    for index in range(users):
        user = User(port, random.Random(seed * 1000 + index), tally)
        runners.append(asyncio.create_task(user.run(deadline)))
        await asyncio.sleep(min(0.1, seconds / max(users, 1) / 4))  # a short ramp
    await asyncio.gather(*runners)
    print(f"load: {users} users for {seconds:g} s, all done after {time.monotonic() - began:.1f} s")


def report(
    tally: Tally,
    base: dict[str, Any],
    end: dict[str, Any],
    rss: tuple[float, float, float],
    log: Path,
) -> Result:
    """Print the figures and the verdict."""
    turns = sum(tally.turns.values())
    print(f"sessions: {tally.sessions}, turns: {turns} ({dict(sorted(tally.turns.items()))})")
    print(f"modal answers: {dict(sorted(tally.answers.items()))}")
    gaps = tally.gaps or [0.0]
    p99 = percentile(gaps, 99)
    print(
        f"text chunks timed: {len(tally.gaps)}, gap p50 {statistics.median(gaps) * 1000:.1f} ms"
        f"   p99 {p99 * 1000:.1f} ms   worst {max(gaps) * 1000:.1f} ms"
    )
    took = ", ".join(
        f"{action} {statistics.median(t):.1f}/{max(t):.1f}"
        for action, t in sorted(tally.seconds.items())
    )
    print(f"seconds a turn took (median/max): {took}")
    logged = sum(n for level, n in end["log_counts"].items() if level in ("ERROR", "CRITICAL"))
    traces = tracebacks(log)
    errors = logged + traces + len(tally.errors)
    print(
        f"errors: {errors} (server log records at ERROR: {logged}, tracebacks in its output: "
        f"{traces}, client protocol errors: {len(tally.errors)})"
    )
    for text in [*end["log_errors"][:5], *tally.errors[:5]]:
        print("  " + text.replace("\n", "\n    ")[:1500])
    if end["log_warnings"]:
        print(f"server warnings (most frequent): {end['log_warnings']}")
    counts, names = leftovers(base, end)
    shown = ", ".join(f"{kind} {n}" for kind, n in counts.items())
    print(f"left after every session ended (beyond the baseline): {shown}")
    for name in names[:20]:
        print(f"  {name}")
    grown = collections.Counter(end["types"])
    grown.subtract(base["types"])
    shown = ", ".join(f"{name} {n:+d}" for name, n in grown.most_common(8) if n > 0)
    print(f"objects that grew from the baseline to the end: {shown or 'none'}")
    first_rss, start_rss, end_rss = rss
    growth = (end_rss - start_rss) / start_rss * 100
    print(
        f"RSS: {first_rss:.1f} MiB before any session, baseline (after the warm-up) "
        f"{start_rss:.1f} MiB, end {end_rss:.1f} MiB: growth {growth:+.1f} %"
    )
    left = sum(counts.values())
    passed = errors == 0 and left == 0 and growth < RSS_TARGET
    print(
        f"{'PASS' if passed else 'FAIL'}: errors {errors} (target 0); left over {left} "
        f"(target 0); RSS growth {growth:+.1f} % (target under {RSS_TARGET:g} %)"
    )
    return Result(errors, counts, growth, p99, turns, passed)


async def main(users: int = 50, seconds: float = 300, seed: int = 1) -> Result:
    """Run the benchmark; print its figures and verdict; return them."""
    print(f"users: {users}, seconds: {seconds:g}, seed: {seed}, load average: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="deputy-load-") as folder:
        tmp = Path(folder)
        port = free_port()
        server, log = start(port, tmp)
        try:
            tally = Tally()
            first_rss = rss_mib(server.pid)
            began = time.monotonic()
            await warm_up(port, users, seed, tally)
            took = ", ".join(f"{a} {max(t):.1f} s" for a, t in tally.seconds.items())
            print(
                f"warm-up: {sum(tally.turns.values())} turns in {time.monotonic() - began:.1f} s"
                f" ({took}), modal answers {dict(sorted(tally.answers.items()))},"
                f" errors {tally.errors}"
            )
            base = await settle(port)
            start_rss = rss_mib(server.pid)
            tally = Tally()  # the warm-up's figures are not counted
            await load(port, users, seconds, seed, tally)
            end = await settle(port)
            end_rss = rss_mib(server.pid)
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)
        return report(tally, base, end, (first_rss, start_rss, end_rss), log)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    result = asyncio.run(main(args.users, args.seconds, args.seed))
    sys.exit(0 if result.passed else 1)
