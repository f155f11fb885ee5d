"""How many streaming users does one process hold? The kit against shinychat and chatlas.

Issue #21's capacity benchmark. Every app streams the same reply: ``--chunks`` chunks
(200), ``--interval`` apart (20 ms, 50 chunks a second), 7 characters each and all
different (``_capacity_reply.py``). Two modes, in one invocation (``--mode both``):

* **provider**: ``_capacity_minimal.py`` (shinychat's ``Chat`` fed by a plain async
  generator), ``_capacity_by_hand.py`` (``Chat`` fed by ``litellm.acompletion(stream=True)``
  on the deterministic ``CustomLLM`` provider the kit's test models register) and
  ``_capacity_kit.py`` (``agent_chat_server`` with a ``FunctionModel`` on that provider).
* **wire**: a fake OpenAI chat-completions server in its own process
  (``_fake_openai.py``: the same chunks as SSE events, then a usage chunk) and four apps:
  minimal (no HTTP), chatlas (``ChatOpenAICompletions(base_url=...)`` + shinychat, one
  client per session, the way chatlas's docs stream into shinychat), litellm by hand over
  HTTP (``openai/fake-model`` with ``api_base``) and the kit with
  ``ChatModel("openai/fake-model", api_base=...)``.

Method. Each app runs with ``python -m shiny run`` on a free loopback port; N websocket
clients in this process speak Shiny's protocol (no browser). At each N of ``--ladder``
every app gets a **fresh server** (so no N inherits another's leftovers: a failed N's
lagging streams, memory, a warmer cache), all of that N's servers are started together
and then measured one at a time while the others idle, in an order rotated at every N
and run (interleaved, so drift in the machine's load is shared). Before measuring, one
warm-up session gets a 5-chunk reply (litellm's import and first-request costs are not
what this measures; ``benchmarks/first_token.py``'s cold first reply is). Then:

1. all N sessions are opened at once; a session's **start** is the time from sending
   ``init`` to the first ``values`` message. Nobody streams until all have started;
2. all N submit at once; **burst** is each session's time from its submit to its first
   text, and every arrival of a message that carries new text is recorded.

An app **holds** N when every session received the complete text (its characters
counted), the p99 gap between consecutive text arrivals (pooled over the sessions) is
at most 150 ms, and the text **keeps pace**: in every session the time from its first to
its last text is at most 1.5x the generator's own duration (chunks x interval). Pace
stands in for the issue's "p50 gap at most 1.5x the chunk interval" because the kit is
to coalesce text (a flush every ~40 ms carrying several chunks): its gaps would be
~40 ms by design though it keeps up, while an app that falls behind stretches the reply,
which the span shows whatever the message size. **Sessions held** is the largest N held
before an app first fails; it is not measured at larger N after that, except at the
ladder steps nearest 10 and 20, which the start and burst ratios use.

It prints one line per app and N (start p50/max, burst median, gap p50/p99, the
longest span over the reply's duration, complete sessions, held), then each app's
sessions held per run, and last the ratios of each mode (medians over ``--runs``):
``ratio kit/minimal sessions held``, ``ratio kit/by-hand sessions held``, in wire mode
``ratio kit/chatlas sessions held``, then kit/minimal start p50 at 20 sessions and
burst at 10. Targets (#21): held kit/minimal >= 0.5, kit/by-hand >= 1.5, kit/chatlas
>= 1.0; start and burst ratios <= 2. Bounded: loopback only, every phase has a timeout,
servers are killed at the end.

Scale-out (``--processes P``, P > 1; provider mode only). The kit on one process and on
P processes, each side behind an nginx of its own (``tests/_nginx.py``: Debian's nginx, a
config in a temp dir) that spreads the N sessions over its processes by a ``route``
cookie, the way a sticky proxy spreads browsers; the rest of the method is the same. It
prints the rows (mode ``nginx``, apps ``kit-1p`` and ``kit-<P>p``), sessions held per
run, and last ``ratio kit P processes/1 process sessions held``.

Usage: .venv/bin/python benchmarks/capacity.py [--mode both] [--ladder 10,20,40,80,160]
       [--runs 1] [--chunks 200] [--interval 0.02] [--processes 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import websockets

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MAX_P99_GAP = 0.150  # seconds
MAX_PACE = 1.5  # a reply may take this many times the generator's own duration
RATIO_POINTS = (10, 20)  # burst ratio at 10 sessions, start ratio at 20
SERVE_TIMEOUT = 180.0  # seconds for all of one N's servers to start (they start together)
MODES = ("provider", "wire")


@dataclass(frozen=True)
class AppSpec:
    """One app under test: its label, its file in ``benchmarks/`` and its chat's input id."""

    label: str
    file: str
    chat_input: str

    @property
    def needs_wire(self) -> bool:
        return self.file != "_capacity_minimal.py"


