"""Points measured on this host: one pgbench, or the workload's processes together.

Each point is one pgbench run (or one group, agents/sweep/process_group.py).
Its result keeps what pgbench printed (parsed and verbatim), the exact argv,
host and server samples, and latency percentiles and the per-second timeline
from pgbench's transaction log, sampled by default
(agents/pgbench/latency_log.py says how and where, agents/pgbench/log_timeline.py
why the timeline is not `-P 1`'s by default).
"""

import logging
from collections.abc import Callable
from typing import Any

from agents.contract.errors import JobError
from agents.contract.pgbench_output.parse import PgbenchParseError, parse_output
from agents.contract.reports.cpu_profiles import CpuProfileResult
from agents.contract.reports.latency import ExpectedFrom
from agents.contract.reports.results import PointResult, ProgressLine
from agents.contract.spec.pgbench_versions import FIRST_WITH_WEIGHTED_SCRIPTS
from agents.observe.cpu_profile import cpu_profile_document, no_cpu_profile, recording
from agents.observe.noise import point_noise
from agents.observe.point_counters import point_counters
from agents.pgbench import command
from agents.pgbench.group import MAX_NOTICES, parsed_summary, progress_lines
from agents.pgbench.latency_log import (
    LOG_FILE_PREFIX,
    LogPlan,
    Measured,
    expected_throughput,
    point_log_dir,
    point_transactions,
)
from agents.pgbench.point_log import PointLog
from agents.pgbench.process import Finished
from agents.postgres.workload import script_refusal
from agents.sweep.context import (
    PointBase,
    PointContext,
    PointSamples,
    as_point_result,
    last_lines,
)
from agents.sweep.process_group import ProcessGroupPoint

logger = logging.getLogger(__name__)

# The calibration run's length: its tps (without the connection time) need only be
# within a factor of four, which the sampling rate plans for (agents/pgbench/latency_log.py);
# a second is hundreds of transactions or more for the workloads that sample, and it is
# paid by every run without a warm-up (each round of an adaptive experiment).
CALIBRATION_S = 1


