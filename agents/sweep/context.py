"""What a point needs, handed to the point strategies instead of the Sweep.

A strategy (`PointRunner`: agents/sweep/local.py on this host, with
agents/sweep/process_group.py for `workload.processes`, or
agents/pair/remote.py on a client host) gets a `PointContext`: the reporter,
the cluster pgbench runs against, its binaries, the spec, the pgbench working
directory and log root, and what stops a pgbench early (`PgbenchStops`).
"""

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar, cast

from agents.contract.errors import JobError
from agents.contract.reports.cpu_profiles import CpuProfileResult
from agents.contract.reports.results import PointResult, Sample
from agents.contract.spec.document import JobSpec
from agents.observe.host import HostSampler, process_cpu_seconds
from agents.observe.noise import CpuWindow, read_cpu
from agents.observe.periodic import PeriodicSampler, SamplersTogether
from agents.observe.point_counters import CounterReader, CounterWindow, TrackedStatements
from agents.observe.server import ServerSampler
from agents.observe.storage import sampling_device
from agents.pgbench import command
from agents.pgbench.latency_log import log_root
from agents.pgbench.process import Finished, run_pgbench
from agents.postgres.cluster.lifecycle import Cluster
from agents.postgres.disk_full import sign_line
from agents.postgres.osuser import chown_tree
from agents.sandbox import Started

if TYPE_CHECKING:
    from agents.postgres.installs.inventory import Install

T = TypeVar("T")


class PointBase(TypedDict):
    """What every live event of a point starts with."""

    point: int
    clients: int
    repeat: int


class PointSamples(TypedDict):
    """What a point's samplers took: the host's samples and the server's, the server's
    counters at the window's start and end (None where this host does not sample the server),
    and the host's and the job's CPU at its start and end (agents/observe/noise.py)."""

    host: list[Sample]
    server: list[Sample]
    counters: CounterWindow | None
    cpu: CpuWindow


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

    def keep_cpu_profile(self, cpu_profile: CpuProfileResult) -> None:
        """A point of the CPU-profile pass: kept apart from the points, sent as `cpu_profile`."""


class PointRunner(Protocol):
    """How the sweep's points are measured: on this host, or on a client host."""

    def warm_up(self, clients: int, seconds: int) -> None:
        """An unlogged run of `seconds` before the first point, never measured."""

    def calibrate(self, clients: int) -> None:
        """A short unlogged run whose tps sets the first point's log sampling rate."""

    def run_point(self, index: int, total: int, clients: int, repeat: int) -> PointResult:
        """One measured point; returns it (also kept and emitted)."""

    def cpu_profile_point(self, index: int, clients: int, perf: str) -> CpuProfileResult:
        """One unmeasured run at `clients` with `perf` recording the server's stacks."""


class PgbenchStops(Protocol):
    """When a pgbench is stopped before it ends by itself, and the error that makes."""

    def should_stop(self, argv: list[str], timed: bool) -> Callable[[], bool]: ...

    def failure(self, point: dict[str, Any]) -> JobError | None:
        """The error of a point this policy stopped; None when it stopped none."""


@dataclass(frozen=True)
class CancelOnly:
    """A pgbench is stopped only by the run's cancel."""

    reporter: SweepReporter

    def should_stop(self, argv: list[str], timed: bool) -> Callable[[], bool]:
        return self.reporter.should_cancel

    def failure(self, point: dict[str, Any]) -> JobError | None:
        return None


@dataclass(frozen=True)
class SweepPlace:
    """Where a sweep runs: its cluster and binaries, its storage targets, the agent's state."""

    cluster: Cluster
    install: "Install"
    storage: dict[str, Path]
    state_dir: Path