_SHINYCHAT = "chat_user_input:shinychat.userInput"
MINIMAL = AppSpec("minimal", "_capacity_minimal.py", _SHINYCHAT)
BY_HAND = AppSpec("by-hand", "_capacity_by_hand.py", _SHINYCHAT)
CHATLAS = AppSpec("chatlas", "_capacity_chatlas.py", _SHINYCHAT)
KIT = AppSpec("kit", "_capacity_kit.py", "chat-" + _SHINYCHAT)
APPS = {"provider": (MINIMAL, BY_HAND, KIT), "wire": (MINIMAL, CHATLAS, BY_HAND, KIT)}


@dataclass
class Sample:
    """What one websocket session saw."""

    start: float | None = None  # init -> first values message, seconds
    first: float | None = None  # submit -> first text, seconds
    arrivals: list[float] = field(default_factory=list)  # perf_counter of each text message
    chars: int = 0
    complete: bool = False
    error: str = ""


@dataclass(frozen=True)
class Result:
    """One app at one N."""

    app: str
    n: int
    start_p50: float
    start_max: float
    burst_p50: float
    gap_p50: float
    gap_p99: float
    pace: float  # the longest first-to-last text span / the generator's duration
    complete: int
    held: bool
    why: str  # what failed, or ""


@dataclass(frozen=True)
class Config:
    """One invocation's reply shape (the apps read it from the environment)."""

    chunks: int
    interval: float
    max_gap: float = MAX_P99_GAP

    @property
    def chars(self) -> int:
        return 7 * self.chunks

    @property
    def duration(self) -> float:
        return self.chunks * self.interval


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def raise_fd_limit() -> None:
    """Lift the soft open-files limit to the hard one (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@dataclass
class Server:
    """A subprocess serving HTTP on a loopback port, with its stderr in a log file."""

    label: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        """Terminate (then kill) the process; safe to call twice."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def tail(self) -> str:
        """The last lines of the server's stderr (why it did not start)."""
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(lines[-15:])


def spawn(label: str, command: list[str], env: dict[str, str], tmp: Path) -> Server:
    """Start ``command`` in ``benchmarks/`` on a fresh port (``{port}`` in it is replaced)."""
    port = free_port()
    log = tmp / f"{label}-{port}.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [part.replace("{port}", str(port)) for part in command],
            cwd=HERE,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    return Server(label, port, process, log)


async def wait_serving(servers: Sequence[Server], within: float) -> None:
    """Wait until every server answers ``GET /``; raise naming the first that cannot."""

    def answers(port: int) -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).close()
            return True
        except OSError:
            return False

    deadline = time.monotonic() + within
    waiting = list(servers)
    while waiting:
        for server in list(waiting):
            if await asyncio.to_thread(answers, server.port):
                waiting.remove(server)
            elif server.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{server.label} did not start:\n{server.tail()}")
        if waiting:
            await asyncio.sleep(0.2)


