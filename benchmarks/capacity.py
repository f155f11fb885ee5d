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
which the span shows whatever the message size.

Rounds and ladders. At each N every app is measured ``--rounds`` times in a row (3; its
server idle again before each round) and holds N when at least half its rounds held it,
so one slow round (the machine's other work) does not end its ladder. **Sessions held** is the
largest N held before an app first fails; it is not measured at larger N after that,
except at the ladder steps nearest 10 and 20, which the start and burst ratios use. The
whole ladder is climbed ``--runs`` times (3), and each app's sessions held is reported
as the median over the ladders with its spread (lowest-highest). A ratio of two apps
comes with a 90% percentile-bootstrap interval (each side's ladders resampled) and is
*claimed* (the kit holds more, or fewer) only when that interval excludes 1; a single
ladder gives no interval and no claim.

It prints one line per app, N and round (start p50/max, burst median, gap p50/p99, the
longest span over the reply's duration, complete sessions, held), then each app's
sessions held per ladder with median and spread, and last the ratios of each mode
(medians over the ladders, with interval and claim): ``ratio kit/minimal sessions
held``, ``ratio kit/by-hand sessions held``, in wire mode ``ratio kit/chatlas sessions
held``, then kit/minimal start p50 at 20 sessions and burst at 10. Targets (#36): held
kit/minimal >= 0.75, kit/chatlas >= 1.5 with its interval above 1; start and burst
ratios <= 2. Bounded: loopback only, every phase has a timeout,
servers are killed at the end.

Scale-out (``--processes P``, P > 1; provider mode only). The kit on one process and on
P processes, each side behind an nginx of its own (``tests/_nginx.py``: Debian's nginx, a
config in a temp dir) that spreads the N sessions over its processes by a ``route``
cookie, the way a sticky proxy spreads browsers; the rest of the method is the same. It
prints the rows (mode ``nginx``, apps ``kit-1p`` and ``kit-<P>p``), sessions held per
run, and last ``ratio kit P processes/1 process sessions held``.

Usage: .venv/bin/python benchmarks/capacity.py [--mode both] [--ladder 10,20,40,80,160]
       [--runs 3] [--rounds 3] [--chunks 200] [--interval 0.02] [--processes 1]
(``--processes`` climbs its ladders with one round a step.)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _capacity_clients import measure, warm_up
from _capacity_figures import (
    HEADER,
    Ledger,
    Result,
    judge,
    nearest,
    ratio,
    ratio_estimate,
    row,
    spread,
)
from _capacity_scale import SCALE_MODE, run_scale, summarize_scale
from _capacity_setup import (
    APPS,
    MAX_P99_GAP,
    MAX_PACE,
    SERVE_TIMEOUT,
    AppSpec,
    Config,
    Server,
    app_env,
    log,
    raise_fd_limit,
    settle,
    shiny_command,
    spawn,
    wait_serving,
)

RATIO_POINTS = (10, 20)  # burst ratio at 10 sessions, start ratio at 20
MODES = ("provider", "wire")


# --------------------------------------------------------------------------- driver


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
    rounds: int = 1,
) -> list[tuple[str, Result]]:
    """Fresh servers for every (mode, app) of this N, measured one at a time, each
    ``rounds`` times in a row (the server idle again before each round).

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
            for round_index in range(rounds):
                if round_index:
                    await settle([server])  # the last round's streams have all ended
                cpu, wall = time.process_time(), time.monotonic()
                samples = await measure(server.port, app, n, config) if warm.complete else []
                # If the clients (this process) were near a full core, they were the limit.
                cpu, wall = time.process_time() - cpu, time.monotonic() - wall
                log(
                    f"N={n}: {mode} {app.label} round {round_index + 1}: "
                    f"clients used {cpu:.1f} s CPU in {wall:.1f} s"
                )
                result = judge(app.label, n, samples, config)
                if not warm.complete:
                    result = dataclasses.replace(result, held=False, why=f"warm-up: {warm.error}")
                out.append((mode, result))
                print(row(mode, result), flush=True)
            server.stop()  # its memory and any lagging streams go before the next app
    finally:
        for server in servers:
            server.stop()
    return out


async def run_all(
    modes: Sequence[str],
    ladder: Sequence[int],
    runs: int,
    config: Config,
    tmp: Path,
    rounds: int = 1,
) -> Ledger:
    """Climb the ladder ``runs`` times for every mode's apps, ``rounds`` rounds per step;
    return every result."""
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
                    step_results = await one_step(
                        n, wanted, config, tmp, base_url, starting, rounds
                    )
                    starting = []
                    for mode, result in step_results:
                        ledger.add(mode, run, result)
    finally:
        if fake is not None:
            fake.stop()
    return ledger


def summarize(
    ledger: Ledger, modes: Sequence[str], ladder: Sequence[int], runs: int
) -> dict[str, dict[str, int]]:
    """Print sessions held per app and ladder (median and spread), then the ratios last,
    each with its interval and what it allows one to claim; return held (medians)."""
    held: dict[str, dict[str, int]] = {}
    per_ladder: dict[tuple[str, str], list[int]] = {}
    for mode in modes:
        held[mode] = {}
        for app in APPS[mode]:
            values = [ledger.held(mode, run, app.label) for run in range(runs)]
            per_ladder[mode, app.label] = values
            held[mode][app.label] = int(statistics.median(values))
            shown = ", ".join(str(h) for h in values)
            print(f"{mode:8} {app.label:8} sessions held per ladder: {shown}; {spread(values)}")
    start_n, burst_n = nearest(ladder, 20), nearest(ladder, 10)
    for mode in modes:
        print(f"mode: {mode}")
        for peer in [app.label for app in APPS[mode] if app.label != "kit"]:
            estimate = ratio_estimate(per_ladder[mode, "kit"], per_ladder[mode, peer])
            print(f"ratio kit/{peer} sessions held: {estimate.value:.2f} ({estimate.claim()})")
        start = ratio(
            ledger.at(mode, "kit", start_n, "start_p50"),
            ledger.at(mode, "minimal", start_n, "start_p50"),
        )
        burst = ratio(
            ledger.at(mode, "kit", burst_n, "burst_p50"),
            ledger.at(mode, "minimal", burst_n, "burst_p50"),
        )
        print(f"ratio kit/minimal start p50 at {start_n} sessions: {start:.2f}")
        print(f"ratio kit/minimal burst time to first chunk at {burst_n} sessions: {burst:.2f}")
    return held


async def main(
    mode: str = "both",
    ladder: Sequence[int] = (10, 20, 40, 80, 160),
    runs: int = 3,
    chunks: int = 200,
    interval: float = 0.02,
    max_gap: float = MAX_P99_GAP,
    processes: int = 1,
    rounds: int = 3,
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
        f"{runs} ladders, {1 if processes > 1 else rounds} rounds a step; "
        f"{chunks} chunks {interval * 1000:g} ms apart; "
        f"holds: p99 gap <= {max_gap * 1000:g} ms, pace <= {MAX_PACE}x; "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="capacity-") as tmp:
        if processes > 1:
            ledger = await run_scale(sorted(ladder), runs, config, Path(tmp), processes)
            return summarize_scale(ledger, runs, processes)
        ledger = await run_all(modes, sorted(ladder), runs, config, Path(tmp), rounds)
    return summarize(ledger, modes, sorted(ladder), runs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("provider", "wire", "both"), default="both")
    parser.add_argument("--ladder", default="10,20,40,80,160", help="comma-separated N")
    parser.add_argument("--runs", type=int, default=3, help="ladders climbed (interleaved)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds per app at each N (held: at least half of them)",
    )
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
        main(
            args.mode,
            steps,
            args.runs,
            args.chunks,
            args.interval,
            processes=args.processes,
            rounds=args.rounds,
        )
    )
