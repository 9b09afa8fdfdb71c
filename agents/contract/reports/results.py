"""The result document and its point results (docs/contracts.md, section 3).

The agent builds them (agents/job.py, agents/sweep/); `python -m agents run`
prints the document, the final `result` event carries it, and every finished
point also travels alone in a `point` event. Samples are open dictionaries
(`t` plus whatever the samplers measured), the rest is typed.
"""

from typing import Any, Literal, NotRequired, TypedDict

from agents.contract.builds.definition import BuildRecord
from agents.contract.errors import ErrorDocument
from agents.contract.reports.counters import PointCounters
from agents.contract.reports.cpu_profiles import CpuProfileResult
from agents.contract.reports.facts import Facts
from agents.contract.reports.installs import InstallRecord
from agents.contract.reports.latency import LatencyPercentiles
from agents.contract.reports.noise import HostCanary, PointNoise
from agents.contract.spec.document import JobSpec, SettingValue
from agents.contract.vocabulary import JobOutcome

RESULT_VERSION: Literal[1] = 1

# One host or server sample: `t` (seconds into the point) and its measurements.
Sample = dict[str, Any]


class ProgressLine(TypedDict):
    """One second of a point: a `pgbench -P` line, or the same second read from the
    transaction log (agents/pgbench/log_timeline.py). From a sampled log, tps and
    failed are estimates: `sampled` log lines at `sampling_rate` (relative error
    about 1/sqrt(sampled)); the latency is that of the sampled transactions, and so are
    its percentiles (nearest rank; None in a second with no sampled transaction)."""

    t: float
    tps: float
    latency_ms: float
    stddev_ms: float
    failed: NotRequired[int | None]
    lag_ms: NotRequired[float | None]
    skipped: NotRequired[int | None]
    retried: NotRequired[int | None]
    retries: NotRequired[int | None]
    sampled: NotRequired[int]
    sampling_rate: NotRequired[float]
    p50_ms: NotRequired[float | None]
    p95_ms: NotRequired[float | None]
    p99_ms: NotRequired[float | None]


class StatementLatency(TypedDict):
    latency_ms: float
    command: str
    failures: NotRequired[int | None]
    retries: NotRequired[int | None]
    script: NotRequired[int | None]


class ProcessResult(TypedDict):
    """One of several pgbench processes of a point (`workload.processes`): its own numbers,
    as it printed them, with its exact argv and output."""

    number: int
    clients: int
    threads: int
    argv: list[str]
    exit_code: int | None
    seconds: float
    stopped_early: bool
    stdout: str
    stderr: str
    tps: float | None
    latency_avg_ms: float | None
    latency_stddev_ms: float | None
    transactions: int | None
    failed: int | None
    scripts: list[dict[str, Any]]
    statements: list[StatementLatency]
    parse_error: str | None