@dataclass
class PointContext:
    """Everything a point strategy reads or runs: no Sweep behind it.

    `samples_server` is False on a client host (the server half samples its server).
    """

    reporter: SweepReporter
    cluster: Cluster
    install: "Install"
    spec: JobSpec
    conn: command.Connection
    storage: dict[str, Path]
    log_root: Path
    stops: PgbenchStops
    samples_server: bool = True
    script_paths: dict[int, Path] = field(default_factory=dict)
    # The script files of each of the point's processes (workload.processes).
    process_script_paths: list[dict[int, Path]] = field(default_factory=list)
    # Called once the samplers run, right before a point's pgbench starts: a duet's
    # barrier (agents/duet.py), so both sides' windows start together.
    before_window: Callable[[], None] | None = None

    @classmethod
    def at(
        cls,
        reporter: SweepReporter,
        place: SweepPlace,
        spec: JobSpec,
        stops: PgbenchStops | None = None,
        samples_server: bool = True,
        before_window: Callable[[], None] | None = None,
    ) -> "PointContext":
        """The context of a sweep at `place`; its pgbench is stopped by cancel by default."""
        cluster = place.cluster
        workload = cluster.require_workload()
        host, port = cluster.pgbench_host(), cluster.started_port()
        root = log_root(place.state_dir, place.storage, spec["workload"]["latency_log"])
        return cls(
            reporter,
            cluster,
            place.install,
            spec,
            command.Connection(host, port, workload.user, workload.dbname),
            place.storage,
            root,
            stops or CancelOnly(reporter),
            samples_server,
            before_window=before_window,
        )

    @property
    def workdir(self) -> Path:
        return self.cluster.job_dir / "pgbench"

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
        and the directory its transaction log goes to, and nothing else. pgbench is
        its namespace's init: what its `\\shell` commands leave running dies with it,
        and its CPU time (its commands' included) reaches run_pgbench's wait4.
        """
        view = self.cluster.client_view().plus(
            read_only=[self.workdir], writable=command.log_directories(argv)
        )
        env = self.cluster.workload_env()
        return self.cluster.os_user.start(
            argv, view, self.workdir, as_init=True, env=env, **popen_kwargs
        )

    def pgbench_command(
        self, name: str, argv: list[str], on_line: Callable[[str], None], timed: bool
    ) -> Finished:
        finished = run_pgbench(
            argv,
            launch=self.start_pgbench,
            on_stderr_line=on_line,
            should_stop=self.stops.should_stop(argv, timed),
            timed=timed,
        )
        self.reporter.record_command(name, argv, finished.seconds, finished.exit_code)
        return finished

    def cpu_count(self) -> int:
        """The CPUs this sweep's pgbench may use (the default threads are at most one per
        CPU): its side's in a duet, else the agent's."""
        cpuset = self.cluster.os_user.cpuset
        return len(cpuset.cpus) if cpuset is not None else len(os.sched_getaffinity(0))

    def threads(self, clients: int) -> int:
        threads = self.spec["sweep"]["threads"]
        if threads is not None:
            return min(threads, clients)
        return command.default_threads(clients, self.cpu_count())

    def sampled(
        self, point_base: PointBase, measure: Callable[[], T]
    ) -> tuple[T, PointSamples, float]:
        """Run `measure()` with the samplers; returns (its value, samples, agent CPU seconds).

        The server's counters are read before the samplers start and after they stop
        (agents/observe/point_counters.py), outside what the samplers and pgbench measure.
        """
        reader = self.counter_reader()
        window = reader.start() if reader is not None else None
        samplers = PointSamplers(self, point_base)
        cgroup = self.cluster.os_user.cgroup
        cpu_start = read_cpu(cgroup)
        samplers.start()
        cpu_before = process_cpu_seconds()
        try:
            if self.before_window is not None:
                self.before_window()
                # The window starts once both sides of a duet are there: the host's CPU
                # and the agent's own until then (the other side's setup) are not its.
                cpu_start, cpu_before = read_cpu(cgroup), process_cpu_seconds()
            measured = measure()
        finally:
            agent_cpu_s = process_cpu_seconds() - cpu_before
            host, server = samplers.stop()
            cpu = CpuWindow(cpu_start, read_cpu(cgroup))
        counters = reader.finish(window) if reader is not None and window is not None else None
        samples: PointSamples = {"host": host, "server": server, "counters": counters, "cpu": cpu}
        return measured, samples, agent_cpu_s

    def counter_reader(self) -> CounterReader | None:
        """What reads the server's counters around a point; None where pgbench's server is
        another host's (a client host's points are counted by the server half)."""
        if not self.samples_server:
            return None
        workload = self.cluster.require_workload()
        tracked = self.spec["workload"]["track_statements"]
        return CounterReader(
            self.cluster.conninfo(),
            self.install.version_num,
            workload.dbname,
            self.cluster.postmaster_pid,
            {device for path in self.storage.values() if (device := sampling_device(path))},
            TrackedStatements(workload.user) if tracked else None,
        )


class PointSamplers:
    """The host and the server sampled around one point, on one thread: each tick's two
    samples are also emitted live, as one event."""

    def __init__(self, context: PointContext, point_base: PointBase):
        emit = context.reporter.emit
        self.host = HostSampler(context.storage)
        self.server = None
        members: dict[str, PeriodicSampler] = {"host": self.host}
        if context.samples_server:
            self.server = ServerSampler(context.cluster.conninfo(), context.install.version_num)
            members["server"] = self.server
        self.together = SamplersTogether(
            members, on_sample=lambda together: emit("sample", {**point_base, **together})
        )

    def start(self) -> None:
        self.together.start()

    def stop(self) -> tuple[list[Sample], list[Sample]]:
        """(the host's samples, the server's)."""
        self.together.stop()
        server = self.server.stop() if self.server is not None else []
        return self.host.stop(), server


def last_lines(text: str, count: int = 3) -> str:
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
