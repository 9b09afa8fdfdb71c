"""Building pgbench command lines (argv lists, never shell text).

`plain_argv` is the command a user would type for the job's workload;
`run_argv` adds what the lab reports from (`reporting_args`:
`--failures-detailed`, and `-P 1` and `-r` on request) and the transaction
log the point's LogPlan asks for (agents/pgbench/latency_log.py), which also
gives the per-second timeline (agents/pgbench/log_timeline.py).
`python -m agents selfcheck` measures what these additions cost.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agents.contract.errors import JobError
from agents.contract.spec.document import DatasetSpec, JobSpec, ScriptSpec, WorkloadSpec

FIRST_MAJOR_WITH_RETRIES = 15


@dataclass(frozen=True)
class Connection:
    """Where pgbench connects: a private socket directory, a port, a user and a database."""

    host: str
    port: int
    user: str = "postgres"
    dbname: str = "postgres"

    def args(self) -> list[str]:
        return ["-h", self.host, "-p", str(self.port), "-U", self.user]


def init_argv(pgbench: Path, dataset: DatasetSpec, conn: Connection) -> list[str]:
    """`pgbench -i` with the dataset's scale and init options."""
    argv = [str(pgbench), "-i", "-s", str(dataset["scale"])]
    if dataset["init_steps"]:
        argv += ["-I", dataset["init_steps"]]
    if dataset["partitions"]:
        argv += ["--partitions", str(dataset["partitions"])]
        if dataset["partition_method"]:
            argv += ["--partition-method", dataset["partition_method"]]
    if dataset["unlogged_tables"]:
        argv.append("--unlogged-tables")
    if dataset["fillfactor"]:
        argv += ["-F", str(dataset["fillfactor"])]
    if dataset["foreign_keys"]:
        argv.append("--foreign-keys")
    return argv + conn.args() + [conn.dbname]


# Before 9.6 pgbench has no -b and no @weight: one script, picked by these flags.
UNWEIGHTED_BUILTIN_FLAGS = {"tpcb-like": [], "simple-update": ["-N"], "select-only": ["-S"]}


def script_args(
    scripts: Sequence[Mapping[str, object]], script_paths: dict[int, Path], weighted: bool = True
) -> list[str]:
    """`-b name@weight` for builtins, `-f path@weight` for custom scripts written to disk.

    With `weighted` false (pgbench before 9.6; the spec then has one script, see
    agents/contract/spec/pgbench_versions.py) a builtin is `-S`, `-N` or nothing, a custom one
    `-f path`.
    """
    if not weighted:
        script = scripts[0]
        builtin = script.get("builtin")
        if isinstance(builtin, str):
            return UNWEIGHTED_BUILTIN_FLAGS[builtin]
        return ["-f", str(script_paths[0])]
    argv = []
    for index, script in enumerate(scripts):
        if "builtin" in script:
            argv += ["-b", f"{script['builtin']}@{script['weight']}"]
        else:
            argv += ["-f", f"{script_paths[index]}@{script['weight']}"]
    return argv


def workload_args(
    pgbench: Path,
    pgbench_major: int,
    spec: JobSpec,
    clients: int,
    threads: int,
    script_paths: dict[int, Path],
    duration_s: int | None = None,
    scripts: Sequence[ScriptSpec] | None = None,
    weighted_scripts: bool = True,
) -> list[str]:
    """pgbench and the workload's options at `clients` clients, without the connection.

    `duration_s` overrides the spec's duration or transaction count (a warm-up);
    `scripts` the workload's scripts (one of several processes of a point).
    `weighted_scripts` is false for pgbench before 9.6 (see `script_args`).
    """
    workload, sweep = spec["workload"], spec["sweep"]
    scripts = workload["scripts"] if scripts is None else scripts
    argv = [str(pgbench), "-c", str(clients), "-j", str(threads)]
    if duration_s is not None:
        argv += ["-T", str(duration_s)]
    elif sweep["duration_s"] is not None:
        argv += ["-T", str(sweep["duration_s"])]
    else:
        argv += ["-t", str(sweep["transactions"])]
    argv += ["-M", workload["query_mode"]]
    if workload["no_vacuum"]:
        argv.append("-n")
    if workload["vacuum_all"]:
        argv.append("-v")
    if workload["connect_per_transaction"]:
        argv.append("-C")
    if workload["rate_tps"]:
        argv += ["-R", _number(workload["rate_tps"])]
    if workload["latency_limit_ms"]:
        argv += ["-L", _number(workload["latency_limit_ms"])]
    argv += _max_tries_args(workload, pgbench_major)
    if all("text" in script for script in scripts):
        argv += ["-s", str(spec["dataset"]["scale"])]
    for name, value in sorted(workload["defines"].items()):
        argv += ["-D", f"{name}={value}"]
    return argv + script_args(scripts, script_paths, weighted_scripts)


def plain_argv(workload: list[str], conn: Connection) -> list[str]:
    """The command a user would type: the workload and the connection, nothing the lab adds."""
    return workload + conn.args() + [conn.dbname]


def reporting_args(workload: WorkloadSpec, pgbench_major: int) -> list[str]:
    """What the lab reports from besides the log: `-P 1` (an exact per-second timeline,
    off by default: its timed waits cost ~3 % of select-only tps), `-r` (per-statement
    latencies, off by default: it costs throughput), `--failures-detailed` (15+, free:
    it only splits the failure counts)."""
    argv = []
    if workload["progress"]:
        argv += ["-P", "1"]
    if workload["statement_latencies"]:
        argv.append("-r")
    if pgbench_major >= FIRST_MAJOR_WITH_RETRIES:
        argv.append("--failures-detailed")
    return argv


def run_argv(
    workload: list[str], reporting: list[str], log_args: list[str], conn: Connection
) -> list[str]:
    """The lab's command: the workload plus its reporting options and `log_args`."""
    return workload + reporting + log_args + conn.args() + [conn.dbname]


def _max_tries_args(workload: WorkloadSpec, pgbench_major: int) -> list[str]:
    if workload["max_tries"] is None:
        return []
    if pgbench_major < FIRST_MAJOR_WITH_RETRIES:
        raise JobError(
            "invalid_spec",
            f"pgbench {pgbench_major} has no --max-tries (it came in 15); remove it or "
            "choose PostgreSQL 15 or newer",
            field="workload.max_tries",
        )
    return [f"--max-tries={workload['max_tries']}"]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def default_threads(clients: int, cpu_count: int) -> int:
    """pgbench threads when the spec leaves them open: one per client, at most one per CPU."""
    return max(1, min(clients, cpu_count))


LOG_PREFIX_OPTION = "--log-prefix="


def log_directories(argv: Sequence[str]) -> list[Path]:
    """The directories pgbench writes its transaction log to (`--log-prefix=DIR/NAME`)."""
    return [
        Path(arg.removeprefix(LOG_PREFIX_OPTION)).parent
        for arg in argv
        if arg.startswith(LOG_PREFIX_OPTION)
    ]
