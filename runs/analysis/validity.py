"""Validity warnings: what makes a measured number less trustworthy, and why.

Each check has a stable code (API, exports, pages), a short title and one line
of why it matters. Checks read what is stored: a point's result, its progress
timeline, host and server samples; a run's effective settings; a cell's
summary over repeats. They never change a number, they stand beside it.
"""

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import numpy as np
from numpy.typing import NDArray
from scipy import stats as scipy_stats

from agents.contract.reports.samples import HostSampleDocument, ServerSampleDocument
from runs.inference import steady as steadiness
from runs.inference.stats import MIN_REPEATS, Summary
from runs.inference.steady import MIN_STEADY_SECONDS, MIN_STEADY_SHARE, SteadyState, steady_state
from runs.models import HostSample, ProgressSample, Result, ServerSample


@dataclass(frozen=True)
class Check:
    code: str
    title: str
    why: str


CHECKS = {
    check.code: check
    for check in (
        Check(
            "checkpoint_in_window",
            "checkpoint inside the window",
            "a checkpoint's writes and full-page images lower tps while it runs, so this "
            "point measured something its neighbours may not have",
        ),
        Check(
            "load_generator_saturated",
            "load generator saturated",
            "pgbench itself used (nearly) all the CPU it could, or a large share of a host "
            "with none left idle: the number may show the client's limit, not PostgreSQL's",
        ),
        Check(
            "host_busy",
            "host busy with other processes",
            "no CPU was left idle while pgbench itself used little of it: the server or "
            "programs outside the benchmark took it all; check what else ran before "
            "comparing the number with one from a quiet host",
        ),
        Check(
            "host_outside_usual_spread",
            "host outside its usual spread",
            "the host canary timed before this run's cluster started (a fixed CPU loop, "
            "fsyncs on its storage) fell outside the host's recent canaries: the host, not "
            "PostgreSQL, may have made this round slower or faster; the round is kept, so "
            "compare it with the others or rerun it",
        ),
        Check(
            "failed_transactions",
            "failed, retried or aborted transactions",
            "tps counts successful transactions only; failures and retries are work the "
            "number does not show",
        ),
        Check(
            "skipped_or_late_transactions",
            "skipped or late transactions",
            "with a rate (-R) and a latency limit (-L) pgbench skips the transactions that "
            "would start too late and counts those that end over the limit; tps counts only "
            "the transactions that ran, so it shows neither: the server did not keep up with "
            "the schedule",
        ),
        Check(
            "unsteady_timeline",
            "unsteady timeline",
            "a trend or large swings within the window mean the average depends on when "
            "the window started and how long it ran",
        ),
        Check(
            "warm_up_in_window",
            "warm-up inside the window",
            "tps rose before it settled (a cold cache, a growing table): pgbench's tps "
            "counts those seconds too; a warm-up at least that long leaves them out",
        ),
        Check(
            "never_settled",
            "never settled",
            "in no last stretch of the window did tps hold within "
            f"{steadiness.MAX_DRIFT_PCT_PER_MIN:g} % a minute and "
            f"{steadiness.FLAT_SHARE * 100:g} % over the stretch (beyond what counting noise "
            "explains), so there is no steady state to measure; "
            "verdicts leave the point out unless you keep it (keep_unsettled=1)",
        ),
        Check(
            "repeats_disagree",
            "repeats disagree",
            "a spread across repeats above 10 % of their mean (CV) points to an uncontrolled "
            "factor; the mean hides it",
        ),
        Check(
            "window_shorter_than_checkpoint_timeout",
            "window shorter than checkpoint_timeout",
            "some repeats include a checkpoint and others do not, and a sustained load "
            "would be slower than a window without one",
        ),
        Check(
            "unsafe_settings",
            "unsafe settings",
            "with fsync or full_page_writes off a crash can corrupt the cluster; the server "
            "skips writes production servers make, so the numbers do not carry over",
        ),
        Check(
            "commits_not_durable",
            "commits not durable",
            "with synchronous_commit off a crash can lose the last commits (the cluster is "
            "not corrupted); commits do not wait for their WAL flush, so they are faster "
            "than on a server that does",
        ),
        Check(
            "outlier_repeat",
            "outlier repeat",
            "a repeat far from the others (in MAD units) moves the mean and widens the "
            "interval; the verdict then uses ranks (median and Mann-Whitney) instead",
        ),
        Check(
            "repeats_in_two_groups",
            "repeats in two groups",
            "repeats that fall into two groups measured two different states, and their "
            "mean is neither; the verdict then uses ranks (median and Mann-Whitney) instead",
        ),
        Check(
            "too_few_repeats",
            "too few repeats",
            f"below {MIN_REPEATS} repeats the spread is unknown and no verdict is possible",
        ),
    )
}

