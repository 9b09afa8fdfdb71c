"""The words job specs and results use, each defined once.

Every vocabulary is a `Literal` type (what mypy checks documents against) and,
where the lab offers or stores its values, the tuple of them, read from that
type, in the order forms list them.
The lab's Django choices are built from these tuples (runs/agentlink/choices.py), so a
new value is added here and nowhere else.
"""

from typing import Literal, get_args

Source = Literal["auto", "system", "prebuilt", "build"]
SOURCES: tuple[Source, ...] = get_args(Source)
SOURCE_LABELS: dict[Source, str] = {
    "auto": "Installed on the host, else prebuilt",
    "system": "Installed on the host only",
    "prebuilt": "Prebuilt release only",
    "build": "Built from source by the agent",
}

BuiltinScript = Literal["tpcb-like", "simple-update", "select-only"]
BUILTIN_SCRIPTS: tuple[BuiltinScript, ...] = get_args(BuiltinScript)

QueryMode = Literal["simple", "extended", "prepared"]
QUERY_MODES: tuple[QueryMode, ...] = get_args(QueryMode)

PartitionMethod = Literal["range", "hash"]
PARTITION_METHODS: tuple[PartitionMethod, ...] = get_args(PartitionMethod)

SweepOrder = Literal["ascending", "interleaved", "random"]
SWEEP_ORDERS: tuple[SweepOrder, ...] = get_args(SweepOrder)

BetweenPoints = Literal["none", "checkpoint", "vacuum", "vacuum_checkpoint"]
BETWEEN_POINTS: tuple[BetweenPoints, ...] = get_args(BetweenPoints)

# What a measured point asks pgbench to log (agents/contract/reports/latency.py).
LatencyLog = Literal["sampled", "aggregate", "full", "none"]
LATENCY_LOGS: tuple[LatencyLog, ...] = get_args(LatencyLog)
LATENCY_LOG_LABELS: dict[LatencyLog, str] = {
    "sampled": "Sampled transaction log (percentiles at almost no cost)",
    "aggregate": "Per-second aggregate log (exact max, no percentiles)",
    "full": "Every transaction (exact percentiles, costs throughput)",
    "none": "No log (no percentiles)",
}

# Which half of a run a job is: the whole run on one host, or the server
# (cluster) or client (pgbench) half of a run with a client host.
PairRole = Literal["local", "server", "client"]
PAIR_ROLES: tuple[PairRole, ...] = get_args(PairRole)

# How a job ended (the result document's `status`); the lab's run states are
# these plus the two it keeps before a result arrives.
JobOutcome = Literal["succeeded", "failed", "cancelled"]
JOB_OUTCOMES: tuple[JobOutcome, ...] = get_args(JobOutcome)
PendingState = Literal["queued", "running"]
PENDING_STATES: tuple[PendingState, ...] = get_args(PendingState)

LogLevel = Literal["debug", "info", "warning", "error"]

# What a job is doing, as its `status` events say.
JobState = Literal[
    "provisioning", "initdb", "starting", "loading", "running", "stopping", "finished"
]