class PointResult(TypedDict):
    """One measured pgbench run (clients, repeat) with its timelines.

    The summary keys are those of `python -m agents parse` (docs/contracts.md);
    a point that could not be parsed has `parse_error` and no summary.
    """

    index: int
    clients: int
    threads: int | None
    repeat: int
    argv: list[str]
    exit_code: int | None
    stdout: str
    stderr: str
    progress: list[ProgressLine]
    host_samples: list[Sample]
    server_samples: list[Sample]
    tps: float | None
    latency_avg_ms: float | None
    latency_stddev_ms: float | None
    latency_percentiles_ms: LatencyPercentiles | None
    transactions: int | None
    failed: int | None
    duration_s: float | None
    statements: list[StatementLatency]
    seconds: NotRequired[float]
    stopped_early: NotRequired[bool]
    parse_error: NotRequired[str | None]
    agent_cpu_s: NotRequired[float]
    # pgbench's own CPU time (user + system, all its threads) over the point, and how many
    # CPUs its threads could use at most on the host it ran on (threads, or fewer CPUs).
    pgbench_cpu_s: NotRequired[float | None]
    pgbench_cpus: NotRequired[int | None]
    # pgbench's context switches over the point (its rusage, all its threads).
    pgbench_voluntary_switches: NotRequired[int | None]
    pgbench_involuntary_switches: NotRequired[int | None]
    # When the agent launched pgbench and reaped it, seconds since the epoch on the
    # agent's clock (its window lies within them; a duet's sides compare theirs).
    started_epoch: NotRequired[float | None]
    ended_epoch: NotRequired[float | None]
    # The host's CPU steal and the CPU used outside the job over the window
    # (agents/contract/reports/noise.py); absent from agents before it.
    noise: NotRequired[PointNoise]
    # The server's and the OS's counters over the window, per transaction
    # (agents/contract/reports/counters.py); absent where they were not read.
    counters: NotRequired[PointCounters]
    query_mode: NotRequired[str | None]
    scale: NotRequired[int | None]
    notices: NotRequired[list[str]]
    errors: NotRequired[list[str]]
    # stderr/stdout lines of no known kind (interleaved threads, multi-line server messages).
    messages: NotRequired[list[str]]
    aborted: NotRequired[bool]
    # A run with a client host: the client host's own samples (CPU, memory) during the point.
    client_host_samples: NotRequired[list[Sample]]
    # Clients that pgbench reported as aborted, and transactions retried (--max-tries).
    aborted_clients: NotRequired[int]
    retried: NotRequired[int | None]
    # With a rate (-R) and a latency limit (-L), as pgbench printed them: transactions
    # skipped (they would have started too late), transactions over the limit, the limit,
    # and the schedule lag (None, or absent, where pgbench printed no such line).
    skipped: NotRequired[int | None]
    late: NotRequired[int | None]
    latency_limit_ms: NotRequired[float | None]
    lag_avg_ms: NotRequired[float | None]
    lag_max_ms: NotRequired[float | None]
    # pgbench's per-script blocks (several scripts: per-type rates and latencies); a point
    # of several processes numbers each block's `process`.
    scripts: NotRequired[list[dict[str, Any]]]
    # A point of several processes: the summary above sums them (agents/pgbench/combine.py),
    # `argv` is the first process's, `stdout`/`stderr` everyone's under a header.
    processes: NotRequired[list[ProcessResult]]


class CommandRecord(TypedDict):
    """A command the job ran, with its exact argv; `note` says how one that did not run
    for this job came to be (initdb's output copied from a template)."""

    name: str
    argv: list[str]
    seconds: float
    exit_code: int | None
    note: NotRequired[str]


class EffectiveSetting(TypedDict):
    name: str
    setting: str | None
    unit: str | None
    source: str


class SettingsRecord(TypedDict):
    requested: dict[str, SettingValue]
    effective: list[EffectiveSetting]
    warnings: list[str]
    # Compile-time settings the server reports (pg_settings context "internal"):
    # block_size, wal_block_size, segment_size, ... as "setting" or "setting unit".
    compiled: NotRequired[dict[str, str]]
    # The pg_settings catalogue this job read from the server because the agent had
    # none cached (the first job of a version; a source build's are its own): the lab
    # keeps it to check settings when runs are scheduled.
    catalogue: NotRequired[dict[str, Any]]


class ResultDocument(TypedDict):
    """What one job did: printed by the CLI, carried by the final `result` event."""

    version: Literal[1]
    run_id: str | None
    status: JobOutcome | Literal["running"]
    error: ErrorDocument | None
    started_at: str
    finished_at: str | None
    spec: JobSpec | dict[str, Any]
    install: InstallRecord | None
    build: NotRequired[BuildRecord | None]
    facts: Facts | None
    storage: dict[str, Any]
    settings: SettingsRecord
    steps: list[CommandRecord]
    dataset: dict[str, Any]
    points: list[PointResult]
    server_log_tail: str
    failed_point: NotRequired[PointResult]
    # The version of the agent that ran the job (agents.__version__).
    agent_version: NotRequired[str]
    # A run with a client host: the addresses, the transport and the median `SELECT 1`
    # round trip the client measured (`select1_ms`, over `select1_samples` queries).
    network: NotRequired[dict[str, Any]]
    # The CPU-profile pass's points (agents/contract/reports/cpu_profiles.py), apart from
    # `points`.
    cpu_profiles: NotRequired[list[CpuProfileResult]]
    # A side of a duet (agents/duet.py): the CPUs its server and pgbench ran on, and the
    # duet (its key, which side, the other side's run).
    cpus: NotRequired[list[int]]
    duet: NotRequired[dict[str, Any]]
    # The host canary timed before the cluster started (agents/contract/reports/noise.py);
    # absent from agents before it, and from jobs that failed before it.
    canary: NotRequired[HostCanary]
