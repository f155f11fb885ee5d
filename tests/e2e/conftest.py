"""Browser-test infrastructure: scenario apps as subprocesses, Debian's Chromium, pages.

- ``serve_app`` (module scope) starts a scenario app from ``tests/e2e/apps/`` with
  ``python -m shiny run`` on a free port, once per test module and set of environment
  overrides, and stops it when the module is done. Apps modules name in their
  ``E2E_APPS`` (a file, or ``(file, {overrides})``) are launched one module ahead, so
  their slow first import (litellm) overlaps with the previous module's tests. Each
  server gets its own workspace root (``DEPUTY_E2E_WORKSPACE``), marker directory
  (``DEPUTY_E2E_MARKERS``) and conversations directory (``DEPUTY_CONVERSATIONS_DIR``).
- ``browser`` is ``/usr/bin/chromium`` driven by Playwright's sync API, launched once
  for all browser tests and stopped after the last one; Playwright's own browser
  download is never used.
- ``page`` is a fresh browser context per test; ``new_page`` opens more (each one its
  own context, so its own Shiny session).
- ``image_listener`` is a local HTTP server that records every request it gets.

When a test fails, the report gets screenshots of its pages, their console output and
the tail of each running app's log.
"""

from __future__ import annotations

import http.server
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _pytest.nodeid import coerce_node_id
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    Playwright,
    expect,
    sync_playwright,
)

from deputy_shiny.shiny.playwright import AgentChat

ROOT = Path(__file__).resolve().parents[2]
E2E = Path(__file__).resolve().parent
APPS = E2E / "apps"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STARTUP_TIMEOUT = 90.0
LOOKAHEAD = 2  # apps launched ahead of the module that uses them
_LAUNCHED_AHEAD: list[bool] = []  # a worker of pytest -n: its first browser test launched
ARTIFACTS = Path(tempfile.gettempdir()) / "deputy_shiny-e2e"

# The scenario apps are started by `shiny run`, never imported by pytest.
collect_ignore_glob = ["apps/*"]

