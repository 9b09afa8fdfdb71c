"""The measured part of a job: dataset, setup SQL, then the client sweep.

Each point is one pgbench run. Its result keeps what pgbench printed (parsed
and verbatim), the exact argv, host and server samples, and latency
percentiles and the per-second timeline from pgbench's transaction log,
sampled by default (agents/pgbench/latency_log.py says how and where,
agents/pgbench/log_timeline.py why the timeline is not `-P 1`'s by default).
"""

import logging
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from agents.contract.errors import JobError
from agents.contract.latency import FULL_LOG_WARNING, ExpectedFrom
from agents.contract.pgbench_parse import PgbenchParseError, parse_init_progress, parse_output
from agents.contract.pgbench_versions import FIRST_WITH_WEIGHTED_SCRIPTS
from agents.contract.results import PointResult, ProgressLine
from agents.contract.spec import JobSpec, SweepSpec, sweep_points
from agents.observe.host import HostSampler, process_cpu_seconds
from agents.observe.server import ServerSampler, unavailable_measurements
from agents.pgbench import command
from agents.pgbench.group import MAX_NOTICES, parsed_summary, progress_lines
from agents.pgbench.latency_log import (
    LOG_FILE_PREFIX,
    LogPlan,
    Measured,
    expected_throughput,
    log_root,
    point_log_dir,
)
from agents.pgbench.point_log import PointLog
from agents.pgbench.process import Finished, run_pgbench
from agents.postgres.cluster import Cluster
from agents.postgres.disk_full import sign_line
from agents.postgres.osuser import chown_tree
from agents.postgres.workload import run_setup_sql, script_refusal
from agents.process_group import ProcessGroupPoint
from agents.remote_points import RemotePoints
from agents.sandbox import Started

if TYPE_CHECKING:
    from agents.postgres.installs import Install

logger = logging.getLogger(__name__)
T = TypeVar("T")

NO_TIMELINE = (
    "no per-second timeline: it is read from the transaction log, and this workload "
    'writes none (workload.latency_log "none"); set workload.progress for pgbench\'s -P 1'
)
# Seeds people can read and type back in (the lab's are below this too).
CLIENT_ORDER_SEEDS = 2**31


class SweepReporter(Protocol):
    """What a sweep tells the job it runs in; the job owns the result document."""

    def status(self, state: str, message: str) -> None: ...

    def step(self, name: str, message: str, percent: float | None = None) -> None: ...

    def emit(self, event_type: str, data: Mapping[str, Any]) -> None: ...

    def should_cancel(self) -> bool: ...

    def check_cancel(self) -> None:
        """Raise Cancelled once the run was cancelled."""

    def record_command(
        self, name: str, argv: list[str], seconds: float, exit_code: int | None
    ) -> None: ...

    def record_dataset(self, key: str, value: object) -> None:
        """One fact about the dataset's initialisation (step seconds, setup SQL time)."""

    def keep_point(self, point: PointResult) -> None:
        """A complete point: kept in the result and sent as a `point` event."""

    def keep_failed_point(self, point: PointResult) -> None:
        """The point a failed job was measuring, kept for the record."""


@dataclass(frozen=True)
class SweepPlace:
    """Where a sweep runs: its cluster and binaries, its storage targets, the agent's state."""

    cluster: Cluster
    install: "Install"
    storage: dict[str, Path]
    state_dir: Path


