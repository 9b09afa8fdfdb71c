"""The measured part of a job: dataset, setup SQL, then the client sweep.

The Sweep owns the order of things: the script files, `pgbench -i`, the setup
SQL, the client order, the warm-up (or, without one and without a rate limit, a
short calibration run whose tps sets the first point's log sampling rate),
CHECKPOINT/VACUUM between
points. Each
point is measured by its `PointRunner` (agents/sweep/local.py here,
agents/pair/remote.py on a client host), which gets the sweep's
`PointContext`, not the Sweep.
"""

import secrets

from agents.contract.errors import JobError
from agents.contract.pgbench_output.init_progress import parse_init_progress
from agents.contract.reports.latency import FULL_LOG_WARNING
from agents.contract.spec.document import (
    SweepSpec,
    statements_before_point,
    sweep_points,
    warm_up_seconds,
)
from agents.observe.server import unavailable_measurements
from agents.pgbench import command
from agents.postgres.workload import run_setup_sql
from agents.sweep.context import PointContext, PointRunner, last_lines

NO_TIMELINE = (
    "no per-second timeline: it is read from the transaction log, and this workload "
    'writes none (workload.latency_log "none"); set workload.progress for pgbench\'s -P 1'
)
# Seeds people can read and type back in (the lab's are below this too).
CLIENT_ORDER_SEEDS = 2**31


def records_cpu_profile(sweep: SweepSpec) -> bool:
    """Whether this job runs the CPU-profile pass: asked for, and the job measures the first
    repeat (in rounds each round is a job, and only the cell's first records one)."""
    return sweep["cpu_profile"] and sweep["first_repeat"] == 1


class Sweep:
    """Runs the dataset steps and every point of one job inside its cluster; then, with
    `perf` (its path), the CPU-profile pass."""

    def __init__(self, context: PointContext, points: PointRunner, perf: str | None = None):
        self.context = context
        self.reporter = context.reporter
        self.spec = context.spec
        self.points = points
        self.perf = perf

    def run(self) -> None:
        self.prepare_dataset()
        points = sweep_points(self._seeded(self.spec["sweep"]))
        self.reporter.status("running", f"running {len(points)} points")
        workload = self.spec["workload"]
        if workload["latency_log"] == "full":
            self.reporter.emit("log", {"level": "warning", "message": FULL_LOG_WARNING})
        if workload["latency_log"] == "none" and not workload["progress"]:
            self.reporter.emit("log", {"level": "info", "message": NO_TIMELINE})
        for message in unavailable_measurements(self.context.install.version_num):
            self.reporter.emit("log", {"level": "info", "message": message})
        warmup = warm_up_seconds(self.spec["sweep"])
        if warmup:
            self.points.warm_up(points[0][0], warmup)
        elif workload["latency_log"] == "sampled" and not workload["rate_tps"]:
            # Under -R the rate bounds the tps, so it sets the sampling rate: a closed-loop
            # run at full speed just before the first window would only disturb it.
            self.points.calibrate(points[0][0])
        for index, (clients, repeat) in enumerate(points):
            self.reporter.check_cancel()
            self.run_statements_before_point()
            self.points.run_point(index, len(points), clients, repeat)
        if self.perf is not None:
            self.cpu_profile_pass([clients for clients, _repeat in points], self.perf)

    def cpu_profile_pass(self, clients_order: list[int], perf: str) -> None:
        """One more pass over the client counts with perf recording the server: after the
        measured points, so none of them ran beside perf; kept apart as CPU profiles."""
        for index, clients in enumerate(dict.fromkeys(clients_order)):
            self.reporter.check_cancel()
            self.run_statements_before_point()
            self.reporter.keep_cpu_profile(self.points.cpu_profile_point(index, clients, perf))

    def _seeded(self, sweep: SweepSpec) -> SweepSpec:
        """A random client order without a seed gets one drawn here; it stays in the spec,
        so the result document records it and the order can be replayed."""
        if sweep["order"] == "random" and sweep["seed"] is None:
            sweep["seed"] = secrets.randbelow(CLIENT_ORDER_SEEDS)
            message = f"random client order drawn from seed {sweep['seed']}"
            self.reporter.emit("log", {"level": "info", "message": message})
        return sweep

    def prepare_dataset(self) -> None:
        """Script files, `pgbench -i`, then the setup SQL."""
        self.context.prepare_workdir()
        self._initialise_dataset()
        self._run_setup_sql()

    def _initialise_dataset(self) -> None:
        dataset = self.spec["dataset"]
        self.reporter.status("loading", f"pgbench -i at scale {dataset['scale']}")
        pgbench = self.context.install.bindir / "pgbench"
        argv = command.init_argv(pgbench, dataset, self.context.conn)

        def on_line(line: str) -> None:
            progress = parse_init_progress(line)
            if progress is None:
                return
            if progress.get("step_seconds"):
                self.reporter.record_dataset("steps", progress["step_seconds"])
            self.reporter.step("pgbench_init", progress["message"], progress.get("percent"))

        finished = self.context.pgbench_command("pgbench_init", argv, on_line, timed=False)
        self.reporter.check_cancel()
        self.reporter.record_dataset("seconds", finished.seconds)
        if finished.exit_code != 0:
            raise JobError(
                "pgbench_init_failed",
                f"pgbench -i exited with {finished.exit_code}: {last_lines(finished.stderr)}",
            )

    def _run_setup_sql(self) -> None:
        sql = self.spec["dataset"]["setup_sql"].strip()
        if not sql:
            return
        self.reporter.step("setup_sql", "running setup SQL")
        seconds = run_setup_sql(self.context.cluster, sql)
        self.reporter.record_dataset("setup_sql_seconds", seconds)
        self.reporter.step("setup_sql", f"setup SQL done in {seconds:.2f} s", 100.0)

    def run_statements_before_point(self) -> None:
        """The spec's CHECKPOINT and/or VACUUM, before every measured point (the first too)."""
        statements = statements_before_point(self.spec["sweep"])
        if not statements:
            return
        self.reporter.step("before_point", f"running {' and '.join(statements)}")
        with self.context.cluster.connect_maintenance() as conn:
            for statement in statements:
                conn.execute(statement)