# The first model request of an app may wait for litellm's import (seconds on 2 cores).
expect.set_options(timeout=15_000)


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class AppServer:
    """A running scenario app: its URL, its process, its log and its directories."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    workspace_root: Path
    markers: Path
    conversations: Path  # DEPUTY_CONVERSATIONS_DIR (the reference app saves there)

    def log(self) -> str:
        """Everything the server wrote to stdout and stderr so far."""
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's log, without static-file access lines."""
        kept = [line for line in self.log().splitlines() if '"GET /lib/' not in line]
        return "\n".join(kept[-lines:])

    def events(self) -> list[str]:
        """The lines the app wrote to ``$DEPUTY_E2E_MARKERS/events.log`` (time stripped)."""
        path = self.markers / "events.log"
        if not path.exists():
            return []
        return [line.split(" ", 1)[1] for line in path.read_text().splitlines() if " " in line]

    def wait_for_event(self, pattern: str, timeout: float = 10.0) -> re.Match[str]:
        """Wait until a marker line matches ``pattern`` (``re.search``); return the match."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            for line in self.events():
                match = regex.search(line)
                if match:
                    return match
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no marker matching {pattern!r} within {timeout} s; markers: {self.events()}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """Terminate the server (kill it if it does not exit within 5 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


_RUNNING: list[AppServer] = []
# An app and its environment overrides: what `serve_app` starts, and shares per module.
AppKey = tuple[str, tuple[tuple[str, str], ...]]
_PLAN: list[AppKey] = []  # E2E_APPS of the selected modules, in test order
_PRESTARTED: dict[AppKey, AppServer] = {}  # launched ahead, not yet used by a module
_ADOPTED: set[AppKey] = set()
_PRESTART_DIRS: list[Path] = []


def open_chats(page: Page, app: AppServer, *module_ids: str) -> list[AgentChat]:
    """Open ``app`` in ``page`` and wait until each kit chat (by module id) is ready."""
    page.goto(app.url)
    chats = [AgentChat(page, module_id) for module_id in module_ids]
    for chat in chats:
        chat.expect_ready()
    return chats


def open_chat(page: Page, app: AppServer, module_id: str = "agent") -> AgentChat:
    """Open ``app`` in ``page`` and wait until its kit chat is ready."""
    return open_chats(page, app, module_id)[0]


def _app_path(app_file: str) -> Path:
    path = APPS / app_file  # an absolute app_file stays as it is
    if not path.is_file():
        raise FileNotFoundError(f"no scenario app {path}")
    return path


def _launch(app_file: Path, directory: Path, env_overrides: dict[str, str]) -> AppServer:
    """Start ``shiny run <app_file>`` on a free port (without waiting for it)."""
    port = free_port()
    workspace_root = directory / "workspaces"
    markers = directory / "markers"
    workspace_root.mkdir()
    markers.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "DEPUTY_MODEL"}
    env.update(
        PYTHONUNBUFFERED="1",
        DEPUTY_E2E_WORKSPACE=str(workspace_root),
        DEPUTY_E2E_MARKERS=str(markers),
        # The reference app's saved conversations: the server's own, never the shared
        # default under the system temp dir.
        DEPUTY_CONVERSATIONS_DIR=str(directory / "conversations"),
    )
    env.update(env_overrides)  # may name DEPUTY_CONVERSATIONS_DIR: a folder servers share
    log_path = directory / "server.log"
    command = [sys.executable, "-m", "shiny", "run", str(app_file)]
    command += ["--port", str(port), "--host", "127.0.0.1"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    return AppServer(
        name=app_file.name,
        url=f"http://127.0.0.1:{port}",
        process=process,
        log_path=log_path,
        workspace_root=workspace_root,
        markers=markers,
        conversations=Path(env["DEPUTY_CONVERSATIONS_DIR"]),
    )


def _wait_ready(server: AppServer) -> AppServer:
    """Wait until the server answers HTTP 200 (its output in the error if it dies)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"{server.name} exited with code {server.process.returncode} before serving "
                f"its page. Its output:\n{server.log()}"
            )
        try:
            with urllib.request.urlopen(server.url, timeout=2) as response:
                if response.status == 200:
                    return server
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(
                f"{server.name} did not answer HTTP 200 within {STARTUP_TIMEOUT:.0f} s. "
                f"Its output:\n{server.log()}"
            )
        time.sleep(0.1)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Plan the apps the selected test modules declare in ``E2E_APPS``; launch the first.

    An app's first model request waits for litellm's import (seconds of CPU). While
    one module's tests run, ``serve_app`` launches the next modules' apps, so that
    import overlaps with the tests instead of adding to them. (Launching them all at
    once only makes them compete for the CPU: 2 cores here.)
    """
    if session.config.option.collectonly:
        return
    _plan(session.items)
    if _xdist_worker(session.config):
        return  # this worker may run no browser test: its first one launches them
    for key in _PLAN[:LOOKAHEAD]:
        _prelaunch(key)


def _xdist_worker(config: pytest.Config) -> bool:
    """True in a worker of ``pytest -n`` (each collects every test, runs some)."""
    return hasattr(config, "workerinput")


def _plan(items: list[pytest.Item]) -> None:
    """The apps the selected modules declare in ``E2E_APPS``, in the order they run."""
    for item in items:
        for entry in getattr(getattr(item, "module", None), "E2E_APPS", ()):
            key = _app_key(*entry) if isinstance(entry, tuple) else _app_key(entry)
            if key not in _PLAN:
                _PLAN.append(key)


def _app_key(app_file: str, env_overrides: dict[str, str] | None = None) -> AppKey:
    """``E2E_APPS`` entries are an app's file, or ``(file, {overrides})`` for a server the
    module starts with fixed environment overrides (``serve_app(file, **overrides)``)."""
    return app_file, tuple(sorted((env_overrides or {}).items()))


def _prelaunch(key: AppKey) -> None:
    """Launch ``key``'s app (without waiting) unless it was launched before."""
    if key in _PRESTARTED or key in _ADOPTED:
        return
    if not _PRESTART_DIRS:
        _PRESTART_DIRS.append(Path(tempfile.mkdtemp(prefix="deputy_shiny-e2e-")))
    app_file, overrides = key
    path = _app_path(app_file)
    directory = _PRESTART_DIRS[0] / f"{len(_PRESTARTED) + len(_ADOPTED)}-{path.stem}"
    directory.mkdir()
    _PRESTARTED[key] = _launch(path, directory, dict(overrides))


def _prelaunch_after(key: AppKey) -> None:
    """Launch the ``LOOKAHEAD`` apps planned after ``key``."""
    if key in _PLAN:
        start = _PLAN.index(key) + 1
        for following in _PLAN[start : start + LOOKAHEAD]:
            _prelaunch(following)


def pytest_collection_modifyitems(session: pytest.Session, items: list[pytest.Item]) -> None:
    """Run the harness checks first among the browser tests.

    If the browser or server start is broken, that is the first failure; and the
    harness needs no model, so the next apps warm up meanwhile. Under ``pytest -n``
    the browser tests are one group, run in order by one worker (one browser, the apps
    launched ahead of their modules), while the other workers run the rest.
    """
    harness = E2E / "test_harness.py"
    positions = [i for i, item in enumerate(items) if item.path.parent == E2E]
    ordered = sorted((items[i] for i in positions), key=lambda item: item.path != harness)
    for position, item in zip(positions, ordered, strict=True):
        items[position] = item
    if session.config.pluginmanager.hasplugin("xdist") and getattr(
        session.config.option, "loadgroup", False
    ):
        # What xdist does for an ``xdist_group`` mark (its scheduler groups by the node id's
        # "@" suffix), done here: xdist 3.8 writes ``item._nodeid``, which pytest 9.2 no
        # longer reads (its node id is ``item._id``), so its own marks group nothing.
        for item in ordered:
            if not item.nodeid.endswith("@browser"):
                item._id = coerce_node_id(f"{item.nodeid}@browser")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """In a worker of ``pytest -n``, the first browser test launches the first apps."""
    if item.path.is_relative_to(E2E) and _xdist_worker(item.config) and not _LAUNCHED_AHEAD:
        _LAUNCHED_AHEAD.append(True)
        for key in _PLAN[:LOOKAHEAD]:
            _prelaunch(key)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the browser and the prestarted apps no test adopted; remove their directories."""
    _CHROMIUM.stop()
    for server in _PRESTARTED.values():
        server.stop()
    _PRESTARTED.clear()
    for directory in _PRESTART_DIRS:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def serve_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., AppServer]]:
    """Start a scenario app once per test module: ``serve_app("approvals.py", KEY="v")``.

    A relative name is a file in ``tests/e2e/apps/``; an absolute path is used as is.
    The same file with the same environment overrides is started only once per
    module (an app the module lists in ``E2E_APPS`` may have been launched ahead);
    every server is stopped when the module's tests are done. ``wait=False`` launches
    it without waiting until it serves (a later call waits), so several servers a
    module needs start side by side.
    """
    started: dict[AppKey, AppServer] = {}
    serving: set[AppKey] = set()

    def serve(app_file: str, *, wait: bool = True, **env_overrides: str) -> AppServer:
        key = _app_key(app_file, env_overrides)
        if key not in started:
            server = _PRESTARTED.pop(key, None)
            _ADOPTED.add(key)
            if server is None:
                path = _app_path(app_file)
                server = _launch(path, tmp_path_factory.mktemp(path.stem), env_overrides)
            _RUNNING.append(server)
            started[key] = server
        server = started[key]
        if wait and key not in serving:
            try:
                _wait_ready(server)
            except BaseException:
                _RUNNING.remove(server)
                del started[key]
                server.stop()
                raise
            serving.add(key)
            _prelaunch_after(key)
        return server

    try:
        yield serve
    finally:
        for server in started.values():
            server.stop()
            _RUNNING.remove(server)


class _Chromium:
    """Playwright and Debian's Chromium: started on first use, stopped after the last e2e test.

    While Playwright's sync API is started, its event loop counts as running in the
    main thread, so any later test that checks for a running loop (``asyncio.run``,
    ``Agent.run_sync``) would fail: the browser must not outlive the browser tests.
    """

    def __init__(self) -> None:
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None

    def get(self) -> Browser:
        if self._browser is None:
            self._playwright = sync_playwright().start()
            self._browser = self._playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
        return self._browser

    def stop(self) -> None:
        browser, playwright = self._browser, self._playwright
        self._browser = self._playwright = None
        if browser is not None:
            browser.close()
        if playwright is not None:
            playwright.stop()


_CHROMIUM = _Chromium()


@pytest.fixture
def browser() -> Browser:
    """Debian's Chromium, headless, driven by Playwright (no Playwright browser download).

    One browser serves all browser tests; it is stopped after the last of them.
    """
    return _CHROMIUM.get()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the browser when the next test is not a browser test."""
    if nextitem is None or not nextitem.path.is_relative_to(E2E):
        _CHROMIUM.stop()


@dataclass
class _PageRecord:
    page: Page
    console: list[str] = field(default_factory=list)


_PAGES = pytest.StashKey[list[_PageRecord]]()


@pytest.fixture
def new_page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Callable[[], Page]]:
    """Open a page in a fresh browser context (a separate Shiny session each time).

    A script error on any page of these contexts fails the test: after one, the kit's
    script may have stopped working (its buttons do nothing) while the page looks fine.
    """
    records: list[_PageRecord] = []
    request.node.stash[_PAGES] = records
    script_errors: list[str] = []

    def open_page() -> Page:
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        context.set_default_timeout(15_000)
        context.on("weberror", lambda error: script_errors.append(str(error.error)))
        page = context.new_page()
        record = _PageRecord(page)

        def on_console(message: ConsoleMessage) -> None:
            record.console.append(f"[{message.type}] {message.text}")

        page.on("console", on_console)
        page.on("pageerror", lambda error: record.console.append(f"[pageerror] {error}"))
        records.append(record)
        return page

    try:
        yield open_page
    finally:
        for record in records:
            with suppress(Exception):  # already closed by the test
                record.page.context.close()
    assert script_errors == [], f"script errors in the browser: {script_errors}"