# Thresholds, each with the reason for its value.
# pgbench plus the server need some idle CPU; below this the host is the limit.
IDLE_CPU_PERCENT_BELOW = 5.0
# pgbench's CPU time over what its threads could use in the window (one CPU each at most).
PGBENCH_THREAD_BUSY_ABOVE = 0.9
# On a host with no idle CPU, pgbench using this share of what its threads could use
# competes with the server for CPU; below it the server or other programs took the host.
PGBENCH_SHARE_ON_FULL_HOST = 0.5
# A least-squares trend that moves tps by this share over the window, and is
# significant at TREND_P, is drift rather than noise.
TREND_SHARE = 0.10
TREND_P = 0.01
# Per-second tps of a steady point varies by a few percent; a quarter is a swing.
# At a few transactions per interval the count alone varies more (Poisson: a CV
# of 1/sqrt(transactions)): the swing must exceed that too. A timeline read from
# a sampled log counts sampled lines, so its counting noise is 1/sqrt(lines).
PROGRESS_CV_ABOVE = 0.25
MIN_PROGRESS_SAMPLES = 5
REPEATS_CV_ABOVE = 0.10


@dataclass(frozen=True)
class ValidityWarning:
    """A triggered check: its code and what was seen (`detail`)."""

    code: str
    detail: str

    @property
    def title(self) -> str:
        return CHECKS[self.code].title

    @property
    def why(self) -> str:
        return CHECKS[self.code].why

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "title": self.title, "detail": self.detail, "why": self.why}


@dataclass(frozen=True)
class CheckpointEvent:
    """A checkpoint seen in a point's server samples (`t` within the point)."""

    point: int
    t: float
    kind: str  # "timed" or "requested"
    edge: str  # "start", or "end" (the first sample with no more checkpoint writes)


@dataclass
class PointSamples:
    """The stored timelines of one point."""

    progress: list[ProgressSample] = field(default_factory=list)
    host: list[HostSample] = field(default_factory=list)
    server: list[ServerSample] = field(default_factory=list)
    # A run with a client host: the client host's samples (pgbench runs there).
    client: list[HostSample] = field(default_factory=list)


TimedSample = TypeVar("TimedSample", ProgressSample, HostSample, ServerSample)


def _by_time(samples: Iterable[TimedSample]) -> list[TimedSample]:
    return sorted(samples, key=lambda s: s.t if s.t is not None else 0.0)


def _checkpoint_writes(data: ServerSampleDocument) -> float:
    return data.get("buffers_checkpoint_per_s") or 0.0


def _started(before: ServerSampleDocument, after: ServerSampleDocument) -> list[str]:
    """The kinds of checkpoint whose counter went up between two samples."""
    counters: tuple[tuple[str, Literal["checkpoints_timed", "checkpoints_req"]], ...] = (
        ("timed", "checkpoints_timed"),
        ("requested", "checkpoints_req"),
    )
    return [kind for kind, key in counters if (after.get(key) or 0) > (before.get(key) or 0)]


