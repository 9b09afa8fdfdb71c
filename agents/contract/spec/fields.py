"""The job spec's fields, each declared once: name, type, default, bounds or choices,
label, help text and the first pgbench version that has its option.

The contract's defaults and per-field validation (agents/contract/spec/document.py), the
pgbench version rules (agents/contract/spec/pgbench_versions.py) and, in the lab, the
model-backed form fields, API fields, job spec sections and series copies
(runs/agentlink/row_fields.py) are derived from these tuples. A field of kind `list` or
`dict` has a shape of its own, checked by hand in agents/contract/spec/document.py;
every other kind is checked here. Pure Python, standard library only.
"""

from dataclasses import dataclass

from agents.contract.vocabulary import (
    BETWEEN_POINTS,
    LATENCY_LOGS,
    PARTITION_METHODS,
    QUERY_MODES,
    SWEEP_ORDERS,
)

# A field's kind: the JSON type its value has (`choice`: one of `choices`).
KINDS = ("bool", "int", "float", "str", "choice", "list", "dict")
COMPOUND_KINDS = ("list", "dict")


@dataclass(frozen=True)
class Field:
    """One spec field. `null` lets it be null; `option` and `since` (a
    server_version_num) name the pgbench option it asks for and the first version
    that has it; `per_job` fields are set by the lab for each job, never chosen."""

    name: str
    kind: str
    default: object
    label: str
    help: str = ""
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    null: bool = False
    option: str = ""
    since: int = 0
    per_job: bool = False

    @property
    def compound(self) -> bool:
        return self.kind in COMPOUND_KINDS

    def problem(self, value: object) -> str | None:
        """What is wrong with `value` for this field (None: nothing); compound kinds
        are checked by their section's own rules."""
        if value is None:
            return None if self.null else f"must not be null, got {value!r}"
        if self.kind == "bool" and not isinstance(value, bool):
            return f"must be true or false, got {value!r}"
        if self.kind == "int":
            return self._integer_problem(value)
        if self.kind == "float" and (
            isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        ):
            return f"must be a positive number, got {value!r}"
        if self.kind == "choice" and value not in self.choices:
            return f"must be one of {', '.join(self.choices)}; got {value!r}"
        if self.kind == "str" and not isinstance(value, str):
            return f"must be text, got {value!r}"
        return None

    def _integer_problem(self, value: object) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be a whole number, got {value!r}"
        low, high = self.minimum or 0, self.maximum
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f">= {low}"
            return f"must be {bound}, got {value}"
        return None


DATASET: tuple[Field, ...] = (
    Field("scale", "int", 1, "Scale", "pgbench -i -s: 100,000 accounts per unit.", 1, 1_000_000),
    Field(
        "init_steps",
        "str",
        None,
        "Init steps",
        "pgbench -I: letters from dtgGvpf (empty: pgbench's default).",
        null=True,
        option="-I (init steps)",
        since=110000,
    ),
    Field(
        "partitions",
        "int",
        None,
        "Partitions",
        "pgbench --partitions of pgbench_accounts.",
        0,
        100_000,
        null=True,
        option="--partitions",
        since=130000,
    ),
    Field(
        "partition_method",
        "choice",
        None,
        "Partition method",
        choices=PARTITION_METHODS,
        null=True,
    ),
    Field(
        "unlogged_tables",
        "bool",
        False,
        "Unlogged tables",
        option="--unlogged-tables",
        since=90300,
    ),
    Field("fillfactor", "int", None, "Fillfactor", "pgbench -F.", 10, 100, null=True),
    Field("foreign_keys", "bool", False, "Foreign keys", option="--foreign-keys", since=110000),
    Field("setup_sql", "str", "", "Setup SQL (after pgbench -i)"),
)

