"""Where an experiment's spread comes from, and what narrows its intervals faster.

A repeat's log tps varies between its runs (a fresh cluster per round in
rounds, the same cluster in blocks) and second to second within its window;
the window's mean carries the per-second part divided by its seconds. From an
experiment's points:

- per second: the variance of each point's log tps per second around the
  point's mean, less the counting noise a sampled log adds (1 / logged
  transactions each second), pooled over the points;
- between runs: the variance of the repeats' log tps at one cell and client
  count, pooled over those, less the per-second part their windows carry.

The interval of a cell's mean over n repeats of T seconds has the variance
(between + per_second / T) / n. One more round costs a cluster's setup and T;
doubling every point's window costs n * T more. `advice` compares what each
buys per machine second.

In rounds, a cell's run and the first cell's run of one round share the host's
state of the moment: the covariance of their log tps over the complete rounds
(`paired_variance`, pooled over the compared points). A paired comparison
(runs/inference/paired.py) tests the rounds' log ratios, whose variance is the
unpaired difference's less twice that covariance: `round_share` is the part of a
difference's variance pairing removes. The shared part is between runs (the
seconds of two runs are their own), so where the rounds pair, what a round's
comparison carries between runs is `between_runs` less the covariance, and
`advice` weighs rounds against longer points on that.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# A split needs this many repeats of a point and this many seconds of a point.
MIN_REPEATS_FOR_SPLIT = 2
MIN_SECONDS_FOR_SPLIT = 5
# A compared point's pairs count toward what pairing removes from this many complete rounds.
MIN_PAIRED_ROUNDS = 3


@dataclass(frozen=True)
class PairedVariance:
    """The variance of the rounds' log ratios (paired) and of the difference of the two
    sides' log tps over the same rounds (unpaired), pooled over compared points."""

    paired: float
    unpaired: float
    pairs: int

    @property
    def round_share(self) -> float:
        """The share of an unpaired difference's variance that pairing removes."""
        return max(1.0 - self.paired / self.unpaired, 0.0) if self.unpaired > 0 else 0.0

    @property
    def round_share_pct(self) -> float:
        return 100.0 * self.round_share

    @property
    def shared(self) -> float:
        """The covariance of a round's two runs (log tps), at least 0."""
        return max((self.unpaired - self.paired) / 2, 0.0)


def paired_variance(
    pairs: Iterable[tuple[Mapping[int, float], Mapping[int, float]]],
) -> PairedVariance | None:
    """Pooled over compared points (each a cell's and the first cell's tps by round):
    the variance of the complete rounds' log ratios and var(a) + var(b) over those
    rounds; None without MIN_PAIRED_ROUNDS complete rounds at some point."""
    paired, unpaired, df, count = 0.0, 0.0, 0, 0
    for values, baseline in pairs:
        rounds = sorted(r for r in values.keys() & baseline.keys() if values[r] > 0 < baseline[r])
        if len(rounds) < MIN_PAIRED_ROUNDS:
            continue
        logs = np.log([values[r] for r in rounds])
        base_logs = np.log([baseline[r] for r in rounds])
        paired += float((logs - base_logs).var(ddof=1)) * (len(rounds) - 1)
        unpaired += float(logs.var(ddof=1) + base_logs.var(ddof=1)) * (len(rounds) - 1)
        df += len(rounds) - 1
        count += len(rounds)
    return PairedVariance(paired / df, unpaired / df, count) if df else None


