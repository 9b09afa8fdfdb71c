"""A capacity probe's window stalled by its host, told from a server too slow for its rate.

On a shared VM the host stalls now and then (every process frozen for a fraction of a
second): the transactions scheduled meanwhile wait (pgbench -R counts their latency from
the schedule), and one such stall can put a window's percentile over the limit at any
rate. A server too slow for its rate is slow in every second of the window; a stall
puts the whole excess in a second or two. A window is **stalled** when all of these hold:

- it did not pass alone, and its percentile's interval (over the limit, or holding it)
  is its only reason: the rate was reached, nothing failed or was skipped beyond the
  objective, pgbench's CPUs were not saturated;
- its timeline covers the window (all its seconds but one) and every line of it was read
  from the transaction log, with its percentiles where it logged any: the objective is
  read at the lowest percentile a line carries at or above the objective's (p99 for p99,
  p95 for p90; a line within the limit there is within it at the objective's), and one
  step below that (p95 for p99, p50 for p95 and p90; p50 itself for p50) a second is
  *far* over the limit; an objective above p99 has no such line, and its window is never
  called stalled;
- its **burst**, the seconds that logged nothing (the stall held them whole) or are far
  over the limit, is 1 to `STALL_MAX_SECONDS` seconds, one of them logged;
- the **rest** is within the limit: were the server steady with the objective's tail
  share of its transactions over the limit (a server at the limit), the rest's seconds
  would have the percentile over it in no more of them than did with a probability
  under `STEADY_SERVER_ALPHA` (each second's chance is the binomial count of its logged
  transactions over the limit passing the percentile's nearest rank; the seconds added
  as a Poisson-binomial count).

A knee is slow in every second (its burst is the window, or its rest fails the test), and
a server at its limit with a stall on top fails the test too, so neither is ever called
stalled; a window too short, or too thinly logged for a second's percentile to show a
steady server at the limit, cannot pass the test. A stall longer than about two seconds
(a lock held for three) leaves two seconds with nothing logged and one far over, a burst
of three: its window counts as it is, as any slow stretch does.

A stalled window is not counted as the server's: its rate is probed again, up to
`MAX_STALLED_WINDOWS` stalled windows a rate; beyond that every window of the rate counts
as it is (a host that stalls that often fails the objective at that rate).
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from scipy import stats

from runs.inference.capacity import Decision, Objective, ProbeVerdict

STALL_MAX_SECONDS = 2
STEADY_SERVER_ALPHA = 0.001
MAX_STALLED_WINDOWS = 2
# The latency percentiles each timeline second carries (agents/pgbench/log_timeline.py).
SECOND_PERCENTILES = (50.0, 95.0, 99.0)


@dataclass(frozen=True)
class WindowSecond:
    """One second of a probe's window, as its timeline line: its end (`t`, seconds), the
    transactions logged in it (None: a line from pgbench's -P, which logs none) and their
    percentiles (ms) by percent of SECOND_PERCENTILES (None where nothing was logged, or
    for a line stored before the agent sent them)."""

    t: float
    logged: int | None
    percentiles_ms: Mapping[float, float | None]


def window_stall(
    verdict: ProbeVerdict,
    seconds: Sequence[WindowSecond],
    window_s: float | None,
    objective: Objective,
) -> str | None:
    """What stalled the window decided alone as `verdict`, its timeline `seconds` and its
    length `window_s` (see the module's rules), or None where it is not stalled or its
    timeline cannot say."""
    read_at = next((p for p in SECOND_PERCENTILES if p >= objective.percentile), None)
    if verdict.decision == Decision.PASS or not verdict.percentile_only or read_at is None:
        return None
    far_at = max((p for p in SECOND_PERCENTILES if p < read_at), default=read_at)
    if not window_s or len(seconds) < window_s - 1:
        return None
    if not all(_from_the_log(second, (read_at, far_at)) for second in seconds):
        return None
    burst = [s for s in seconds if not s.logged or _over(s, far_at, objective)]
    rest = [s for s in seconds if s.logged and not _over(s, far_at, objective)]
    if not 0 < len(burst) <= STALL_MAX_SECONDS or not any(s.logged for s in burst):
        return None
    rest_over = sum(_over(s, read_at, objective) for s in rest)
    logged = [s.logged or 0 for s in rest]
    if _steady_server_chance(logged, read_at, objective.percentile, rest_over) >= (
        STEADY_SERVER_ALPHA
    ):
        return None
    return _describe(burst, len(rest), rest_over, read_at, objective)


def windows_set_aside(stalls: Sequence[str | None]) -> list[bool]:
    """Which of a rate's windows (by what stalled each, None: not stalled) are set aside:
    the stalled ones while they are at most MAX_STALLED_WINDOWS, none beyond that."""
    stalled = [stall is not None for stall in stalls]
    return stalled if sum(stalled) <= MAX_STALLED_WINDOWS else [False] * len(stalls)


def stalled_rate_verdict(stalled: int) -> ProbeVerdict:
    """The verdict of a rate whose every window was stalled and set aside: undecided, to be
    probed again."""
    reason = f"{_windows(stalled)} stalled (the host's, not the load's): probed again"
    return ProbeVerdict(Decision.UNDECIDED, (reason,), generator_limited=False)


class StalledRate(Protocol):
    """An offered rate as the search holds it (capacity_search.RateOutcome): its windows
    (`probes`), how many the host stalled in, and whether they count as they are."""

    @property
    def offered_tps(self) -> float: ...

    @property
    def probes(self) -> int: ...

    @property
    def stalled(self) -> int: ...

    @property
    def stalls_counted(self) -> bool: ...


def stalled_windows_said(rates: Sequence[StalledRate]) -> str:
    """The windows the host stalled in, for the answer: how many were set aside and
    repeated, and each rate where they were too many and counted as they are; "" where
    none stalled."""
    windows = sum(rate.probes for rate in rates)
    set_aside = sum(rate.stalled for rate in rates if not rate.stalls_counted)
    said = []
    if set_aside:
        said.append(f"{set_aside} of {_windows(windows)} stalled (host, not load): repeated")
    said += [
        f"at {rate.offered_tps:,.0f} tps the host stalled in {rate.stalled} of "
        f"{_windows(rate.probes)}, more than {MAX_STALLED_WINDOWS}: counted as they are "
        "(the host's stalls decided it)"
        for rate in sorted(rates, key=lambda rate: rate.offered_tps)
        if rate.stalls_counted
    ]
    return "; ".join(said)


def _steady_server_chance(
    logged: Sequence[int], read_at: float, percentile: float, over: int
) -> float:
    """The probability that at most `over` of the seconds (logging `logged` transactions
    each) have their `read_at` percentile over the limit, were the server steady with the
    objective's tail share of its transactions over the limit (a Poisson-binomial count)."""
    tail = 1 - percentile / 100
    # exactly[k]: the probability that k of the seconds so far were over (k <= over).
    exactly = [1.0] + [0.0] * over
    for count in logged:
        # Nearest rank: the second's percentile is over when more than count - rank are.
        beyond_rank = count - max(math.ceil(read_at / 100 * count), 1)
        shows = float(stats.binom.sf(beyond_rank, count, tail))
        exactly = [
            exactly[k] * (1 - shows) + (exactly[k - 1] * shows if k else 0.0)
            for k in range(over + 1)
        ]
    return sum(exactly)


def _from_the_log(second: WindowSecond, percents: tuple[float, ...]) -> bool:
    """A line read from the transaction log, with the percentiles `percents` where it
    logged any (a -P line logs none; a line stored before the agent sent them has none)."""
    if second.logged is None:
        return False
    return not second.logged or all(second.percentiles_ms.get(p) is not None for p in percents)


def _over(second: WindowSecond, percent: float, objective: Objective) -> bool:
    value = second.percentiles_ms.get(percent)
    return value is not None and value > objective.limit_ms


def _describe(
    burst: Sequence[WindowSecond],
    rest: int,
    rest_over: int,
    read_at: float,
    objective: Objective,
) -> str:
    name, limit = f"p{read_at:g}", f"{objective.limit_ms:g} ms"
    seconds = "; ".join(
        f"{s.t:g} s: {s.percentiles_ms[read_at]:,.0f} ms"
        if s.logged
        else f"{s.t:g} s: nothing logged"
        for s in burst
    )
    said = (
        f"{name} over {limit} only in a burst of {len(burst)} of its {len(burst) + rest} "
        f"seconds ({seconds}); the other {rest} within it"
    )
    if rest_over:
        said += f" but for {rest_over} barely over (fewer than a server at the limit has)"
    return said


def _windows(count: int) -> str:
    return f"{count} window" + ("" if count == 1 else "s")