class Sweep:
    """Runs the dataset steps and every point of one job inside its cluster.

    With a client host the server half's points are measured there (`remote`,
    agents/remote_points.py), and the client half's sweep samples no server.
    """

    samples_server = True

    def __init__(self, reporter: SweepReporter, place: SweepPlace, spec: JobSpec) -> None:
        self.reporter = reporter
        cluster = place.cluster
        self.storage = place.storage
        self.install = place.install
        self.spec = spec
        self.cluster = cluster
        self.workdir = self.cluster.job_dir / "pgbench"
        workload = self.cluster.require_workload()
        host, port = cluster.pgbench_host(), cluster.started_port()
        self.conn = command.Connection(host, port, workload.user, workload.dbname)
        self.script_paths: dict[int, Path] = {}
        # The script files of each of the point's processes (workload.processes).
        self.process_script_paths: list[dict[int, Path]] = []
        self.log_root = log_root(place.state_dir, place.storage, spec["workload"]["latency_log"])
        # The latest throughput measured in this cluster: it sets the next log's sampling rate.
        self.measured: Measured | None = None
        self.remote: RemotePoints | None = None

    def run(self) -> None:
        self.prepare_dataset()
        points = sweep_points(self._seeded(self.spec["sweep"]))
        self.reporter.status("running", f"running {len(points)} points")
        workload = self.spec["workload"]
        if workload["latency_log"] == "full":
            self.reporter.emit("log", {"level": "warning", "message": FULL_LOG_WARNING})
        if workload["latency_log"] == "none" and not workload["progress"]:
            self.reporter.emit("log", {"level": "info", "message": NO_TIMELINE})
        for message in unavailable_measurements(self.install.version_num):
            self.reporter.emit("log", {"level": "info", "message": message})
        if self.spec["sweep"]["warmup_s"] and self.remote is not None:
            self.remote.warm_up(points[0][0])
        elif self.spec["sweep"]["warmup_s"]:
            self.warm_up(points[0][0])
        for index, (clients, repeat) in enumerate(points):
            self.reporter.check_cancel()
            self.between_points()
            self.run_point(index, len(points), clients, repeat)

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
        self.prepare_workdir()
        self._initialise_dataset()
        self._run_setup_sql()

    def prepare_workdir(self) -> None:
        """The scripts as files in the job's pgbench directory, owned by pgbench's OS user."""
        self.workdir.mkdir(mode=0o700, exist_ok=True)
        for index, script in enumerate(self.spec["workload"]["scripts"]):
            if "text" in script:
                path = self.workdir / f"script-{index}-{script['name']}.sql"
                path.write_text(script["text"])
                self.script_paths[index] = path
        for number, process in enumerate(self.spec["workload"]["processes"], start=1):
            paths = {}
            for index, script in enumerate(process["scripts"]):
                if "text" in script:
                    paths[index] = self.workdir / f"process-{number}-{index}-{script['name']}.sql"
                    paths[index].write_text(script["text"])
            self.process_script_paths.append(paths)
        chown_tree(self.workdir, self.cluster.os_user)

    def start_pgbench(self, argv: list[str], **popen_kwargs: Any) -> Started:
        """Popen one pgbench of this sweep: the job's OS user, its sandbox, the workload's role.

        The sandbox shows pgbench the binaries, the cluster's socket, the scripts
        and the directory its transaction log goes to, and nothing else.
        """
        view = self.cluster.client_view().plus(
            read_only=[self.workdir], writable=command.log_directories(argv)
        )
        env = self.cluster.workload_env()
        return self.cluster.os_user.start(argv, view, self.workdir, env=env, **popen_kwargs)

    def pgbench_command(
        self, name: str, argv: list[str], on_line: Callable[[str], None], timed: bool
    ) -> Finished:
        finished = run_pgbench(
            argv,
            launch=self.start_pgbench,
            on_stderr_line=on_line,
            should_stop=self.pgbench_should_stop(argv, timed),
            timed=timed,
        )
        self.reporter.record_command(name, argv, finished.seconds, finished.exit_code)
        return finished

    def pgbench_should_stop(self, argv: list[str], timed: bool) -> Callable[[], bool]:
        """When to stop a pgbench before it ends by itself: the run's cancel."""
        return self.reporter.should_cancel

    def _initialise_dataset(self) -> None:
        dataset = self.spec["dataset"]
        self.reporter.status("loading", f"pgbench -i at scale {dataset['scale']}")
        argv = command.init_argv(self.install.bindir / "pgbench", dataset, self.conn)

        def on_line(line: str) -> None:
            progress = parse_init_progress(line)
            if progress is None:
                return
            if progress.get("step_seconds"):
                self.reporter.record_dataset("steps", progress["step_seconds"])
            self.reporter.step("pgbench_init", progress["message"], progress.get("percent"))

        finished = self.pgbench_command("pgbench_init", argv, on_line, timed=False)
        self.reporter.check_cancel()
        self.reporter.record_dataset("seconds", finished.seconds)
        if finished.exit_code != 0:
            raise JobError(
                "pgbench_init_failed",
                f"pgbench -i exited with {finished.exit_code}: {_last_lines(finished.stderr)}",
            )

    def _run_setup_sql(self) -> None:
        sql = self.spec["dataset"]["setup_sql"].strip()
        if not sql:
            return
        self.reporter.step("setup_sql", "running setup SQL")
        seconds = run_setup_sql(self.cluster, sql)
        self.reporter.record_dataset("setup_sql_seconds", seconds)
        self.reporter.step("setup_sql", f"setup SQL done in {seconds:.2f} s", 100.0)

    def between_points(self) -> None:
        """The spec's CHECKPOINT and/or VACUUM, before every measured point (the first too)."""
        action = self.spec["sweep"]["between_points"]
        statements = {
            "none": [],
            "checkpoint": ["CHECKPOINT"],
            "vacuum": ["VACUUM"],
            "vacuum_checkpoint": ["VACUUM", "CHECKPOINT"],
        }[action]
        if not statements:
            return
        self.reporter.step("between_points", f"running {' and '.join(statements)}")
        with self.cluster.connect_maintenance() as conn:
            for statement in statements:
                conn.execute(statement)

    def _threads(self, clients: int) -> int:
        threads = self.spec["sweep"]["threads"]
        if threads is not None:
            return min(threads, clients)
        return command.default_threads(clients, self.cpu_count())

    def cpu_count(self) -> int:
        """The CPUs this agent may use (the default threads are at most one per CPU)."""
        return len(os.sched_getaffinity(0))

    def warm_up(self, clients: int) -> None:
        seconds = self.spec["sweep"]["warmup_s"]
        self.reporter.step("warmup", f"warming up for {seconds} s at {clients} clients")
        argv = self.run_argv(clients, log_args=[], duration_s=seconds)
        finished = self.pgbench_command("warmup", argv, lambda line: None, timed=True)
        self.reporter.check_cancel()
        if finished.exit_code != 0:
            raise JobError(
                "pgbench_failed",
                f"the warm-up run exited with {finished.exit_code}: {_last_lines(finished.stderr)}",
            )
        self._remember_throughput(clients, finished.stdout + finished.stderr, "warmup")

    def _remember_throughput(self, clients: int, output: str, source: ExpectedFrom) -> None:
        try:
            tps = parse_output(output).get("tps")
        except PgbenchParseError as error:
            logger.warning("no tps in the %s output, the log rate stays a guess: %s", source, error)
            return
        if tps:
            self.measured = Measured(clients, tps, source)

    def workload_args(self, clients: int, duration_s: int | None = None) -> list[str]:
        return command.workload_args(
            self.install.bindir / "pgbench",
            self.install.major,
            self.spec,
            clients,
            self._threads(clients),
            self.script_paths,
            duration_s=duration_s,
            weighted_scripts=self.install.version_num >= FIRST_WITH_WEIGHTED_SCRIPTS,
        )

    def plain_argv(self, clients: int) -> list[str]:
        """The point's command as a user would type it (the self-check's reference)."""
        return command.plain_argv(self.workload_args(clients), self.conn)

    def run_argv(
        self, clients: int, log_args: list[str], duration_s: int | None = None
    ) -> list[str]:
        workload = self.workload_args(clients, duration_s)
        reporting = command.reporting_args(self.spec["workload"], self.install.major)
        return command.run_argv(workload, reporting, log_args, self.conn)

    def log_plan(self, clients: int) -> LogPlan:
        """This point's log: its mode, and for a sample the rate the expected tps calls for."""
        expected = expected_throughput(
            clients,
            self.measured,
            self.spec["workload"]["rate_tps"],
            len(os.sched_getaffinity(0)),
        )
        return LogPlan.for_point(self.spec["workload"]["latency_log"], expected)

    def run_point(self, index: int, total: int, clients: int, repeat: int) -> PointResult:
        """One measured pgbench run with its samplers; returns the point (also kept and emitted)."""
        if self.remote is not None:
            return self.remote.run_point(self, index, total, clients, repeat)
        message = f"point {index + 1} of {total}: {clients} clients, run {repeat}"
        self.reporter.status("running", message)
        plan = self.log_plan(clients)
        label = f"{self.cluster.job_id}-point-{index}"
        with point_log_dir(self.log_root, label, self.cluster.os_user) as log_dir:
            point_base = {"point": index, "clients": clients, "repeat": repeat}
            point_log = PointLog(plan, log_dir, self.log_timeline_emitter(point_base))
            if self.spec["workload"]["processes"]:
                group = ProcessGroupPoint(self, clients, point_base)
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
            self.reporter.emit("log", {"level": "warning", "message": percentiles["error"]})
        self._keep_point(point, finished)
        if point.get("tps"):
            self.measured = Measured(clients, point["tps"], "previous_point")
        return as_point_result(point)

    def log_timeline_emitter(self, point_base: dict) -> Callable[[ProgressLine], None] | None:
        """Where a point's live seconds read from its log go; None when `-P` gives them."""
        if self.spec["workload"]["progress"]:
            return None

        def emit(line: ProgressLine) -> None:
            self.reporter.emit("progress", {**point_base, **line})

        return emit

    def _measure(
        self, argv: list[str], point_base: dict, point_log: PointLog
    ) -> tuple[Finished, dict, float]:
        """Run pgbench with the samplers; returns (finished, samples, agent CPU seconds)."""

        def measure() -> Finished:
            point_log.start()
            try:
                return self.pgbench_command(
                    "pgbench", argv, self._progress_emitter(point_base), True
                )
            finally:
                point_log.stop()

        return self.sampled(point_base, measure)

    def sampled(self, point_base: dict, measure: Callable[[], T]) -> tuple[T, dict, float]:
        """Run `measure()` with the samplers; returns (its value, samples, agent CPU seconds)."""
        samplers = PointSamplers(self, point_base)
        samplers.start()
        cpu_before = process_cpu_seconds()
        try:
            measured = measure()
        finally:
            agent_cpu_s = process_cpu_seconds() - cpu_before
            samples = samplers.stop()
        return measured, samples, agent_cpu_s

    def _progress_emitter(self, point_base: dict) -> Callable[[str], None]:
        """pgbench's `-P` lines as progress events (workload.progress)."""

        def on_line(line: str) -> None:
            for sample in progress_lines(line):
                self.reporter.emit("progress", {**point_base, **sample})

        return on_line

    def _point_result(
        self, index: int, clients: int, repeat: int, finished: Finished, samples: dict
    ) -> dict[str, Any]:
        point: dict[str, Any] = {
            "index": index,
            "clients": clients,
            "threads": self._threads(clients),
            "pgbench_cpus": min(self._threads(clients), self.cpu_count()),
            "repeat": repeat,
            **finished.as_fields(),
            "host_samples": samples["host"],
            "server_samples": samples["server"],
            "parse_error": None,
        }
        point.update(parsed_summary(finished))
        point["notices"] = point.get("notices", [])[:MAX_NOTICES]
        point["messages"] = point.get("messages", [])[:MAX_NOTICES]
        return point

    def _keep_point(self, point: dict[str, Any], finished: Finished) -> None:
        """Keep a complete point; a broken run fails the job, keeping the earlier points."""
        complete = (
            finished.exit_code == 0
            and not finished.stopped_early
            and point["parse_error"] is None
            and point.get("tps") is not None
            and not point.get("aborted")
        )
        if complete:
            self.reporter.keep_point(as_point_result(point))
            return
        self.reporter.keep_failed_point(as_point_result(point))
        self.reporter.check_cancel()
        if not self.cluster.is_running():
            raise JobError(
                "server_died",
                f"the PostgreSQL server stopped during point {point['index'] + 1}; "
                f"server log: {_last_lines(self.cluster.log_tail(5))}",
            )
        workload = self.spec["workload"]
        # A point of several processes names its scripts by number only (their errors mix).
        scripts = [] if workload["processes"] else workload["scripts"]
        refusal = script_refusal(point, scripts, self.cluster.require_workload())
        if refusal is not None:
            raise refusal
        reason = point["parse_error"] or _last_lines(finished.stderr)
        raise JobError(
            "pgbench_failed",
            f"pgbench exited with {finished.exit_code} at point {point['index'] + 1}: {reason}",
        )