def checkpoint_events(point: int, server_samples: Sequence[ServerSample]) -> list[CheckpointEvent]:
    """Checkpoint starts (a counter went up) and ends (writes stopped) within one point."""
    ordered = _by_time(server_samples)
    events: list[CheckpointEvent] = []
    writing: str | None = None
    if ordered and _checkpoint_writes(ordered[0].data) > 0:
        events.append(CheckpointEvent(point, ordered[0].t or 0.0, "running", "start"))
        writing = "running"
    for before, after in itertools.pairwise(ordered):
        t = after.t or 0.0
        for kind in _started(before.data, after.data):
            events.append(CheckpointEvent(point, t, kind, "start"))
            writing = kind
        stopped = _checkpoint_writes(after.data) == 0 < _checkpoint_writes(before.data)
        if writing and stopped:
            events.append(CheckpointEvent(point, t, writing, "end"))
            writing = None
    return events


def _writes_from(start: CheckpointEvent, ordered: Sequence[ServerSample]) -> bool:
    """Whether a started checkpoint wrote within the window, or started at its last sample.

    A timed checkpoint on a server that wrote no WAL since the last one is
    skipped but still counted (up to PostgreSQL 16, and in 17's num_timed):
    with no checkpoint writes it changed nothing the point measured.
    """
    later = [s for s in ordered if (s.t or 0.0) >= start.t]
    return len(later) <= 1 or any(_checkpoint_writes(s.data) > 0 for s in later)


def _checkpoint_warning(point: int, samples: PointSamples) -> list[ValidityWarning]:
    ordered = _by_time(samples.server)
    starts = [
        e
        for e in checkpoint_events(point, ordered)
        if e.edge == "start" and _writes_from(e, ordered)
    ]
    if not starts:
        return []
    seen = ", ".join(
        "checkpoint writing when the window began"
        if e.kind == "running"
        else f"{e.kind} checkpoint started at {e.t:.0f} s"
        for e in starts
    )
    return [ValidityWarning("checkpoint_in_window", seen)]


def _idle_percent(data: HostSampleDocument) -> float | None:
    """CPU time nothing ran on: idle plus I/O wait (a CPU waiting on a disk is free for work)."""
    idle = data.get("cpu_idle")
    if idle is None:
        return None
    return idle + (data.get("cpu_iowait") or 0.0)


def _host_idle_warning(samples: PointSamples) -> list[ValidityWarning]:
    """The load generator's host: the client host when pgbench ran there, else the server's.

    Found as `host_busy`; `result_warnings` names pgbench the cause when the
    point's result shows pgbench itself used the CPU (`_blame_for_full_host`).
    """
    where, generator = ("client host", samples.client) if samples.client else ("host", samples.host)
    idle = [p for s in generator if (p := _idle_percent(s.data)) is not None]
    if len(idle) < 2 or float(np.median(idle)) >= IDLE_CPU_PERCENT_BELOW:
        return []
    median = float(np.median(idle))
    detail = f"{where} CPU idle {median:.1f} % (with I/O wait, median over the window)"
    return [ValidityWarning("host_busy", detail)]


def _blame_for_full_host(result: Result, warning: ValidityWarning) -> ValidityWarning:
    """A host with no idle CPU: pgbench saturated when its own CPU share was large, else
    a host busy with other processes (or with its server)."""
    if warning.code != "host_busy":
        return warning
    busy = result.pgbench_busy_share
    if busy is None:
        return ValidityWarning("host_busy", f"{warning.detail}; pgbench's own CPU not measured")
    seen = f"{warning.detail}; pgbench used {busy * 100:.0f} % of the CPU its threads could use"
    code = "load_generator_saturated" if busy >= PGBENCH_SHARE_ON_FULL_HOST else "host_busy"
    return ValidityWarning(code, seen)


def _pgbench_busy_warning(result: Result) -> list[ValidityWarning]:
    busy = result.pgbench_busy_share
    if busy is None or busy <= PGBENCH_THREAD_BUSY_ABOVE:
        return []
    cpus = result.pgbench_cpus or result.threads
    detail = (
        f"pgbench used {busy * 100:.0f} % of the {cpus} CPU(s) its {result.threads} thread(s) "
        f"could use ({result.pgbench_cpu_s:.1f} CPU s in {result.duration_s:.0f} s)"
    )
    return [ValidityWarning("load_generator_saturated", detail)]