def log(message: str) -> None:
    """Progress on stderr (the table and ratios go to stdout)."""
    print(message, file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) the process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def settle(servers: Sequence[Server], within: float = 60.0) -> None:
    """Wait until no live server is busy (the kit imports litellm in a thread after it
    serves; a server still starting would steal CPU from the one being measured)."""
    deadline = time.monotonic() + within
    live = [s for s in servers if s.process.poll() is None]
    while live and time.monotonic() < deadline:
        before = [cpu_seconds(s.process.pid) for s in live]
        await asyncio.sleep(0.3)
        used = [cpu_seconds(s.process.pid) - b for s, b in zip(live, before, strict=True)]
        if max(used) < 0.03:  # under 10 % of a core each
            return


def app_env(config: Config, tmp: Path, base_url: str) -> dict[str, str]:
    """The apps' environment: the reply shape, this checkout first on the path."""
    env = {k: v for k, v in os.environ.items() if k != "DEPUTY_MODEL"}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), str(HERE), env.get("PYTHONPATH", "")) if p
    )
    env["TMPDIR"] = str(tmp)  # the kit's per-session workspaces
    env["CAPACITY_CHUNKS"] = str(config.chunks)
    env["CAPACITY_INTERVAL"] = str(config.interval)
    env["CAPACITY_BASE_URL"] = base_url
    return env


def shiny_command(app: AppSpec) -> list[str]:
    """``shiny run`` the app on loopback (``{port}`` is filled in by :func:`spawn`)."""
    return [
        sys.executable,
        "-m",
        "shiny",
        "run",
        app.file,
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
    ]


# --------------------------------------------------------------------------- clients


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


# --------------------------------------------------------------------------- figures


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def judge(app: str, n: int, samples: Sequence[Sample], config: Config) -> Result:
    """The figures of one app at one N, and whether it held N."""
    starts = [s.start for s in samples if s.start is not None]
    firsts = [s.first for s in samples if s.first is not None]
    gaps = [b - a for s in samples for a, b in zip(s.arrivals, s.arrivals[1:], strict=False)]
    spans = [s.arrivals[-1] - s.arrivals[0] for s in samples if s.arrivals]
    complete = sum(1 for s in samples if s.complete and s.chars == config.chars)
    pace = max(spans, default=float("nan")) / config.duration
    p99 = percentile(gaps, 99)
    why = []
    if complete < n:
        errors = sorted({s.error for s in samples if s.error})
        why.append(f"complete {complete}/{n}" + (f" ({errors[0]})" if errors else ""))
    if not p99 <= config.max_gap:
        why.append(f"p99 gap > {config.max_gap * 1000:.0f} ms")
    if not pace <= MAX_PACE:
        why.append(f"pace > {MAX_PACE}x")
    return Result(
        app=app,
        n=n,
        start_p50=statistics.median(starts) if starts else float("nan"),
        start_max=max(starts, default=float("nan")),
        burst_p50=statistics.median(firsts) if firsts else float("nan"),
        gap_p50=percentile(gaps, 50),
        gap_p99=p99,
        pace=pace,
        complete=complete,
        held=not why,
        why="; ".join(why),
    )


HEADER = (
    f"{'mode':8} {'app':8} {'N':>4} {'start p50':>9} {'max':>6} {'burst p50':>9} "
    f"{'gap p50':>8} {'p99':>7} {'pace':>5} {'complete':>9}  held"
)


def row(mode: str, result: Result) -> str:
    """One table line (seconds for start and burst, milliseconds for gaps)."""
    r = result
    held = "yes" if r.held else f"no ({r.why})"
    return (
        f"{mode:8} {r.app:8} {r.n:>4} {r.start_p50:>8.2f}s {r.start_max:>5.2f}s "
        f"{r.burst_p50:>8.2f}s {r.gap_p50 * 1000:>6.1f}ms {r.gap_p99 * 1000:>5.0f}ms "
        f"{r.pace:>5.2f} {f'{r.complete}/{r.n}':>9}  {held}"
    )


def nearest(ladder: Sequence[int], target: int) -> int:
    """The ladder step nearest ``target`` (the smaller on a tie)."""
    return min(ladder, key=lambda n: (abs(n - target), n))


# --------------------------------------------------------------------------- driver


