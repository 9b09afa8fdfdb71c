"""A simulated server on a simulated host for the capacity search's seeded tests: its
latency curve, the host's stalls and its window-to-window spread, each window read and
decided as runs/analysis/capacity.py reads a probe."""

import math
from dataclasses import dataclass

import numpy as np

from runs.inference.capacity import Objective, ProbeMeasure, ProbeVerdict, decide_probe
from runs.inference.capacity_search import RateOutcome, SearchPlan, next_step
from runs.inference.quantiles import percentile_interval
from runs.inference.stalls import (
    WindowSecond,
    stalled_rate_verdict,
    window_stall,
    windows_set_aside,
)
from tests.runs.inference.samples import ArraySample

P99_20 = Objective(percentile=99.0, limit_ms=20.0)
# The z of a normal's 99th percentile: a lognormal's p99 is exp(mu + Z99 sigma).
Z99 = 2.3263478740408408


@dataclass(frozen=True)
class SimulatedWindow:
    """One probe's logged latencies (ms), its timeline, measure and verdict, what the rule
    said of it and whether the host stalled in it."""

    latencies: np.ndarray
    measure: ProbeMeasure
    verdict: ProbeVerdict
    stall: str | None
    host_stalled: bool


class SimulatedHost:
    """A server whose p99 is flat + base / (1 - rate / saturation) ** knee, its latencies
    lognormal, on a host that freezes for `stall_s` seconds in a `stall_share` of the
    windows: the transactions scheduled from the freeze on wait for it to end and for the
    queue behind it to drain at the server's saturation (a transaction scheduled x s into
    the freeze waits stall - x (1 - rate / saturation) more). With a `spread`, every
    window's latencies are scaled by e^N(0, spread): a host whose windows at one rate
    differ as a shared VM's do (docs/benchmarks.md). Each window logs about 500
    transactions a second (the agent's sampling), binned by the second they finished in.
    With a `flat_ms` and a high knee, a sharp knee (`sharp_knee_host`)."""

    def __init__(
        self,
        seed: int,
        knee: float,
        stall_share: float = 0.0,
        stall_s: tuple[float, float] = (0.3, 0.5),
        spread: float = 0.0,
        base_ms: float = 2.7,
        flat_ms: float = 0.0,
    ):
        self.saturation, self.base_ms, self.knee, self.flat_ms = 3900.0, base_ms, knee, flat_ms
        self.stall_share, self.stall_s, self.spread = stall_share, stall_s, spread
        self.rng = np.random.default_rng(seed)

    def capacity(self, limit_ms: float) -> float:
        queue_ms = limit_ms - self.flat_ms
        return self.saturation * (1 - (self.base_ms / queue_ms) ** (1 / self.knee))

    def window(self, rate: float, seconds: int = 60) -> SimulatedWindow:
        load = rate / self.saturation
        p99 = self.flat_ms + self.base_ms / (1 - load) ** self.knee if load < 1 else 1e6
        reached = min(rate, self.saturation * 0.999)
        count = self.rng.poisson(reached * seconds * min(1.0, 500 / rate))
        scheduled = self.rng.uniform(0, seconds, count)
        latencies = self.rng.lognormal(math.log(p99) - Z99 * 0.6, 0.6, count)
        if self.spread:
            latencies = latencies * math.exp(self.rng.normal(0.0, self.spread))
        host_stalled = bool(self.rng.random() < self.stall_share)
        if host_stalled:
            start, length = self.rng.uniform(1, seconds - 4), self.rng.uniform(*self.stall_s)
            since = scheduled - start
            drained = np.maximum(0.0, length - since * (1 - min(load, 0.99)))
            latencies = latencies + 1000 * np.where(since >= 0, drained, 0.0)
        finished = np.floor(scheduled + latencies / 1000).astype(int)
        interval = percentile_interval(ArraySample(np.sort(latencies)), 99.0)
        measure = ProbeMeasure(rate, reached, int(reached * seconds), 0, 0, seconds, interval)
        verdict = decide_probe(measure, P99_20)
        stall = window_stall(
            verdict, window_timeline(latencies, finished, seconds), seconds, P99_20
        )
        return SimulatedWindow(latencies, measure, verdict, stall, host_stalled)


def sharp_knee_host(seed: int, spread: float) -> SimulatedHost:
    """A host like the EPYC VM's (docs/benchmarks.md, 2026-12-01): p99 flat at about 6 ms
    up to near the capacity, then a cliff (the log of p99 grows about 36 times as fast as
    the log of the rate at 20 ms); the capacity at 86.5 % of the saturation."""
    knee = 8.0
    return SimulatedHost(
        seed, knee=knee, spread=spread, base_ms=14.0 * (1 - 0.865) ** knee, flat_ms=6.0
    )


def window_timeline(
    latencies: np.ndarray, finished: np.ndarray, seconds: int
) -> list[WindowSecond]:
    """Each second's logged count and nearest-rank p50, p95 and p99, as the agent bins them."""
    order = np.lexsort((latencies, finished))
    by_second, ordered = finished[order], latencies[order]
    starts = np.searchsorted(by_second, np.arange(seconds + 1))
    lines = []
    for t in range(seconds):
        values = ordered[starts[t] : starts[t + 1]]
        n = len(values)
        percentiles = {
            p: float(values[max(math.ceil(p / 100 * n), 1) - 1]) if n else None
            for p in (50.0, 95.0, 99.0)
        }
        lines.append(WindowSecond(float(t + 1), n, percentiles))
    return lines


def rate_outcome(rate: float, windows: list[SimulatedWindow]) -> RateOutcome:
    """The rate as runs/analysis/capacity.py reads it: stalled windows set aside (up to
    the bound), the others pooled and each decided alone."""
    aside = windows_set_aside([w.stall for w in windows])
    counted = [w for w, set_aside in zip(windows, aside, strict=True) if not set_aside]
    stalled = sum(w.stall is not None for w in windows)
    if not counted:
        return RateOutcome(rate, stalled_rate_verdict(stalled), None, len(windows), (), stalled)
    latencies = np.sort(np.concatenate([w.latencies for w in counted]))
    first = counted[0].measure
    interval = percentile_interval(ArraySample(latencies), 99.0)
    measure = ProbeMeasure(
        rate,
        first.reached_tps,
        first.transactions * len(counted),
        0,
        0,
        first.seconds * len(counted),
        interval,
    )
    decisions = tuple(w.verdict.decision for w in counted)
    estimates = tuple(w.measure.interval.estimate if w.measure.interval else None for w in counted)
    return RateOutcome(
        rate,
        decide_probe(measure, P99_20),
        interval.estimate,
        len(windows),
        decisions,
        stalled,
        estimates,
    )


def search_on(
    host: SimulatedHost, plan: SearchPlan
) -> tuple[list[RateOutcome], list[SimulatedWindow]]:
    windows: dict[float, list[SimulatedWindow]] = {}
    outcomes: dict[float, RateOutcome] = {}
    while (rate := next_step(plan, P99_20, list(outcomes.values())).next_tps) is not None:
        windows.setdefault(rate, []).append(host.window(rate))
        outcomes[rate] = rate_outcome(rate, windows[rate])
    return list(outcomes.values()), [w for ws in windows.values() for w in ws]
