"""What a measured point asks pgbench to log, where, and what its percentiles rest on.

Writing a line per transaction costs pgbench throughput (about 5 % of the
work per transaction for select-only at 2 clients on a 2-vCPU VM, about 4,000
instructions a line; docs/benchmarks.md), so by default
(`workload.latency_log: "sampled"`) pgbench logs a random sample of the
transactions (`--sampling-rate`) at a rate chosen to keep the log near
TARGET_LOG_LINES_PER_S lines a second, and never below what gives a point
PLANNED_LOGGED_TRANSACTIONS logged transactions (or every one, when a point
has fewer): its percentiles rest on at least MIN_LOGGED_TRANSACTIONS even
when it reaches a quarter of the tps it was expected to. The rate comes from the
throughput the point is expected to reach: the previous point's, the
warm-up's or a short calibration run's tps (agents/sweep/driver.py), scaled
up to this point's clients, the rate limit (-R), or a first guess that errs
high when nothing could be measured.

Logs go to a private directory under the agent's state directory, never under
a storage target being measured, and are read after pgbench has ended, so
reading them takes no CPU from the measured window.
"""

import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agents.contract.errors import JobError
from agents.contract.reports.latency import (
    FULL_LOG_WARNING,
    ExpectedFrom,
    LatencyPercentiles,
    PercentileSource,
)
from agents.contract.reports.results import ProgressLine
from agents.contract.vocabulary import LatencyLog
from agents.markers import ClusterMarker
from agents.pgbench.log_timeline import aggregate_timeline
from agents.pgbench.txlog import (
    TransactionLogError,
    merge_aggregate_logs,
    percentiles_of,
    read_transaction_logs,
)
from agents.postgres.osuser import OsUser, chown_tree, make_dirs

logger = logging.getLogger(__name__)

# 500 lines/s cost about 0.1 % of select-only's work here (docs/benchmarks.md)
# and give 30,000 latencies a minute (p99's rank known to ±0.06 percentile points).
TARGET_LOG_LINES_PER_S = 500
# The fewest logged transactions a point's percentiles should rest on (p99: its 10
# slowest), and what the rate plans for: four times that, so a point reaching a
# quarter of its expected tps still rests on the minimum (a point at more clients is
# expected at the last tps scaled up, and contention can cut it to a third).
MIN_LOGGED_TRANSACTIONS = 1000
PLANNED_LOGGED_TRANSACTIONS = 4 * MIN_LOGGED_TRANSACTIONS
# Used only when no tps could be measured before the point: above what select-only
# reaches per core here (about 13,000 tps), so it errs towards a smaller sample.
FIRST_GUESS_TPS_PER_CPU = 50_000
LOG_DIR_NAME = "txlog"
LOG_FILE_PREFIX = "pgbench_log"
STALE_AFTER_S = 24 * 3600
# In each point directory: the pid and start time of the agent process that made it.


@dataclass(frozen=True)
class ExpectedThroughput:
    """The tps a point is expected to reach, and what that expectation rests on."""

    tps: float
    source: ExpectedFrom


@dataclass(frozen=True)
class Measured:
    """A throughput already measured in this cluster: at `clients` clients, `tps`."""

    clients: int
    tps: float
    source: ExpectedFrom


def expected_throughput(
    clients: int, measured: Measured | None, rate_tps: float | None, cpu_count: int
) -> ExpectedThroughput:
    """The expected tps at `clients`: from a measurement scaled linearly up (never
    down) with the client count, else a first guess; capped by a rate limit."""
    if measured is not None and measured.tps > 0:
        scale = max(1.0, clients / measured.clients)
        expected = ExpectedThroughput(measured.tps * scale, measured.source)
    else:
        guess = FIRST_GUESS_TPS_PER_CPU * max(1, min(clients, cpu_count))
        expected = ExpectedThroughput(float(guess), "first_guess")
    if rate_tps and rate_tps < expected.tps:
        return ExpectedThroughput(float(rate_tps), "rate_limit")
    return expected


def point_transactions(
    expected_tps: float, duration_s: int | None, per_client: int | None, clients: int
) -> float | None:
    """The transactions a point is expected to run: its duration at the expected tps,
    or its transaction count (-t) times its clients; None when neither is set."""
    if duration_s:
        return expected_tps * duration_s
    if per_client:
        return float(per_client * clients)
    return None