@dataclass
class Ledger:
    """Every result of one invocation: ``results[mode][run][app] = [Result per N]``."""

    results: dict[str, list[dict[str, list[Result]]]] = field(default_factory=dict)

    def add(self, mode: str, run: int, result: Result) -> None:
        runs = self.results.setdefault(mode, [])
        while len(runs) <= run:
            runs.append({})
        runs[run].setdefault(result.app, []).append(result)

    def failed(self, mode: str, run: int, app: str) -> bool:
        runs = self.results.get(mode, [])
        return run < len(runs) and any(not r.held for r in runs[run].get(app, []))

    def held(self, mode: str, run: int, app: str) -> int:
        """The largest N held before the app first failed (0: none)."""
        best = 0
        for result in sorted(self.results[mode][run].get(app, []), key=lambda r: r.n):
            if not result.held:
                break
            best = result.n
        return best

    def at(self, mode: str, app: str, n: int, attr: str) -> float:
        """The median over runs of one figure of ``app`` at ``n`` (NaN if never measured)."""
        values = [
            getattr(r, attr)
            for run in self.results.get(mode, [])
            for r in run.get(app, [])
            if r.n == n
        ]
        return statistics.median(values) if values else float("nan")


def rotated(items: Sequence[AppSpec], by: int) -> list[AppSpec]:
    k = by % len(items)
    return list(items[k:]) + list(items[:k])


async def one_step(
    n: int,
    wanted: list[tuple[str, AppSpec]],
    config: Config,
    tmp: Path,
    base_url: str,
    starting: Sequence[Server] = (),
) -> list[tuple[str, Result]]:
    """Fresh servers for every (mode, app) of this N, measured one at a time.

    ``starting``: servers started elsewhere (the fake OpenAI server) that must serve
    before anything is measured; they start together with this N's servers.
    """
    servers: list[Server] = []
    out: list[tuple[str, Result]] = []
    try:
        for mode, app in wanted:
            url = base_url if mode == "wire" and app.needs_wire else ""
            env = app_env(config, tmp, url)
            servers.append(spawn(f"{mode}-{app.label}", shiny_command(app), env, tmp))
        began = time.monotonic()
        await wait_serving([*starting, *servers], SERVE_TIMEOUT)
        log(f"N={n}: {len(servers)} servers up in {time.monotonic() - began:.1f} s")
        for (mode, app), server in zip(wanted, servers, strict=True):
            began = time.monotonic()
            await settle(servers)
            log(f"N={n}: {mode} {app.label}: others idle after {time.monotonic() - began:.1f} s")
            warm = await warm_up(server.port, app.chat_input)
            cpu, wall = time.process_time(), time.monotonic()
            samples = await measure(server.port, app, n, config) if warm.complete else []
            # If the clients (this process) were near a full core, they were the limit.
            cpu, wall = time.process_time() - cpu, time.monotonic() - wall
            log(f"N={n}: {mode} {app.label}: clients used {cpu:.1f} s CPU in {wall:.1f} s")
            server.stop()  # its memory and any lagging streams go before the next app
            result = judge(app.label, n, samples, config)
            if not warm.complete:
                result = dataclasses.replace(result, held=False, why=f"warm-up: {warm.error}")
            out.append((mode, result))
            print(row(mode, out[-1][1]), flush=True)
    finally:
        for server in servers:
            server.stop()
    return out


async def run_all(
    modes: Sequence[str], ladder: Sequence[int], runs: int, config: Config, tmp: Path
) -> Ledger:
    """Climb the ladder ``runs`` times for every mode's apps; return every result."""
    ledger = Ledger()
    keep = {nearest(ladder, point) for point in RATIO_POINTS}
    fake: Server | None = None
    try:
        base_url = ""
        starting: list[Server] = []  # waited for with the first N's servers
        if "wire" in modes:
            command = [sys.executable, "_fake_openai.py", "--port", "{port}"]
            command += ["--chunks", str(config.chunks), "--interval", str(config.interval)]
            fake = spawn("fake-openai", command, app_env(config, tmp, ""), tmp)
            starting.append(fake)
            base_url = f"http://127.0.0.1:{fake.port}/v1"
        print(HEADER, flush=True)
        for run in range(runs):
            for step, n in enumerate(ladder):
                wanted = [
                    (mode, app)
                    for mode in modes
                    for app in rotated(APPS[mode], run + step)
                    if n in keep or not ledger.failed(mode, run, app.label)
                ]
                if wanted:
                    step_results = await one_step(n, wanted, config, tmp, base_url, starting)
                    starting = []
                    for mode, result in step_results:
                        ledger.add(mode, run, result)
    finally:
        if fake is not None:
            fake.stop()
    return ledger


