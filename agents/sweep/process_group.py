"""A point of several pgbench processes (`workload.processes`): run, sum, keep each one.

Every process has its own scripts, clients and threads and its own
transaction log prefix in the point's log directory, so the percentiles and
the timeline read from the log (agents/pgbench/point_log.py) cover all of
them. The point carries the combined summary (agents/pgbench/combine.py)
and, under `processes`, what each process printed with its exact argv. With
`-P` (workload.progress) the live timeline is the per-second sum of the
processes' lines (agents/pgbench/group.py).
"""

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from agents.contract.reports.results import ProgressLine
from agents.contract.spec.document import ProcessSpec
from agents.contract.spec.pgbench_versions import FIRST_WITH_WEIGHTED_SCRIPTS
from agents.observe.noise import point_noise
from agents.observe.point_counters import point_counters
from agents.pgbench import command
from agents.pgbench.combine import combine_processes
from agents.pgbench.group import (
    MAX_NOTICES,
    GroupMember,
    LiveSum,
    parsed_summary,
    progress_lines,
    run_together,
)
from agents.pgbench.latency_log import LOG_FILE_PREFIX, LogPlan
from agents.pgbench.point_log import PointLog
from agents.pgbench.process import Finished
from agents.sweep.context import PointBase, PointContext, PointSamples

PROCESS_KEYS = (
    "tps",
    "latency_avg_ms",
    "latency_stddev_ms",
    "transactions",
    "failed",
    "scripts",
    "statements",
    "parse_error",
)


class ProcessGroupPoint:
    """One point's processes at the sweep's client count `clients`."""

    def __init__(self, context: PointContext, clients: int, point_base: PointBase) -> None:
        self.context = context
        self.clients = clients
        self.point_base = point_base
        self.processes: list[ProcessSpec] = context.spec["workload"]["processes"]
        self.live = LiveSum(len(self.processes), self._emit_progress)

    def measure(self, plan: LogPlan, point_log: PointLog) -> tuple[dict[str, Any], Finished, float]:
        """Run the processes together with the samplers: (point, combined Finished, agent CPU s)."""
        members = [
            GroupMember(self.argv(number, plan, point_log.log_dir), self._on_line(number))
            for number in range(len(self.processes))
        ]

        def measure() -> list[Finished]:
            point_log.start()
            try:
                return run_together(members, self._run_one)
            finally:
                point_log.stop()

        finished, samples, agent_cpu_s = self.context.sampled(self.point_base, measure)
        return self.point(finished, samples), combined_finished(finished), agent_cpu_s

    def clients_of(self, number: int) -> int:
        return self.processes[number]["clients"] or self.clients

    def threads_of(self, number: int) -> int:
        clients = self.clients_of(number)
        threads = self.processes[number]["threads"] or self.context.spec["sweep"]["threads"]
        if threads is not None:
            return min(threads, clients)
        return command.default_threads(clients, self.context.cpu_count())

    def argv(self, number: int, plan: LogPlan, log_dir: Path) -> list[str]:
        context, install = self.context, self.context.install
        workload = command.workload_args(
            install.bindir / "pgbench",
            install.major,
            context.spec,
            self.clients_of(number),
            self.threads_of(number),
            context.process_script_paths[number],
            scripts=self.processes[number]["scripts"],
            weighted_scripts=install.version_num >= FIRST_WITH_WEIGHTED_SCRIPTS,
        )
        reporting = command.reporting_args(context.spec["workload"], install.major)
        log_args = plan.args(log_dir / f"{LOG_FILE_PREFIX}.p{number + 1}")
        return command.run_argv(workload, reporting, log_args, context.conn)

    def _run_one(self, argv: list[str], on_line: Callable[[str], None]) -> Finished:
        return self.context.pgbench_command("pgbench", argv, on_line, timed=True)

    def _on_line(self, number: int) -> Callable[[str], None]:
        def on_line(line: str) -> None:
            for progress in progress_lines(line):
                self.live.add(number, progress)

        return on_line

    def _emit_progress(self, line: ProgressLine) -> None:
        self.context.reporter.emit("progress", {**self.point_base, **line})

    def point(self, finished: list[Finished], samples: PointSamples) -> dict[str, Any]:
        """The point: combined summary, samples, and each process's own record."""
        records = [self.record(number, done) for number, done in enumerate(finished)]
        combined = combine_processes(records)
        first_error = next((r["parse_error"] for r in records if r["parse_error"]), None)
        point: dict[str, Any] = {
            "index": self.point_base["point"],
            "clients": self.clients,
            "threads": sum(self.threads_of(number) for number in range(len(finished))),
            "pgbench_cpus": min(
                sum(self.threads_of(number) for number in range(len(finished))),
                self.context.cpu_count(),
            ),
            "repeat": self.point_base["repeat"],
            "host_samples": samples["host"],
            "server_samples": samples["server"],
            **combined_finished(finished).as_fields(),
            **combined,
            "statements": [],
            "parse_error": first_error,
            "processes": [
                {key: record.get(key) for key in ("number", "clients", "threads", *PROCESS_KEYS)}
                | finished[record["number"] - 1].as_fields()
                for record in records
            ],
        }
        point["notices"] = point["notices"][:MAX_NOTICES]
        point["messages"] = point["messages"][:MAX_NOTICES]
        if samples["counters"] is not None:
            point["counters"] = point_counters(samples["counters"], point)
        point["noise"] = point_noise(samples["cpu"], point)
        return point

    def record(self, number: int, finished: Finished) -> dict[str, Any]:
        summary = parsed_summary(finished)
        return {
            **summary,
            "number": number + 1,
            "clients": self.clients_of(number),
            "threads": self.threads_of(number),
        }


def combined_finished(finished: list[Finished]) -> Finished:
    """The group as one Finished: the first process's argv, the first failing exit code,
    every process's output in order under a `-- process N` header."""
    failing = [done.exit_code for done in finished if done.exit_code != 0]

    def joined(part: str) -> str:
        return "".join(
            f"-- process {number}\n{getattr(done, part)}"
            for number, done in enumerate(finished, start=1)
        )

    return Finished(
        argv=finished[0].argv,
        exit_code=failing[0] if failing else 0,
        stdout=joined("stdout"),
        stderr=joined("stderr"),
        seconds=max(done.seconds for done in finished),
        stopped_early=any(done.stopped_early for done in finished),
        cpu_s=_summed_cpu(finished),
        switches=_summed_switches(finished),
        started_epoch=min(_epochs(done.started_epoch for done in finished), default=None),
        ended_epoch=max(_epochs(done.ended_epoch for done in finished), default=None),
    )


def _epochs(times: Iterable[float | None]) -> list[float]:
    """The processes' launch (or reap) times; none when any is unknown."""
    known = list(times)
    return [] if None in known else [t for t in known if t is not None]


def _summed_switches(finished: list[Finished]) -> tuple[int, int] | None:
    """The processes' (voluntary, involuntary) context switches together; None when any is
    unknown."""
    counts = [done.switches for done in finished]
    if any(count is None for count in counts):
        return None
    return sum(c[0] for c in counts if c), sum(c[1] for c in counts if c)


def _summed_cpu(finished: list[Finished]) -> float | None:
    """The processes' CPU seconds together; None when any is unknown."""
    seconds = [done.cpu_s for done in finished]
    return None if None in seconds else round(sum(s or 0.0 for s in seconds), 4)
