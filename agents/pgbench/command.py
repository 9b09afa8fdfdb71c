"""Building pgbench command lines (argv lists, never shell text).

The runner always adds `-P 1` (progress timeline), `-r` (per-statement
latencies) and `-l` (per-transaction log for percentiles); everything else
comes from the job spec.
"""

from dataclasses import dataclass
from pathlib import Path

from agents.errors import JobError

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


def init_argv(pgbench: Path, dataset: dict, conn: Connection) -> list[str]:
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


def script_args(scripts: list[dict], script_paths: dict[int, Path]) -> list[str]:
    """`-b name@weight` for builtins, `-f path@weight` for custom scripts written to disk."""
    argv = []
    for index, script in enumerate(scripts):
        if "builtin" in script:
            argv += ["-b", f"{script['builtin']}@{script['weight']}"]
        else:
            argv += ["-f", f"{script_paths[index]}@{script['weight']}"]
    return argv


def run_argv(
    pgbench: Path,
    pgbench_major: int,
    spec: dict,
    clients: int,
    threads: int,
    conn: Connection,
    script_paths: dict[int, Path],
    log_prefix: Path | None,
    duration_s: int | None = None,
) -> list[str]:
    """One measured pgbench run at `clients` clients (or a warm-up when duration_s is given)."""
    workload, sweep = spec["workload"], spec["sweep"]
    argv = [str(pgbench), "-c", str(clients), "-j", str(threads)]
    if duration_s is not None:
        argv += ["-T", str(duration_s)]
    elif sweep["duration_s"] is not None:
        argv += ["-T", str(sweep["duration_s"])]
    else:
        argv += ["-t", str(sweep["transactions"])]
    argv += ["-M", workload["query_mode"], "-P", "1", "-r"]
    if log_prefix is not None:
        argv += ["-l", f"--log-prefix={log_prefix}"]
    if workload["no_vacuum"]:
        argv.append("-n")
    if workload["rate_tps"]:
        argv += ["-R", _number(workload["rate_tps"])]
    if workload["latency_limit_ms"]:
        argv += ["-L", _number(workload["latency_limit_ms"])]
    argv += _retry_args(workload, pgbench_major)
    if all("text" in script for script in workload["scripts"]):
        argv += ["-s", str(spec["dataset"]["scale"])]
    for name, value in sorted(workload["defines"].items()):
        argv += ["-D", f"{name}={value}"]
    argv += script_args(workload["scripts"], script_paths)
    return argv + conn.args() + [conn.dbname]


def _retry_args(workload: dict, pgbench_major: int) -> list[str]:
    if pgbench_major < FIRST_MAJOR_WITH_RETRIES:
        if workload["max_tries"] is not None:
            raise JobError(
                "invalid_spec",
                f"pgbench {pgbench_major} has no --max-tries (it came in 15); remove it or "
                "choose PostgreSQL 15 or newer",
                field="workload.max_tries",
            )
        return []
    argv = ["--failures-detailed"]
    if workload["max_tries"] is not None:
        argv.append(f"--max-tries={workload['max_tries']}")
    return argv


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def default_threads(clients: int, cpu_count: int) -> int:
    """pgbench threads when the spec leaves them open: one per client, at most one per CPU."""
    return max(1, min(clients, cpu_count))