# --------------------------------------------------------------------------- scale-out

SCALE_MODE = "nginx"  # the mode column of the --processes rows


def scale_label(count: int) -> str:
    """The app column of the kit on ``count`` processes behind nginx."""
    return f"kit-{count}p"


async def scale_step(n: int, counts: Sequence[int], config: Config, tmp: Path) -> list[Result]:
    """For each process count, that many fresh kit servers behind an nginx of their own
    (sessions spread over them by the ``route`` cookie, as a sticky proxy spreads
    browsers), all started together, then measured one count at a time while the others
    idle. nginx is in front of the one-process side too, so both pay the same hop."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests._nginx import Nginx, start_nginx  # the tests' helper: one config, one place

    groups: list[tuple[int, list[Server]]] = []
    proxies: list[Nginx] = []
    out: list[Result] = []
    try:
        for count in counts:
            env = app_env(config, tmp, "")
            label = scale_label(count)
            groups.append(
                (count, [spawn(f"{label}-{i}", shiny_command(KIT), env, tmp) for i in range(count)])
            )
        everyone = [server for _, servers in groups for server in servers]
        began = time.monotonic()
        await wait_serving(everyone, SERVE_TIMEOUT)
        for _, servers in groups:
            upstreams = {f"p{i}": server.port for i, server in enumerate(servers)}
            proxies.append(await asyncio.to_thread(start_nginx, upstreams))
        log(f"N={n}: {len(everyone)} servers up in {time.monotonic() - began:.1f} s")
        for (count, servers), proxy in zip(groups, proxies, strict=True):
            label, routes = scale_label(count), [f"p{i}" for i in range(count)]
            await settle(everyone)
            warm = [await warm_up(proxy.port, KIT.chat_input, route) for route in routes]
            cold = [w for w in warm if not w.complete]
            samples = [] if cold else await measure(proxy.port, KIT, n, config, routes)
            for server in servers:
                server.stop()
            result = judge(label, n, samples, config)
            if cold:
                result = dataclasses.replace(result, held=False, why=f"warm-up: {cold[0].error}")
            out.append(result)
            print(row(SCALE_MODE, result), flush=True)
    finally:
        for proxy in proxies:
            proxy.stop()
        for _, servers in groups:
            for server in servers:
                server.stop()
    return out


async def run_scale(
    ladder: Sequence[int], runs: int, config: Config, tmp: Path, processes: int
) -> Ledger:
    """Climb the ladder ``runs`` times for the kit on 1 and on ``processes`` processes."""
    ledger = Ledger()
    print(HEADER, flush=True)
    for run in range(runs):
        for step, n in enumerate(ladder):
            counts = [1, processes] if (run + step) % 2 == 0 else [processes, 1]
            wanted = [c for c in counts if not ledger.failed(SCALE_MODE, run, scale_label(c))]
            if wanted:
                for result in await scale_step(n, wanted, config, tmp):
                    ledger.add(SCALE_MODE, run, result)
    return ledger


def summarize_scale(ledger: Ledger, runs: int, processes: int) -> dict[str, dict[str, int]]:
    """Print sessions held per process count and run, then the ratio last."""
    held: dict[str, int] = {}
    for count in (1, processes):
        label = scale_label(count)
        per_run = [ledger.held(SCALE_MODE, run, label) for run in range(runs)]
        held[label] = int(statistics.median(per_run))
        shown = ", ".join(str(h) for h in per_run)
        print(f"{SCALE_MODE:8} {label:8} sessions held per run: {shown}")
    ratio = _ratio(held[scale_label(processes)], held[scale_label(1)])
    print(f"ratio kit {processes} processes/1 process sessions held: {ratio:.2f}")
    return {SCALE_MODE: held}


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("inf") if a else float("nan")


def summarize(
    ledger: Ledger, modes: Sequence[str], ladder: Sequence[int], runs: int
) -> dict[str, dict[str, int]]:
    """Print sessions held per app and run, then the ratios last; return held (medians)."""
    held: dict[str, dict[str, int]] = {}
    for mode in modes:
        held[mode] = {}
        for app in APPS[mode]:
            per_run = [ledger.held(mode, run, app.label) for run in range(runs)]
            held[mode][app.label] = int(statistics.median(per_run))
            shown = ", ".join(str(h) for h in per_run)
            print(f"{mode:8} {app.label:8} sessions held per run: {shown}")
    start_n, burst_n = nearest(ladder, 20), nearest(ladder, 10)
    for mode in modes:
        h = held[mode]
        print(f"mode: {mode}")
        print(f"ratio kit/minimal sessions held: {_ratio(h['kit'], h['minimal']):.2f}")
        print(f"ratio kit/by-hand sessions held: {_ratio(h['kit'], h['by-hand']):.2f}")
        if "chatlas" in h:
            print(f"ratio kit/chatlas sessions held: {_ratio(h['kit'], h['chatlas']):.2f}")
        start = _ratio(
            ledger.at(mode, "kit", start_n, "start_p50"),
            ledger.at(mode, "minimal", start_n, "start_p50"),
        )
        burst = _ratio(
            ledger.at(mode, "kit", burst_n, "burst_p50"),
            ledger.at(mode, "minimal", burst_n, "burst_p50"),
        )
        print(f"ratio kit/minimal start p50 at {start_n} sessions: {start:.2f}")
        print(f"ratio kit/minimal burst time to first chunk at {burst_n} sessions: {burst:.2f}")
    return held


async def main(
    mode: str = "both",
    ladder: Sequence[int] = (10, 20, 40, 80, 160),
    runs: int = 1,
    chunks: int = 200,
    interval: float = 0.02,
    max_gap: float = MAX_P99_GAP,
    processes: int = 1,
) -> dict[str, dict[str, int]]:
    """Run the benchmark and print its table and ratios; return sessions held per mode/app.

    ``max_gap`` is the p99 gap (seconds) an app may show and still hold N; only the
    tiny-run test loosens it (it checks that the benchmark works, not the machine).
    ``processes`` above 1 measures scale-out instead (``mode`` is then ignored): the
    kit on 1 and on that many processes, each behind nginx.
    """
    raise_fd_limit()
    modes = (SCALE_MODE,) if processes > 1 else MODES if mode == "both" else (mode,)
    config = Config(chunks, interval, max_gap)
    load = os.getloadavg()
    scale = f"; kit on 1 and {processes} processes behind nginx" if processes > 1 else ""
    print(
        f"capacity: modes {', '.join(modes)}{scale}; ladder {', '.join(map(str, ladder))}; "
        f"runs {runs}; {chunks} chunks {interval * 1000:g} ms apart; "
        f"holds: p99 gap <= {max_gap * 1000:g} ms, pace <= {MAX_PACE}x; "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="capacity-") as tmp:
        if processes > 1:
            ledger = await run_scale(sorted(ladder), runs, config, Path(tmp), processes)
            return summarize_scale(ledger, runs, processes)
        ledger = await run_all(modes, sorted(ladder), runs, config, Path(tmp))
    return summarize(ledger, modes, sorted(ladder), runs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("provider", "wire", "both"), default="both")
    parser.add_argument("--ladder", default="10,20,40,80,160", help="comma-separated N")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="above 1: the kit on 1 and on this many processes behind nginx (scale-out)",
    )
    args = parser.parse_args()
    steps = [int(part) for part in args.ladder.split(",") if part.strip()]
    asyncio.run(
        main(args.mode, steps, args.runs, args.chunks, args.interval, processes=args.processes)
    )