class PointSamplers:
    """Host and server samplers around one point; each sample is also emitted live."""

    def __init__(self, sweep: Sweep, point_base: dict):
        emit = sweep.reporter.emit
        self.host = HostSampler(
            sweep.storage, on_sample=lambda s: emit("sample", {**point_base, "host": s})
        )
        self.server = None
        if sweep.samples_server:
            self.server = ServerSampler(
                sweep.cluster.conninfo(),
                sweep.install.version_num,
                on_sample=lambda s: emit("sample", {**point_base, "server": s}),
            )

    def start(self) -> None:
        self.host.start()
        if self.server is not None:
            self.server.start()

    def stop(self) -> dict:
        server = self.server.stop() if self.server is not None else []
        return {"host": self.host.stop(), "server": server}


def _last_lines(text: str, count: int = 3) -> str:
    """The last lines of an output, after the last one saying a disk is full if it is earlier
    (the server's error comes before pgbench's own words, a HINT and a CONTEXT)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    full = sign_line("\n".join(lines[:-count]))
    return " | ".join(([full] if full else []) + lines[-count:]) or "(no output)"


# The summary keys a point result always has; an unparsed point has them as None.
POINT_SUMMARY_KEYS = (
    "tps",
    "latency_avg_ms",
    "latency_stddev_ms",
    "latency_percentiles_ms",
    "transactions",
    "failed",
    "duration_s",
)


def as_point_result(point: dict[str, Any]) -> PointResult:
    """The point as the contract's PointResult: every summary key present, None if unread.

    The point also carries the parser's other keys (scripts, lag, notices, ...),
    which the contract leaves open.
    """
    for key in POINT_SUMMARY_KEYS:
        point.setdefault(key, None)
    for key in ("statements", "progress"):
        point.setdefault(key, [])
    return cast(PointResult, point)
