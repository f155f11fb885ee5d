"""capacity.py's figures: one app at one N judged, and every result of an invocation.

An app **holds** N when every session got the whole text, the p99 gap between text
arrivals is at most the limit and the reply keeps pace (see capacity.py's docstring).
"""

from __future__ import annotations

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


def ratio(a: float, b: float) -> float:
    """``a / b``; infinite for a count over none, NaN for none over none."""
    return a / b if b else float("inf") if a else float("nan")