WORKLOAD: tuple[Field, ...] = (
    Field(
        "scripts",
        "list",
        [{"builtin": "tpcb-like", "weight": 1}],
        "Scripts",
        option="several scripts and weights (-b name@weight)",
        since=90600,
    ),
    Field("query_mode", "choice", "simple", "Query mode", "pgbench -M.", choices=QUERY_MODES),
    Field("no_vacuum", "bool", False, "No vacuum (-n)"),
    Field(
        "rate_tps",
        "float",
        None,
        "Rate limit (tps)",
        "pgbench -R: the transactions per second to aim at.",
        null=True,
        option="-R (--rate)",
        since=90400,
    ),
    Field(
        "latency_limit_ms",
        "float",
        None,
        "Latency limit (ms)",
        "pgbench -L: transactions slower than this count as late.",
        null=True,
        option="-L (--latency-limit)",
        since=90500,
    ),
    Field(
        "max_tries",
        "int",
        None,
        "Max tries",
        "pgbench --max-tries for serialization and deadlock failures.",
        0,
        1_000_000,
        null=True,
        option="--max-tries",
        since=150000,
    ),
    Field("defines", "dict", {}, "Variables (-D)"),
    Field(
        "latency_log",
        "choice",
        "sampled",
        "Latency log",
        "The transaction log the latency percentiles and the per-second timeline "
        "come from. Sampled: about 500 lines a second, its cost within the noise of plain "
        "pgbench; the timeline is estimated from it, live. Aggregate: exact per-second "
        "summaries at the end of each point, the maximum but no percentiles. Full log: every "
        "transaction, costs 5-13 % of select-only tps: for studying single slow transactions "
        "only. None: no percentiles and no timeline (unless -P 1).",
        choices=LATENCY_LOGS,
    ),
    # -P 1: an exact per-second timeline at about 3 % of select-only throughput; without it
    # the timeline is read from the transaction log (agents/pgbench/log_timeline.py).
    Field(
        "progress",
        "bool",
        False,
        "Exact per-second timeline (-P 1)",
        "Without it the per-second timeline is read from the transaction log: "
        "estimated from the sample, the same numbers live and kept. -P 1 makes it exact but "
        "costs about 3 % of select-only throughput (its timed waits): for runs where single "
        "seconds matter more than that.",
        option="-P (--progress)",
        since=90400,
    ),
    Field(
        "statement_latencies",
        "bool",
        False,
        "Per-statement latencies (-r)",
        "The average latency of each script statement, shown with each point's "
        "command. -r costs about 0.25 % of throughput on the shortest "
        "transactions (select-only): a diagnosis tool, off unless asked for.",
    ),
    Field(
        "vacuum_all",
        "bool",
        False,
        "Vacuum all tables first (-v)",
        "pgbench -v: vacuum the four standard pgbench tables before each point "
        "(preset 4 before its read-write tests). Excludes -n.",
    ),
    # Several pgbench processes per point, started together; empty: one process of `scripts`.
    Field("processes", "list", [], "Processes"),
    Field(
        "connect_per_transaction",
        "bool",
        False,
        "New connection per transaction (-C)",
        "pgbench -C: every transaction opens its own connection, measuring the cost of "
        "connecting (much lower tps than with connections kept).",
    ),
    Field(
        "track_statements",
        "bool",
        False,
        "Statement statistics (pg_stat_statements)",
        "Loads pg_stat_statements (the agent sets shared_preload_libraries, shown among the "
        "settings) and reports each point's statements: calls, mean time, rows and blocks. "
        "Read outside the measured window, but the extension costs a little on every "
        "statement: compare runs that both track statements, or neither.",
    ),
)

SWEEP: tuple[Field, ...] = (
    Field("clients", "list", [1], "Clients", "Client counts to sweep."),
    Field(
        "threads",
        "int",
        None,
        "Threads",
        "Empty: min(clients, host CPUs)",
        1,
        10_000,
        null=True,
    ),
    Field("duration_s", "int", None, "Duration (s)", "pgbench -T", 1, 7 * 24 * 3600, null=True),
    Field(
        "transactions",
        "int",
        None,
        "Transactions per client",
        "pgbench -t; leave the duration empty to use it",
        1,
        10**12,
        null=True,
    ),
    Field("repeats", "int", 1, "Repeats", minimum=1, maximum=1000),
    Field(
        "order",
        "choice",
        "ascending",
        "Client order",
        "Within each run; random draws a new order for every repeat.",
        choices=SWEEP_ORDERS,
    ),
    Field("warmup_s", "int", 0, "Warm-up (s)", minimum=0, maximum=24 * 3600),
    Field(
        "between_points",
        "choice",
        "checkpoint",
        "Between points",
        "Run before every measured point, the first too, outside its measured window: "
        "a CHECKPOINT starts each point without the dirty buffers the load or the point "
        "before left behind.",
        choices=BETWEEN_POINTS,
    ),
    Field(
        "cpu_profile",
        "bool",
        False,
        "CPU profile (perf)",
        "One more pass over the client counts after the measured ones, with perf recording "
        "the server's stacks at 99 Hz: drawn as a flame graph, never counted as a measured "
        "result. In rounds only the first round records one. Needs perf on the agent's host.",
    ),
    # The number of the first repeat (the lab's rounds send one repeat per job).
    Field("first_repeat", "int", 1, "First repeat", minimum=1, maximum=1_000_000, per_job=True),
    # Seeds the `random` client order; the agent draws one when it is null.
    Field("seed", "int", None, "Seed", minimum=0, maximum=2**63 - 1, null=True, per_job=True),
)

SECTIONS: dict[str, tuple[Field, ...]] = {
    "dataset": DATASET,
    "workload": WORKLOAD,
    "sweep": SWEEP,
}


def defaults(fields: tuple[Field, ...]) -> dict[str, object]:
    """A section's defaults, in declaration order."""
    return {field.name: field.default for field in fields}