def sampling_rate_for(expected_tps: float, transactions: float | None = None) -> float:
    """The fraction of transactions to log so the log holds ~TARGET_LOG_LINES_PER_S lines/s,
    or more when that would give fewer than PLANNED_LOGGED_TRANSACTIONS of the point's
    `transactions` (expected; unknown: None).

    Two significant digits; 1.0 (every transaction) when the point is that slow or short.
    """
    rate = TARGET_LOG_LINES_PER_S / expected_tps if expected_tps > 0 else 1.0
    if transactions:
        rate = max(rate, PLANNED_LOGGED_TRANSACTIONS / transactions)
    if rate >= 1.0:
        return 1.0
    return float(f"{rate:.2g}")


@dataclass(frozen=True)
class LogPlan:
    """The log one measured point writes: mode, sampling rate and why that rate."""

    mode: LatencyLog
    sampling_rate: float | None = None
    expected: ExpectedThroughput | None = None
    # Send the logged latencies' histogram with the percentiles (a point with a rate, -R).
    keeps_histogram: bool = False

    @classmethod
    def for_point(
        cls,
        mode: LatencyLog,
        expected: ExpectedThroughput,
        transactions: float | None = None,
        keeps_histogram: bool = False,
    ) -> "LogPlan":
        """The plan of a point expected at `expected` tps, running `transactions` in all."""
        if mode != "sampled":
            return cls(mode, keeps_histogram=keeps_histogram)
        rate = sampling_rate_for(expected.tps, transactions)
        return cls(mode, rate, expected, keeps_histogram)

    @property
    def source(self) -> PercentileSource:
        if self.mode == "aggregate":
            return "aggregate"
        if self.mode == "full" or self.sampling_rate == 1.0:
            return "full"
        return "sample"

    def args(self, log_prefix: Path) -> list[str]:
        """pgbench options for this log (none for mode "none")."""
        if self.mode == "none":
            return []
        argv = ["-l", f"--log-prefix={log_prefix}"]
        if self.mode == "aggregate":
            argv.append("--aggregate-interval=1")
        elif self.source == "sample":
            argv.append(f"--sampling-rate={self.sampling_rate}")
        return argv

    @property
    def tails_live(self) -> bool:
        """Whether its log is read while pgbench writes it (a sample: ~500 lines a second;
        a full log would take CPU from the measured window, an aggregate one comes late)."""
        return self.mode == "sampled"

    @property
    def timeline_rate(self) -> float:
        """The fraction of transactions its per-transaction log holds."""
        return self.sampling_rate if self.source == "sample" and self.sampling_rate else 1.0

    def read(self, log_files: list[Path], start: float, whole_seconds: int) -> "PointLogReading":
        """Percentiles, and the timeline of the first `whole_seconds` seconds after `start`
        (epoch seconds: when pgbench was launched), from the log files. An unreadable
        log gives neither, and an `error` saying why (the point itself is kept)."""
        summary = self._empty()
        timeline: list[ProgressLine] = []
        try:
            if self.mode == "aggregate":
                rows = merge_aggregate_logs(log_files)
                _add_aggregates(summary, rows)
                timeline = aggregate_timeline(rows)
            elif self.mode != "none":
                reading = read_transaction_logs(log_files, start)
                summary.update(percentiles_of(reading))
                if self.keeps_histogram and reading.histogram.get_total_count():
                    summary["histogram"] = reading.histogram.encode().decode()
                timeline = reading.bins.timeline(whole_seconds, self.timeline_rate)
        except (TransactionLogError, OSError) as error:
            logger.warning("transaction log unreadable, point kept without percentiles: %s", error)
            summary["error"] = f"transaction log unreadable: {error}"
        return PointLogReading(summary, timeline)

    def _empty(self) -> LatencyPercentiles:
        summary = LatencyPercentiles(
            p50=None,
            p90=None,
            p95=None,
            p99=None,
            max=None,
            source=self.source,
            sampling_rate=1.0 if self.source == "full" else self.sampling_rate,
            sampled_transactions=0,
            failed_count=0,
            skipped_count=0,
            error=None,
            warning=FULL_LOG_WARNING if self.mode == "full" else None,
        )
        if self.expected is not None:
            summary["expected_tps"] = round(self.expected.tps, 1)
            summary["expected_from"] = self.expected.source
        return summary


