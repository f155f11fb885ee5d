"""Does an ended browser session free what it held? Server RSS under session churn.

Starts two apps with ``shiny run`` on loopback, one after the other, in one invocation:
the reference app (``app.py`` on the offline demo model) and a minimal shinychat app
(``_minimal_chat_app.py``: one Chat per session, an echo, no agent). Against each it
opens and closes waves of websocket sessions speaking Shiny's protocol (no browser):
a warm-up wave that is not counted (litellm's import, first requests), then 8 waves
of 40 concurrent sessions, half of which send one message and read the whole reply.
Each wave waits for its sessions to end on the server (for the kit: until their
workspace folders are gone), then reads the server's resident memory (RSS).

It prints each app's RSS after every wave, its growth from wave 1 to the last wave,
the memory retained per ended session (least-squares slope over the counted waves,
divided by the sessions in a wave) and the kit/minimal ratio of that. Target: growth
under 10 % and no upward trend. (Issue 13 measured +43 %, about 0.47 MiB per ended
session, before sessions were freed.) Python frees a session's objects when its cyclic
garbage collector runs, so single waves wobble by a few MiB; the trend is what counts.

Usage: .venv/bin/python benchmarks/session_churn.py [--waves 8] [--sessions 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import websockets
from concurrent_sessions import free_port, wait_until_serving

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FLOOR_KIB = 1.0  # per-session figures below this count as this in the ratio


@dataclass(frozen=True)
class Target:
    """One app under test: how to start it and how to talk to its chat."""

    label: str
    app: Path
    chat_input: str
    message: str


KIT = Target("kit (app.py)", ROOT / "app.py", "chat-chat_user_input:shinychat.userInput", "hi")
MINIMAL = Target(
    "minimal shinychat",
    HERE / "_minimal_chat_app.py",
    "chat_user_input:shinychat.userInput",
    "hi",
)


def start(target: Target, port: int, tmp: Path) -> subprocess.Popen[bytes]:
    """``shiny run`` the app with its own temp dir (the kit's workspaces go there)."""
    env = {k: v for k, v in os.environ.items() if k != "DEPUTY_MODEL"}
    env["TMPDIR"] = str(tmp)
    command = [sys.executable, "-m", "shiny", "run", str(target.app)]
    command += ["--port", str(port), "--host", "127.0.0.1"]
    server = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return wait_until_serving(server, port, target.label)


def rss_mib(pid: int) -> float:
    """The process's resident set size in MiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc status")


async def session(port: int, target: Target, chat: bool) -> None:
    """One browser session: start it, maybe send one message and read the reply, leave."""
    async with websockets.connect(f"ws://127.0.0.1:{port}/websocket/", max_size=None) as ws:
        await ws.send(json.dumps({"method": "init", "data": {}}))
        while "values" not in json.loads(await asyncio.wait_for(ws.recv(), 60)):
            pass
        if not chat:
            return
        data = {target.chat_input: {"text": target.message, "attachments": []}}
        await ws.send(json.dumps({"method": "update", "data": data}))
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), 60))
            action = message.get("custom", {}).get("shinyChatMessage", {}).get("action", {})
            if action.get("type") == "chunk_end":
                return


def _sessions_left(workspaces: Path) -> bool:
    return workspaces.is_dir() and any(workspaces.glob("session-*"))


async def wave(port: int, target: Target, sessions: int, workspaces: Path) -> None:
    await asyncio.gather(*(session(port, target, chat=i % 2 == 0) for i in range(sessions)))
    # The sessions have ended on the server once their workspaces are gone (the kit);
    # the minimal app has none, so both also get the same settling time.
    deadline = time.monotonic() + 30
    while await asyncio.to_thread(_sessions_left, workspaces):
        if time.monotonic() > deadline:
            raise SystemExit("sessions did not end within 30 s")
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)


async def churn(target: Target, waves: int, sessions: int) -> list[float]:
    """RSS (MiB) after each counted wave."""
    with tempfile.TemporaryDirectory(prefix="session-churn-") as tmp:
        port = free_port()
        server = start(target, port, Path(tmp))
        workspaces = Path(tmp) / "deputy_shiny"
        try:
            await wave(port, target, sessions, workspaces)  # warm-up, not counted
            readings = []
            for _ in range(waves):
                await wave(port, target, sessions, workspaces)
                readings.append(rss_mib(server.pid))
        finally:
            server.terminate()
            server.wait(timeout=10)
    return readings


def slope(values: list[float]) -> float:
    """Least-squares slope of ``values`` against their index (per wave)."""
    n = len(values)
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    num = sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values))
    den = sum((i - mean_x) ** 2 for i in range(n))
    return num / den if den else 0.0


def report(target: Target, readings: list[float], sessions: int) -> float:
    """Print one app's figures; return its retained KiB per ended session."""
    growth = (readings[-1] - readings[0]) / readings[0] * 100
    per_session = slope(readings) * 1024 / sessions
    shown = ", ".join(f"{r:.0f}" for r in readings)
    print(f"{target.label:18} RSS after each wave (MiB): {shown}")
    print(
        f"{'':18} growth wave 1 -> {len(readings)}: {growth:+.1f} %   "
        f"trend: {slope(readings):+.2f} MiB/wave = {per_session:+.1f} KiB per ended session"
    )
    return per_session


async def main(waves: int, sessions: int) -> None:
    print(f"waves: {waves} (+1 warm-up), sessions per wave: {sessions} (half chat once)")
    kit = await churn(KIT, waves, sessions)
    minimal = await churn(MINIMAL, waves, sessions)
    kit_per = report(KIT, kit, sessions)
    min_per = report(MINIMAL, minimal, sessions)
    ratio = max(kit_per, FLOOR_KIB) / max(min_per, FLOOR_KIB)
    print(
        f"kit/minimal ratio of retained memory per ended session: {ratio:.2f} "
        f"(figures under {FLOOR_KIB:g} KiB count as {FLOOR_KIB:g} KiB)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waves", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(main(args.waves, args.sessions))
