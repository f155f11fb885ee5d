"""Submit to first text on the page, in Chromium: the kit against a minimal shinychat app.

Two apps stream the same reply (``_first_token_reply.py``: the same text, the same
chunks, the same delay between them): ``_first_token_kit.py`` (``agent_chat_server`` on
a deterministic ``FunctionModel``) and ``_first_token_minimal.py`` (shinychat's ``Chat``
fed by a plain async generator). Each is started with ``shiny run`` on loopback and
driven in Debian's Chromium (headless, Python Playwright; the flags the e2e tests use).

A try opens the app in a fresh browser context (a new Shiny session), types a message,
presses Enter and times, inside the page (``performance.now()``), from the keypress to
the moment the reply's first chunk is in the DOM.

* **First reply**: each app is started ``--starts`` times as a fresh process; as soon as
  it answers HTTP, one try. Neither app calls ``warm_up()``: the kit imports litellm in
  a worker thread as the app starts, so this shows whether the first user still waits
  for that import.
* **Warm**: then, on the last fresh servers, ``--tries`` tries on each app, interleaved
  (kit, minimal, kit, ...), and their medians.

The last line is ``ratio first reply/warm median (kit): X``; target: at most 1.5.

Usage: .venv/bin/python benchmarks/first_token.py [--tries 30] [--starts 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from _first_token_reply import FIRST_CHUNK
from concurrent_sessions import free_port, wait_until_serving
from playwright.sync_api import Browser, sync_playwright

HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
# As tests/e2e/conftest.py launches it.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 60_000  # a cold first reply may wait seconds for litellm's import


@dataclass(frozen=True)
class Target:
    """One app: its file and the id of its shinychat ``Chat`` element."""

    label: str
    app: str
    chat_id: str


KIT = Target("kit", "_first_token_kit.py", "chat-chat")
MINIMAL = Target("minimal shinychat", "_first_token_minimal.py", "chat")

# Installed before the keypress: records when Enter goes down in the chat's input and
# when the first chunk of the reply appears among the chat's messages.
_WATCH = """
([chatId, firstChunk]) => {
  const root = document.getElementById(chatId);
  const messages = root.querySelector(".shiny-chat-messages-content") || root;
  window.__submitAt = null;
  window.__firstTextAt = null;
  root.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && window.__submitAt === null) {
      window.__submitAt = performance.now();
    }
  }, { capture: true });
  const seen = () => {
    if (window.__firstTextAt !== null || window.__submitAt === null) return;
    for (const message of messages.querySelectorAll(".shiny-chat-message")) {
      if ((message.textContent || "").includes(firstChunk)) {
        window.__firstTextAt = performance.now();
        observer.disconnect();
        return;
      }
    }
  };
  const observer = new MutationObserver(seen);
  observer.observe(messages, { childList: true, subtree: true, characterData: true });
}
"""


def start(target: Target, port: int) -> tuple[subprocess.Popen[bytes], float]:
    """``shiny run`` the app; return it and the seconds until it answered HTTP."""
    env = {k: v for k, v in os.environ.items() if k != "DEPUTY_MODEL"}
    command = [sys.executable, "-m", "shiny", "run", target.app]
    command += ["--port", str(port), "--host", "127.0.0.1"]
    began = time.perf_counter()
    server = subprocess.Popen(
        command, cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_until_serving(server, port, target.label)
    return server, time.perf_counter() - began


def stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=10)


def first_text(browser: Browser, target: Target, port: int) -> float:
    """One try in a fresh context: seconds from Enter to the reply's first chunk on the page."""
    context = browser.new_context(viewport={"width": 1000, "height": 800})
    try:
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{port}/")
        page.locator(f"#{target.chat_id} [role='textbox']").wait_for(state="visible")
        page.wait_for_function(
            "() => !!(window.Shiny && Shiny.shinyapp && Shiny.shinyapp.isConnected())"
        )
        page.evaluate(_WATCH, [target.chat_id, FIRST_CHUNK])
        box = page.locator(f"#{target.chat_id} [role='textbox']")
        box.fill("go")
        box.press("Enter")
        page.wait_for_function("() => window.__firstTextAt !== null", timeout=TIMEOUT_MS)
        elapsed_ms = page.evaluate("() => window.__firstTextAt - window.__submitAt")
        return float(elapsed_ms) / 1000
    finally:
        context.close()


def cold(browser: Browser, target: Target) -> tuple[subprocess.Popen[bytes], int, float, float]:
    """A fresh server process and its very first reply.

    Returns the running server, its port, the seconds until it answered HTTP and the
    first reply's time.
    """
    port = free_port()
    server, serving = start(target, port)
    try:
        return server, port, serving, first_text(browser, target, port)
    except BaseException:
        stop(server)
        raise


def main(tries: int = 30, starts: int = 3) -> float:
    """Run the benchmark, print its figures; return the kit's first-reply/warm ratio."""
    targets = (KIT, MINIMAL)
    firsts: dict[Target, list[float]] = {t: [] for t in targets}
    warm: dict[Target, list[float]] = {t: [] for t in targets}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            servers: dict[Target, subprocess.Popen[bytes]] = {}
            ports: dict[Target, int] = {}
            try:
                for start_index in range(starts):
                    for target in targets:
                        server, port, serving, first = cold(browser, target)
                        firsts[target].append(first)
                        print(
                            f"{target.label:18} fresh process: serving after {serving:5.2f} s,"
                            f" first reply {first * 1000:7.1f} ms"
                        )
                        if start_index < starts - 1:
                            stop(server)
                        else:  # the last fresh servers serve the warm tries
                            servers[target], ports[target] = server, port
                for _ in range(tries):
                    for target in targets:
                        warm[target].append(first_text(browser, target, ports[target]))
            finally:
                for server in servers.values():
                    stop(server)
        finally:
            browser.close()
    print(f"tries: {tries} per app (interleaved), fresh starts: {starts} per app")
    for target in targets:
        print(
            f"{target.label:18} warm median {statistics.median(warm[target]) * 1000:7.1f} ms"
            f"   max {max(warm[target]) * 1000:7.1f} ms"
            f"   first reply after start (median of {starts}) "
            f"{statistics.median(firsts[target]) * 1000:7.1f} ms"
        )
    kit_warm = statistics.median(warm[KIT])
    print(f"warm median kit/minimal: {kit_warm / statistics.median(warm[MINIMAL]):.2f}")
    ratio = statistics.median(firsts[KIT]) / kit_warm
    print(f"ratio first reply/warm median (kit): {ratio:.2f}")
    return ratio


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=30)
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    main(args.tries, args.starts)