@dataclass(frozen=True)
class VarianceSplit:
    """Log-tps variances of one experiment (see the module docstring)."""

    between_runs: float
    per_second: float
    seconds: float
    repeats: float
    setup_s: float
    in_rounds: bool
    pairing: PairedVariance | None = None

    @property
    def per_repeat(self) -> float:
        """A repeat's variance: between runs plus its window's share of the per-second."""
        return self.between_runs + self.per_second / self.seconds

    @property
    def compared_between(self) -> float:
        """What a repeat carries between runs into a comparison: where the rounds pair,
        less the part both runs of a round share."""
        shared = self.pairing.shared if self.pairing else 0.0
        return max(self.between_runs - shared, 0.0)

    @property
    def window_share(self) -> float:
        """The share of a repeat's variance its window's seconds bring."""
        return self.per_second / self.seconds / self.per_repeat if self.per_repeat else 0.0

    def _gain_per_second(self, rounds: float, seconds: float, cost_s: float) -> float:
        now = (self.compared_between + self.per_second / self.seconds) / self.repeats
        after = (self.compared_between + self.per_second / seconds) / rounds
        return (now - after) / cost_s

    @property
    def more_rounds_pay(self) -> bool:
        """One more round narrows the interval more per machine second than twice the window."""
        round_gain = self._gain_per_second(
            self.repeats + 1, self.seconds, self.setup_s + self.seconds
        )
        window_gain = self._gain_per_second(
            self.repeats, 2 * self.seconds, self.repeats * self.seconds
        )
        return round_gain >= window_gain

    @property
    def advice(self) -> str:
        between = "between clusters" if self.in_rounds else "between runs in one cluster"
        shares = (
            f"{(1 - self.window_share):.0%} of a repeat's variance is {between}, "
            f"{self.window_share:.0%} the seconds of its {self.seconds:.0f} s window"
        )
        if self.pairing:
            shares += (
                f"; pairing each round with the first cell's removes "
                f"{self.pairing.round_share:.0%} of a difference's variance"
            )
        if self.more_rounds_pay:
            return f"{shares}: more rounds narrow the interval faster than longer points"
        return f"{shares}: longer points narrow the interval faster than more rounds"


@dataclass(frozen=True)
class PointSeconds:
    """One point's per-second tps, each with the logged transactions it rests on (None:
    counted exactly)."""

    tps: Sequence[float]
    sampled: Sequence[int | None]


def per_second_variance(points: Iterable[PointSeconds]) -> tuple[float, float] | None:
    """(pooled per-second log variance less counting noise, mean seconds per point)."""
    pooled, df, lengths = 0.0, 0, []
    for point in points:
        rows = [(t, s) for t, s in zip(point.tps, point.sampled, strict=True) if t and t > 0]
        if len(rows) < MIN_SECONDS_FOR_SPLIT:
            continue
        logs = np.log([t for t, _s in rows])
        counted = [s for _t, s in rows if s]
        noise = float(np.mean([1 / s for s in counted])) if len(counted) == len(rows) else 0.0
        pooled += max(float(logs.var(ddof=1)) - noise, 0.0) * (len(rows) - 1)
        df += len(rows) - 1
        lengths.append(len(rows))
    return (pooled / df, float(np.mean(lengths))) if df else None


def between_runs_variance(repeats: Iterable[Sequence[float]]) -> tuple[float, float] | None:
    """(pooled log variance of repeats at one cell and client count, mean repeats)."""
    pooled, df, counts = 0.0, 0, []
    for values in repeats:
        positive = [v for v in values if v and v > 0]
        if len(positive) < MIN_REPEATS_FOR_SPLIT:
            continue
        pooled += float(np.log(positive).var(ddof=1)) * (len(positive) - 1)
        df += len(positive) - 1
        counts.append(len(positive))
    return (pooled / df, float(np.mean(counts))) if df else None


def variance_split(
    repeats: Iterable[Sequence[float]],
    points: Iterable[PointSeconds],
    setup_s: float,
    in_rounds: bool,
    pairing: PairedVariance | None = None,
) -> VarianceSplit | None:
    """The split of an experiment's spread; None without two repeats of a point or
    per-second samples. `pairing`: what pairing the rounds removes (`paired_variance`)."""
    between = between_runs_variance(repeats)
    seconds = per_second_variance(points)
    if between is None or seconds is None:
        return None
    (per_repeat, n), (per_second, length) = between, seconds
    between_runs = max(per_repeat - per_second / length, 0.0)
    return VarianceSplit(between_runs, per_second, length, n, max(setup_s, 0.0), in_rounds, pairing)