@pytest.fixture
def page(new_page: Callable[[], Page]) -> Page:
    """A page in a fresh browser context."""
    return new_page()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call" and report.failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)[-120:]
        none: list[_PageRecord] = []
        records = item.stash.get(_PAGES, none)
        for index, record in enumerate(records):
            lines = []
            if not record.page.is_closed():
                shot = ARTIFACTS / f"{slug}-page{index}.png"
                try:
                    record.page.screenshot(path=str(shot), full_page=True)
                    lines.append(f"screenshot: {shot}")
                except Exception as exc:
                    lines.append(f"screenshot failed: {exc}")
            lines.extend(record.console[-30:])
            report.sections.append((f"page {index}", "\n".join(lines)))
        for server in _RUNNING:
            report.sections.append((f"server log: {server.name}", server.log_tail()))
    return report


@dataclass
class ImageListener:
    """A local HTTP server that answers every GET with a 1x1 PNG and records the paths."""

    port: int
    requests: list[str]

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def clear(self) -> None:
        """Forget the requests recorded so far."""
        self.requests.clear()


_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@contextmanager
def _listen() -> Iterator[ImageListener]:
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(_PNG)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(_PNG)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="image-listener", daemon=True)
    thread.start()
    try:
        yield ImageListener(port=int(server.server_address[1]), requests=seen)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def image_listener() -> Iterator[ImageListener]:
    """A listener on a free port; ``listener.requests`` lists the paths fetched from it."""
    with _listen() as listener:
        yield listener


@pytest.fixture(scope="module")
def other_image_listener() -> Iterator[ImageListener]:
    """A second listener: another origin (same host, another port)."""
    with _listen() as listener:
        yield listener
