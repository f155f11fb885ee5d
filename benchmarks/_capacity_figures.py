"""capacity.py's figures: one app at one N judged, and every result of an invocation.

An app **holds** N when every session got the whole text, the p99 gap between text
arrivals is at most the limit and the reply keeps pace (see capacity.py's docstring).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from _capacity_clients import Sample
from _capacity_setup import MAX_PACE, Config


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


def majority_held(results: Sequence[Result]) -> bool:
    """Whether the rounds of one app at one N held it: at least half of them did.

    One slow round (the machine's other work, a collection at the wrong moment) no longer
    ends an app's ladder, even of two rounds; an app that cannot hold N fails most
    rounds anyway.
    """
    return sum(r.held for r in results) * 2 >= len(results)


@dataclass
class Ledger:
    """Every result of one invocation: ``results[mode][run][app] = [Result per N and round]``."""

    results: dict[str, list[dict[str, list[Result]]]] = field(default_factory=dict)

    def add(self, mode: str, run: int, result: Result) -> None:
        runs = self.results.setdefault(mode, [])
        while len(runs) <= run:
            runs.append({})
        runs[run].setdefault(result.app, []).append(result)

    def _steps(self, mode: str, run: int, app: str) -> list[tuple[int, bool]]:
        """``(N, held by the majority of its rounds)`` for each N measured, in order."""
        runs = self.results.get(mode, [])
        by_n: dict[int, list[Result]] = {}
        for result in runs[run].get(app, []) if run < len(runs) else []:
            by_n.setdefault(result.n, []).append(result)
        return [(n, majority_held(by_n[n])) for n in sorted(by_n)]

    def failed(self, mode: str, run: int, app: str) -> bool:
        """Whether ``app`` failed an N already in this run (its ladder has ended)."""
        return any(not held for _, held in self._steps(mode, run, app))

    def held(self, mode: str, run: int, app: str) -> int:
        """The largest N held before the app first failed (0: none)."""
        best = 0
        for n, held in self._steps(mode, run, app):
            if not held:
                break
            best = n
        return best

    def at(self, mode: str, app: str, n: int, attr: str) -> float:
        """The median over runs and rounds of one figure of ``app`` at ``n`` (NaN if never
        measured)."""
        values = [
            getattr(r, attr)
            for run in self.results.get(mode, [])
            for r in run.get(app, [])
            if r.n == n
        ]
        return statistics.median(values) if values else float("nan")


def ratio(a: float, b: float) -> float:
    """``a / b``; infinite for a count over none, NaN for none over none."""
    return a / b if b else float("inf") if a else float("nan")


RESAMPLES = 2000  # bootstrap resamples of the ladders, for a ratio's interval
INTERVAL = 0.90  # the interval's coverage


@dataclass(frozen=True)
class RatioEstimate:
    """The ratio of two apps' median sessions held, with a bootstrap interval."""

    value: float
    low: float
    high: float
    ladders: int

    def claim(self) -> str:
        """What the figures allow one to say: a side only when the interval excludes 1."""
        if self.ladders < 2:
            return "one ladder: no interval, no claim"
        interval = f"{INTERVAL:.0%} interval {self.low:.2f}-{self.high:.2f}, {self.ladders} ladders"
        if self.low > 1:
            return f"{interval}: the kit holds more"
        if self.high < 1:
            return f"{interval}: the kit holds fewer"
        return f"{interval}: no claim, the interval spans 1"


def ratio_estimate(
    kit: Sequence[int], peer: Sequence[int], seed: int = 0, resamples: int = RESAMPLES
) -> RatioEstimate:
    """The ratio of medians of ``kit`` and ``peer`` (sessions held per ladder), with a
    percentile bootstrap interval: each side's ladders are resampled on their own (they
    ran interleaved, but a ladder of one app does not pair with one of another).

    Examples:
        >>> ratio_estimate([40, 40, 50], [20, 40, 130]).value
        1.0
        >>> ratio_estimate([80, 80, 80], [40, 40, 40]).claim()
        '90% interval 2.00-2.00, 3 ladders: the kit holds more'
    """
    value = ratio(statistics.median(kit), statistics.median(peer))
    if len(kit) < 2 or len(peer) < 2:
        return RatioEstimate(value, value, value, min(len(kit), len(peer)))
    rng = random.Random(seed)
    draws = sorted(
        ratio(
            statistics.median(rng.choices(kit, k=len(kit))),
            statistics.median(rng.choices(peer, k=len(peer))),
        )
        for _ in range(resamples)
    )
    tail = (1 - INTERVAL) / 2
    low = draws[int(tail * (resamples - 1))]
    high = draws[int((1 - tail) * (resamples - 1))]
    return RatioEstimate(value, low, high, min(len(kit), len(peer)))


def spread(values: Sequence[int]) -> str:
    """``median M (spread lo-hi)`` of one app's sessions held per ladder."""
    return f"median {statistics.median(values):g} (spread {min(values)}-{max(values)})"
