"""capacity.py's scale-out (``--processes P``): the kit on 1 and on P processes, each
side behind an nginx of its own that spreads the sessions by a ``route`` cookie."""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from _capacity_clients import measure, warm_up
from _capacity_figures import HEADER, Ledger, Result, judge, ratio, row
from _capacity_setup import (
    KIT,
    ROOT,
    SERVE_TIMEOUT,
    Config,
    Server,
    app_env,
    log,
    settle,
    shiny_command,
    spawn,
    wait_serving,
)

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
    scaled = ratio(held[scale_label(processes)], held[scale_label(1)])
    print(f"ratio kit {processes} processes/1 process sessions held: {scaled:.2f}")
    return {SCALE_MODE: held}