def joined(warnings: list[ValidityWarning]) -> list[ValidityWarning]:
    """One warning per code, the details of several findings joined with '; '."""
    details: dict[str, list[str]] = {}
    for warning in warnings:
        details.setdefault(warning.code, []).append(warning.detail)
    return [ValidityWarning(code, "; ".join(seen)) for code, seen in details.items()]


def _failure_counts(result: Result) -> dict[str, int]:
    """Failed and retried transactions and aborted clients, as the agent stored them."""
    return {
        "failed": result.failed or 0,
        "retried": result.retried or 0,
        "aborted clients": result.aborted_clients,
    }


def _failure_warning(result: Result) -> list[ValidityWarning]:
    counts = _failure_counts(result)
    seen = [f"{n:,} {name}" for name, n in counts.items() if n]
    if not seen:
        return []
    return [ValidityWarning("failed_transactions", ", ".join(seen))]


def _schedule_warning(result: Result) -> list[ValidityWarning]:
    """Skipped transactions (a share of all scheduled) and those over the latency limit (a
    share of those that ran), as pgbench counts them in its summary."""
    seen = []
    ran = result.transactions or 0
    if result.skipped:
        scheduled = ran + result.skipped
        skipped_pct = result.skipped / scheduled * 100
        seen.append(f"{result.skipped:,} skipped ({skipped_pct:.1f} % of those scheduled)")
    if result.late:
        limit = f" {result.latency_limit_ms:g} ms" if result.latency_limit_ms is not None else ""
        late_pct = f" ({result.late / ran * 100:.1f} %)" if ran else ""
        seen.append(f"{result.late:,} of {ran:,} over the{limit} latency limit{late_pct}")
    return [ValidityWarning("skipped_or_late_transactions", ", ".join(seen))] if seen else []


def _timeline_warning(samples: PointSamples) -> list[ValidityWarning]:
    rows = [(s.t, s.tps) for s in _by_time(samples.progress) if s.tps is not None]
    if len(rows) < MIN_PROGRESS_SAMPLES:
        return []
    t, tps = np.array(rows, dtype=float).T
    mean = float(tps.mean())
    if mean <= 0:
        return []
    seen = []
    trend = scipy_stats.linregress(t, tps)
    change = trend.slope * (t[-1] - t[0]) / mean
    if trend.pvalue < TREND_P and abs(change) >= TREND_SHARE:
        seen.append(
            f"tps drifts {change * 100:+.0f} % over the window (trend p={trend.pvalue:.1g})"
        )
    cv = float(tps.std(ddof=1)) / mean
    if cv > PROGRESS_CV_ABOVE + _counting_noise(samples.progress, t, mean):
        seen.append(f"per-second tps varies by {cv * 100:.0f} % (CV)")
    return [ValidityWarning("unsteady_timeline", "; ".join(seen))] if seen else []


def _counting_noise(
    progress: list[ProgressSample], t: NDArray[np.float64], mean_tps: float
) -> float:
    """The CV per-second tps has from counting alone: 1/sqrt(what each second counted)."""
    sampled = [s.sampled for s in progress if s.tps is not None]
    known = [count for count in sampled if count is not None]
    if sampled and len(known) == len(sampled):
        counted = float(np.mean(known))
    else:
        counted = mean_tps * (float(np.median(np.diff(t))) or 1.0)
    return 1 / np.sqrt(counted) if counted > 0 else float("inf")


