"""The measured part of a job: dataset, setup SQL, then the client sweep.

Each point is one pgbench run. Its result keeps what pgbench printed (parsed
and verbatim), the exact argv, the per-second progress, host and server
samples, and percentiles from pgbench's own per-transaction log.
"""

import logging
import os
import shutil
import time
from pathlib import Path

import psycopg

from agents.errors import JobError
from agents.observe.host import HostSampler, process_cpu_seconds
from agents.observe.server import ServerSampler
from agents.pgbench import command
from agents.pgbench.parse import PgbenchParseError, parse_init_progress, parse_output
from agents.pgbench.process import run_pgbench
from agents.pgbench.txlog import latency_percentiles
from agents.postgres.osuser import chown_tree
from agents.spec import sweep_points

logger = logging.getLogger(__name__)

PROGRESS_PREFIX = "progress:"
# --verbose-errors can print thousands of lines; the full text stays in `stderr`.
MAX_NOTICES = 50


class Sweep:
    """Runs the dataset steps and every point of one job inside its cluster."""

    def __init__(self, job, install, spec: dict):
        self.job = job
        self.install = install
        self.spec = spec
        self.cluster = job.cluster
        self.workdir = self.cluster.job_dir / "pgbench"
        self.conn = command.Connection(host=str(self.cluster.socket_dir), port=self.cluster.port)
        self.script_paths: dict[int, Path] = {}

    def run(self) -> None:
        self.prepare_dataset()
        points = sweep_points(self.spec["sweep"])
        self.job.status("running", f"running {len(points)} points")
        if self.spec["sweep"]["warmup_s"]:
            self.warm_up(points[0][0])
        for index, (clients, repeat) in enumerate(points):
            self.job.check_cancel()
            if index > 0:
                self._between_points()
            self.run_point(index, len(points), clients, repeat)

    def prepare_dataset(self) -> None:
        """Script files, `pgbench -i`, then the setup SQL."""
        self._prepare_workdir()
        self._initialise_dataset()
        self._run_setup_sql()

    def _prepare_workdir(self) -> None:
        self.workdir.mkdir(mode=0o700, exist_ok=True)
        for index, script in enumerate(self.spec["workload"]["scripts"]):
            if "text" in script:
                path = self.workdir / f"script-{index}-{script['name']}.sql"
                path.write_text(script["text"])
                self.script_paths[index] = path
        chown_tree(self.workdir, self.cluster.os_user)

    def _pgbench(self, name: str, argv: list[str], on_line, timed: bool):
        env = self.cluster.client_env()
        finished = run_pgbench(
            argv,
            cwd=self.workdir,
            process_kwargs=self.cluster.os_user.subprocess_kwargs(**env),
            on_stderr_line=on_line,
            should_stop=self.job.should_cancel,
            timed=timed,
        )
        self.job.record_command(name, argv, finished.seconds, finished.exit_code)
        return finished

    def _initialise_dataset(self) -> None:
        dataset = self.spec["dataset"]
        self.job.status("loading", f"pgbench -i at scale {dataset['scale']}")
        argv = command.init_argv(self.install.bindir / "pgbench", dataset, self.conn)

        def on_line(line: str) -> None:
            progress = parse_init_progress(line)
            if progress is None:
                return
            if progress.get("step_seconds"):
                self.job.result["dataset"]["steps"] = progress["step_seconds"]
            self.job.step("pgbench_init", progress["message"], progress.get("percent"))

        finished = self._pgbench("pgbench_init", argv, on_line, timed=False)
        self.job.check_cancel()
        self.job.result["dataset"]["seconds"] = finished.seconds
        if finished.exit_code != 0:
            raise JobError(
                "pgbench_init_failed",
                f"pgbench -i exited with {finished.exit_code}: {_last_lines(finished.stderr)}",
            )

    def _run_setup_sql(self) -> None:
        sql = self.spec["dataset"]["setup_sql"].strip()
        if not sql:
            return
        self.job.step("setup_sql", "running setup SQL")
        started = time.monotonic()
        try:
            with self.cluster.connect() as conn:
                conn.execute(sql)
        except psycopg.Error as error:
            raise JobError(
                "setup_sql_failed", f"setup SQL failed: {error}".strip(), field="dataset.setup_sql"
            ) from error
        seconds = round(time.monotonic() - started, 3)
        self.job.result["dataset"]["setup_sql_seconds"] = seconds
        self.job.step("setup_sql", f"setup SQL done in {seconds:.2f} s", 100.0)

    def _between_points(self) -> None:
        action = self.spec["sweep"]["between_points"]
        statements = {
            "none": [],
            "checkpoint": ["CHECKPOINT"],
            "vacuum": ["VACUUM"],
            "vacuum_checkpoint": ["VACUUM", "CHECKPOINT"],
        }[action]
        if not statements:
            return
        self.job.step("between_points", f"running {' and '.join(statements)}")
        with self.cluster.connect() as conn:
            for statement in statements:
                conn.execute(statement)

    def _threads(self, clients: int) -> int:
        threads = self.spec["sweep"]["threads"]
        if threads is not None:
            return min(threads, clients)
        return command.default_threads(clients, len(os.sched_getaffinity(0)))

    def warm_up(self, clients: int) -> None:
        seconds = self.spec["sweep"]["warmup_s"]
        self.job.step("warmup", f"warming up for {seconds} s at {clients} clients")
        argv = self.run_argv(clients, log_prefix=None, duration_s=seconds)
        finished = self._pgbench("warmup", argv, lambda line: None, timed=True)
        self.job.check_cancel()
        if finished.exit_code != 0:
            raise JobError(
                "pgbench_failed",
                f"the warm-up run exited with {finished.exit_code}: {_last_lines(finished.stderr)}",
            )

    def run_argv(self, clients: int, log_prefix: Path | None, duration_s: int | None = None):
        return command.run_argv(
            self.install.bindir / "pgbench",
            self.install.major,
            self.spec,
            clients,
            self._threads(clients),
            self.conn,
            self.script_paths,
            log_prefix,
            duration_s=duration_s,
        )

    def run_point(self, index: int, total: int, clients: int, repeat: int) -> dict:
        """One measured pgbench run with its samplers; returns the point (also kept and emitted)."""
        self.job.status("running", f"point {index + 1} of {total}: {clients} clients, run {repeat}")
        log_dir = self.workdir / f"point-{index}"
        log_dir.mkdir(mode=0o700)
        chown_tree(log_dir, self.cluster.os_user)
        argv = self.run_argv(clients, log_prefix=log_dir / "pgbench_log")
        point_base = {"point": index, "clients": clients, "repeat": repeat}
        samplers = PointSamplers(self, point_base)
        samplers.start()
        cpu_before = process_cpu_seconds()
        try:
            finished = self._pgbench(
                "pgbench", argv, self._progress_emitter(point_base), timed=True
            )
        finally:
            agent_cpu_s = process_cpu_seconds() - cpu_before
            samples = samplers.stop()
        point = self._point_result(index, clients, repeat, finished, log_dir, samples)
        point["agent_cpu_s"] = round(agent_cpu_s, 4)
        shutil.rmtree(log_dir)
        self._keep_point(point, finished)
        return point

    def _progress_emitter(self, point_base: dict):
        def on_line(line: str) -> None:
            if not line.startswith(PROGRESS_PREFIX):
                return
            try:
                parsed = parse_output(line)["progress"]
            except PgbenchParseError:
                logger.warning("unreadable progress line: %r", line)
                return
            for sample in parsed:
                self.job.emit("progress", {**point_base, **sample})

        return on_line

    def _point_result(self, index, clients, repeat, finished, log_dir: Path, samples) -> dict:
        point = {
            "index": index,
            "clients": clients,
            "threads": self._threads(clients),
            "repeat": repeat,
            "argv": finished.argv,
            "exit_code": finished.exit_code,
            "seconds": finished.seconds,
            "stopped_early": finished.stopped_early,
            "stdout": finished.stdout,
            "stderr": finished.stderr,
            "host_samples": samples["host"],
            "server_samples": samples["server"],
            "parse_error": None,
        }
        try:
            point.update(parse_output(finished.stdout + finished.stderr))
        except PgbenchParseError as error:
            point["parse_error"] = str(error)
        point["notices"] = point.get("notices", [])[:MAX_NOTICES]
        logs = sorted(log_dir.glob("pgbench_log.*"))
        point["latency_percentiles_ms"] = latency_percentiles(logs) if logs else None
        return point

    def _keep_point(self, point: dict, finished) -> None:
        """Keep a complete point; a broken run fails the job, keeping the earlier points."""
        complete = (
            finished.exit_code == 0
            and not finished.stopped_early
            and point["parse_error"] is None
            and point.get("tps") is not None
            and not point.get("aborted")
        )
        if complete:
            self.job.result["points"].append(point)
            self.job.emit("point", point)
            return
        self.job.result["failed_point"] = point
        self.job.check_cancel()
        if not self.cluster.is_running():
            raise JobError(
                "server_died",
                f"the PostgreSQL server stopped during point {point['index'] + 1}; "
                f"server log: {_last_lines(self.cluster.log_tail(5))}",
            )
        reason = point["parse_error"] or _last_lines(finished.stderr)
        raise JobError(
            "pgbench_failed",
            f"pgbench exited with {finished.exit_code} at point {point['index'] + 1}: {reason}",
        )


class PointSamplers:
    """Host and server samplers around one point; each sample is also emitted live."""

    def __init__(self, sweep: Sweep, point_base: dict):
        storage = sweep.job.result["storage"]
        devices = {role: Path(entry["path"]) for role, entry in storage.items()}
        emit = sweep.job.emit
        self.host = HostSampler(
            devices, on_sample=lambda s: emit("sample", {**point_base, "host": s})
        )
        self.server = ServerSampler(
            sweep.cluster.conninfo(),
            sweep.install.major,
            on_sample=lambda s: emit("sample", {**point_base, "server": s}),
        )

    def start(self) -> None:
        self.host.start()
        self.server.start()

    def stop(self) -> dict:
        return {"host": self.host.stop(), "server": self.server.stop()}


def _last_lines(text: str, count: int = 3) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:]) or "(no output)"