@dataclass(frozen=True)
class PointLogReading:
    """What a point's log gave: its percentiles and, from the log, its timeline."""

    percentiles: LatencyPercentiles
    timeline: list[ProgressLine]


def _add_aggregates(summary: LatencyPercentiles, rows: list[dict[str, int]]) -> None:
    """Exact maximum and counts from per-second aggregates (no percentiles there)."""
    busy = [row["max_latency_us"] for row in rows if row["transactions"]]
    summary["max"] = round(max(busy) / 1000, 3) if busy else None
    summary["sampled_transactions"] = sum(row["transactions"] for row in rows)
    summary["failed_count"] = sum(
        row["serialization_failures"] + row["deadlock_failures"] for row in rows
    )
    summary["skipped_count"] = sum(row["skipped"] for row in rows)


def log_root(state_dir: Path, storage: dict[str, Path], mode: LatencyLog) -> Path:
    """The directory for this agent's transaction logs, `<state_dir>/txlog`.

    Refused (a user error naming the fix) when it lies inside a storage target
    of the job: the log would be written to the disk being measured.
    """
    root = Path(state_dir).resolve() / LOG_DIR_NAME
    if mode == "none":
        return root
    for role, target in storage.items():
        if root.is_relative_to(Path(target).resolve()):
            raise JobError(
                "invalid_spec",
                f"the agent's state directory {state_dir} lies inside the {role} storage "
                f"target {target}: pgbench's transaction log would be written to the disk "
                "being measured. Give the agent a --state-dir outside its storage targets, "
                'or set workload.latency_log to "none"',
                field="workload.latency_log",
            )
    return root


@contextmanager
def point_log_dir(root: Path, label: str, os_user: OsUser) -> Iterator[Path]:
    """A private directory for one point's log, owned by pgbench's OS user; removed after.

    Directories a killed agent left behind are removed first (remove_stale_logs).
    """
    make_dirs(root)
    remove_stale_logs(root)
    directory = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=root))
    _write_owner(directory)
    chown_tree(directory, os_user)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, onerror=_log_removal_error)


def remove_stale_logs(root: Path, now: float | None = None) -> list[Path]:
    """Remove point directories nothing was written to for STALE_AFTER_S (a killed agent's);
    a running point's log is written to far more often. Returns what was removed."""
    now = time.time() if now is None else now
    stale = [
        directory
        for directory in root.iterdir()
        if directory.is_dir() and now - _last_write(directory) > STALE_AFTER_S
    ]
    for directory in stale:
        logger.warning("removing a transaction log left behind: %s", directory)
        shutil.rmtree(directory, onerror=_log_removal_error)
    return stale


def remove_dead_job_logs(state_dir: Path) -> list[Path]:
    """Remove the point directories whose agent process is gone (killed mid-point); the
    worker calls this when it starts. Directories of a live process (another agent
    sharing the state directory) stay, and so do those without an owner file (left to
    `remove_stale_logs`). Returns what was removed."""
    root = Path(state_dir).resolve() / LOG_DIR_NAME
    if not root.is_dir():
        return []
    dead = [d for d in sorted(root.iterdir()) if d.is_dir() and _owner_gone(d)]
    for directory in dead:
        logger.warning("removing the transaction log of a job no agent runs: %s", directory)
        shutil.rmtree(directory, onerror=_log_removal_error)
    return dead


def _write_owner(directory: Path) -> None:
    """Mark a point's directory as this process's, as a cluster's directories are."""
    ClusterMarker.for_this_process(directory.name).write(directory)


def _owner_gone(directory: Path) -> bool:
    """Whether the directory's marker names a process that no longer runs; False
    without a usable marker."""
    marker = ClusterMarker.read(directory)
    return marker is not None and not marker.owner_alive()


def _last_write(directory: Path) -> float:
    try:
        return max(
            [directory.stat().st_mtime] + [path.stat().st_mtime for path in directory.iterdir()]
        )
    except FileNotFoundError:  # its own point has just removed it
        return time.time()


def _log_removal_error(
    function: object, path: str, exc_info: tuple[type[BaseException], BaseException, object]
) -> None:
    logger.warning("could not remove transaction log %s: %s", path, exc_info[1])


def log_files(directory: Path) -> list[Path]:
    """The files pgbench wrote for one run (one per thread)."""
    return sorted(directory.glob(f"{LOG_FILE_PREFIX}.*"))