def point_steady_state(samples: PointSamples) -> SteadyState | None:
    """Where the point's per-second tps became steady (runs/inference/steady.py), allowing
    for the counting noise of its seconds; None with too few seconds to tell."""
    rows = [(s.t or 0.0, s.tps) for s in _by_time(samples.progress) if s.tps is not None]
    if len(rows) < 2 * MIN_STEADY_SECONDS:
        return None
    t, tps = np.array(rows, dtype=float).T
    mean = float(tps.mean())
    counting = _counting_noise(samples.progress, t, mean) if mean > 0 else 0.0
    return steady_state(tps, t, counting)


def _steady_warning(steady: SteadyState | None) -> list[ValidityWarning]:
    """never settled, a warm-up (tps rose, then held) or a fall (tps fell, then held: a drift
    down, no warm-up); the settle time is the one the tps chart's band draws."""
    if steady is None:
        return []
    if not steady.settled:
        shortest = max(MIN_STEADY_SECONDS, math.ceil(steady.seconds * MIN_STEADY_SHARE))
        drift = steady.drift
        detail = (
            f"tps drifts {drift.pct_per_min:+.0f} % a minute over the window (trend "
            f"p={drift.p:.1g}); no last stretch of {shortest} s or more of {steady.seconds} s "
            f"holds within {steadiness.MAX_DRIFT_PCT_PER_MIN:g} % a minute and "
            f"{steadiness.FLAT_SHARE * 100:g} % over the stretch"
        )
        return [ValidityWarning("never_settled", detail)]
    if not steady.start:
        return []
    if steady.rose:
        detail = f"tps settled after {steady.skipped_s:.0f} of {steady.seconds} s"
        return [ValidityWarning("warm_up_in_window", detail)]
    detail = (
        f"tps fell for the first {steady.skipped_s:.0f} of {steady.seconds} s, then held "
        "(a drift down, not a warm-up)"
    )
    return [ValidityWarning("unsteady_timeline", detail)]


def sample_warnings(
    point: int, samples: PointSamples, steady: SteadyState | None
) -> list[ValidityWarning]:
    """The checks a point's stored timelines can fail (kept with its timeline digest);
    `steady`: its `point_steady_state`, which the digest draws too."""
    return [
        *_checkpoint_warning(point, samples),
        *_host_idle_warning(samples),
        *_timeline_warning(samples),
        *_steady_warning(steady),
    ]


def result_warnings(result: Result, in_samples: list[ValidityWarning]) -> list[ValidityWarning]:
    """The checks one measured point can fail on its own: those found in its samples
    (`sample_warnings`) and its result's, in the order CHECKS defines."""
    order = list(CHECKS)
    blamed = [_blame_for_full_host(result, warning) for warning in in_samples]
    found = joined(
        [
            *_pgbench_busy_warning(result),
            *blamed,
            *_failure_warning(result),
            *_schedule_warning(result),
        ]
    )
    return sorted(found, key=lambda warning: order.index(warning.code))


def point_warnings(result: Result, samples: PointSamples) -> list[ValidityWarning]:
    """The checks one measured point can fail on its own, from its samples and result."""
    steady = point_steady_state(samples)
    return result_warnings(result, sample_warnings(result.index, samples, steady))


def cell_warnings(summary: Summary | None) -> list[ValidityWarning]:
    """The checks on a run's repeats at one client count."""
    if summary is None:
        return []
    found = []
    if summary.cv is not None and summary.cv > REPEATS_CV_ABOVE:
        found.append(
            ValidityWarning("repeats_disagree", f"CV {summary.cv * 100:.0f} % across repeats")
        )
    if summary.n < MIN_REPEATS:
        found.append(ValidityWarning("too_few_repeats", f"{summary.n} of {MIN_REPEATS} needed"))
    return found


def merge_repeats(by_repeat: dict[int, list[ValidityWarning]]) -> list[ValidityWarning]:
    """One warning per code for a cell, naming the repeats it came from."""
    details: dict[str, list[str]] = {}
    for repeat in sorted(by_repeat):
        for warning in by_repeat[repeat]:
            details.setdefault(warning.code, []).append(f"repeat {repeat}: {warning.detail}")
    return [ValidityWarning(code, "; ".join(seen)) for code, seen in details.items()]