class LocalPoints:
    """Runs the warm-up and each point's pgbench here, against `context.cluster`."""

    def __init__(self, context: PointContext) -> None:
        self.context = context
        # The latest throughput measured in this cluster: it sets the next log's sampling rate.
        self.measured: Measured | None = None

    def warm_up(self, clients: int, seconds: int) -> None:
        message = f"warming up for {seconds} s at {clients} clients"
        self._unlogged_run("warmup", message, clients, seconds, "warmup")

    def calibrate(self, clients: int) -> None:
        """A short run without a log before the first point of a sweep without a warm-up:
        its tps sets the first point's sampling rate (agents/pgbench/latency_log.py)."""
        message = f"measuring the tps for {CALIBRATION_S} s at {clients} clients"
        self._unlogged_run("calibrate", message, clients, CALIBRATION_S, "calibration")

    def _unlogged_run(
        self, name: str, message: str, clients: int, seconds: int, source: ExpectedFrom
    ) -> None:
        context = self.context
        context.reporter.step(name, message)
        argv = self.run_argv(clients, log_args=[], duration_s=seconds)
        finished = context.pgbench_command(name, argv, lambda line: None, timed=True)
        context.reporter.check_cancel()
        if finished.exit_code != 0:
            # A refused script aborts the warm-up or the calibration before any point.
            raise self._refusal(finished.stderr.splitlines()) or JobError(
                "pgbench_failed",
                f"the {name} run exited with {finished.exit_code}: {last_lines(finished.stderr)}",
            )
        self._remember_throughput(clients, finished.stdout + finished.stderr, source)

    def _remember_throughput(self, clients: int, output: str, source: ExpectedFrom) -> None:
        try:
            tps = parse_output(output).get("tps")
        except PgbenchParseError as error:
            logger.warning("no tps in the %s output, the log rate stays a guess: %s", source, error)
            return
        if tps:
            self.measured = Measured(clients, tps, source)

    def workload_args(self, clients: int, duration_s: int | None = None) -> list[str]:
        install = self.context.install
        return command.workload_args(
            install.bindir / "pgbench",
            install.major,
            self.context.spec,
            clients,
            self.context.threads(clients),
            self.context.script_paths,
            duration_s=duration_s,
            weighted_scripts=install.version_num >= FIRST_WITH_WEIGHTED_SCRIPTS,
        )

    def plain_argv(self, clients: int) -> list[str]:
        """The point's command as a user would type it (the self-check's reference)."""
        return command.plain_argv(self.workload_args(clients), self.context.conn)

    def run_argv(
        self, clients: int, log_args: list[str], duration_s: int | None = None
    ) -> list[str]:
        workload = self.workload_args(clients, duration_s)
        reporting = command.reporting_args(
            self.context.spec["workload"], self.context.install.major
        )
        return command.run_argv(workload, reporting, log_args, self.context.conn)

    def log_plan(self, clients: int) -> LogPlan:
        """This point's log: its mode, and for a sample the rate the expected tps calls for."""
        workload, sweep = self.context.spec["workload"], self.context.spec["sweep"]
        expected = expected_throughput(
            clients, self.measured, workload["rate_tps"], self.context.cpu_count()
        )
        transactions = point_transactions(
            expected.tps, sweep["duration_s"], sweep["transactions"], clients
        )
        with_rate = bool(workload["rate_tps"])
        return LogPlan.for_point(workload["latency_log"], expected, transactions, with_rate)

    def run_point(self, index: int, total: int, clients: int, repeat: int) -> PointResult:
        """One measured pgbench run with its samplers; returns the point (also kept and emitted)."""
        context = self.context
        message = f"point {index + 1} of {total}: {clients} clients, run {repeat}"
        context.reporter.status("running", message)
        plan = self.log_plan(clients)
        label = f"{context.cluster.job_id}-point-{index}"
        with point_log_dir(context.log_root, label, context.cluster.os_user) as log_dir:
            point_base: PointBase = {"point": index, "clients": clients, "repeat": repeat}
            point_log = PointLog(plan, log_dir, self.log_timeline_emitter(point_base))
            if context.spec["workload"]["processes"]:
                group = ProcessGroupPoint(context, clients, point_base)
                point, finished, agent_cpu_s = group.measure(plan, point_log)
            else:
                argv = self.run_argv(clients, plan.args(log_dir / LOG_FILE_PREFIX))
                finished, samples, agent_cpu_s = self._measure(argv, point_base, point_log)
                point = self._point_result(index, clients, repeat, finished, samples)
            percentiles, timeline = point_log.finish(finished.seconds)
            point["agent_cpu_s"] = round(agent_cpu_s, 4)
            point["latency_percentiles_ms"] = percentiles
            if timeline is not None:
                point["progress"] = timeline
        if percentiles is not None and percentiles.get("error"):
            context.reporter.emit("log", {"level": "warning", "message": percentiles["error"]})
        self._keep_point(point, finished)
        if point.get("tps"):
            self.measured = Measured(clients, point["tps"], "previous_point")
        return as_point_result(point)

    def cpu_profile_point(self, index: int, clients: int, perf: str) -> CpuProfileResult:
        """The point's pgbench without its transaction log, perf recording the server."""
        context = self.context
        message = f"CPU-profile run at {clients} clients (perf; not a measured point)"
        context.reporter.status("running", message)
        if context.spec["workload"]["processes"]:
            problem = "a point of several pgbench processes has no CPU-profile pass yet"
            return no_cpu_profile(problem, index, clients)
        postmaster = context.cluster.postmaster_pid
        if postmaster is None:
            raise JobError("server_died", "the PostgreSQL server stopped before the CPU profile")
        argv = self.run_argv(clients, log_args=[])
        with recording(perf, postmaster, context.cluster.job_dir) as record:
            finished = context.pgbench_command("pgbench_cpu_profile", argv, lambda line: None, True)
        context.reporter.check_cancel()
        if finished.exit_code != 0:
            record.problem = (
                f"pgbench exited with {finished.exit_code}: {last_lines(finished.stderr)}"
            )
        return cpu_profile_document(index, clients, parsed_summary(finished).get("tps"), record)

    def log_timeline_emitter(self, point_base: PointBase) -> Callable[[ProgressLine], None] | None:
        """Where a point's live seconds read from its log go; None when `-P` gives them."""
        if self.context.spec["workload"]["progress"]:
            return None

        def emit(line: ProgressLine) -> None:
            self.context.reporter.emit("progress", {**point_base, **line})

        return emit

    def _measure(
        self, argv: list[str], point_base: PointBase, point_log: PointLog
    ) -> tuple[Finished, PointSamples, float]:
        """Run pgbench with the samplers; returns (finished, samples, agent CPU seconds)."""

        def measure() -> Finished:
            point_log.start()
            try:
                return self.context.pgbench_command(
                    "pgbench", argv, self._progress_emitter(point_base), True
                )
            finally:
                point_log.stop()

        return self.context.sampled(point_base, measure)

    def _progress_emitter(self, point_base: PointBase) -> Callable[[str], None]:
        """pgbench's `-P` lines as progress events (workload.progress)."""

        def on_line(line: str) -> None:
            for sample in progress_lines(line):
                self.context.reporter.emit("progress", {**point_base, **sample})

        return on_line

    def _point_result(
        self, index: int, clients: int, repeat: int, finished: Finished, samples: PointSamples
    ) -> dict[str, Any]:
        threads = self.context.threads(clients)
        point: dict[str, Any] = {
            "index": index,
            "clients": clients,
            "threads": threads,
            "pgbench_cpus": min(threads, self.context.cpu_count()),
            "repeat": repeat,
            **finished.as_fields(),
            "host_samples": samples["host"],
            "server_samples": samples["server"],
            "parse_error": None,
        }
        point.update(parsed_summary(finished))
        point["notices"] = point.get("notices", [])[:MAX_NOTICES]
        point["messages"] = point.get("messages", [])[:MAX_NOTICES]
        if samples["counters"] is not None:
            point["counters"] = point_counters(samples["counters"], point)
        point["noise"] = point_noise(samples["cpu"], point)
        return point

    def _keep_point(self, point: dict[str, Any], finished: Finished) -> None:
        """Keep a complete point; a broken run fails the job, keeping the earlier points.

        A point the stop policy ended (`PgbenchStops.failure`) fails with its error.
        """
        context = self.context
        stopped = context.stops.failure(point)
        complete = (
            finished.exit_code == 0
            and not finished.stopped_early
            and point["parse_error"] is None
            and point.get("tps") is not None
            and not point.get("aborted")
        )
        if complete and stopped is None:
            context.reporter.keep_point(as_point_result(point))
            return
        context.reporter.keep_failed_point(as_point_result(point))
        if stopped is not None:
            raise stopped
        context.reporter.check_cancel()
        if not context.cluster.is_running():
            raise JobError(
                "server_died",
                f"the PostgreSQL server stopped during point {point['index'] + 1}; "
                f"server log: {last_lines(context.cluster.log_tail(5))}",
            )
        raise self._failure(point, finished)

    def _failure(self, point: dict[str, Any], finished: Finished) -> JobError:
        """Why pgbench failed: a refused script, else its last words."""
        refusal = self._refusal(point.get("errors") or [])
        if refusal is not None:
            return refusal
        return JobError(
            "pgbench_failed",
            f"pgbench exited with {finished.exit_code} at point {point['index'] + 1}: "
            f"{incomplete_reason(point, finished)}",
        )

    def _refusal(self, errors: list[str]) -> JobError | None:
        """JobError("refused_sql") when one of pgbench's `errors` lines is a client aborted
        on a privilege the workload's role lacks (agents/postgres/workload.py), else None."""
        workload = self.context.spec["workload"]
        # A point of several processes names its scripts by number only (their errors mix).
        scripts = [] if workload["processes"] else workload["scripts"]
        return script_refusal(errors, scripts, self.context.cluster.require_workload())


def incomplete_reason(point: dict[str, Any], finished: Finished) -> str:
    """Why a point pgbench ended is not complete, in pgbench's words where it gave some:
    its output unreadable, stopped before its end, a client aborted, or no tps in an
    output it exited 0 with (its last lines then, stdout's included)."""
    if point["parse_error"]:
        return str(point["parse_error"])
    if finished.exit_code == 0 and finished.stopped_early:
        return "stopped before its end"
    if finished.exit_code == 0 and point.get("aborted"):
        return f"a client aborted: {last_lines(finished.stderr)}"
    if finished.exit_code == 0 and point.get("tps") is None:
        return (
            f"its output gives no tps; stdout: {last_lines(finished.stdout)}; "
            f"stderr: {last_lines(finished.stderr)}"
        )
    return last_lines(finished.stderr)
