"""The client half of a run with a client host: pgbench over TCP against the server half.

It checks its own signed job as any job (scripts, SQL), finds pgbench of the
run's version, says it joined (with the address its local config advertises),
waits for the server's `ready` (address, port, the workload's role and
database, the job's password), measures the round trip (`SELECT 1`), then
measures each point the server asks for with its own host sampled, sending
progress, samples and the point back. It never emits run events itself: the
server half is the run's one voice to the lab. Cancel (the run's flag), the
server's `stop`, or the server going silent end it; pgbench is stopped and its
scratch directory removed.

A timed pgbench that runs OVERRUN_GRACE_S past its `-T` is stopped and its point
fails as `peer_lost`: pgbench waits for the answer of a query in flight for as
long as TCP retransmits (about 15 minutes on Linux), so a path to the server
that went dark mid-point would otherwise hold both halves that long.
"""

import logging
import shutil
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import psycopg

from agents.cgroups import JobCgroup
from agents.config import AgentConfig
from agents.contract.errors import Cancelled, JobError
from agents.contract.reports.cpu_profiles import CpuProfileResult
from agents.contract.reports.results import PointResult
from agents.contract.spec.document import JobSpec, validate_spec, warm_up_seconds
from agents.contract.vocabulary import JobOutcome
from agents.contract.workload_text.scripts import check_workload_scripts
from agents.contract.workload_text.workload_sql import check_workload_sql
from agents.job_cgroup import end_job_cgroup, open_job_cgroup
from agents.markers import ClusterMarker
from agents.pair.link import Message, PairLink
from agents.pgbench.latency_log import log_root
from agents.postgres.cluster.clients import WorkloadAccess
from agents.postgres.cluster.directories import usable_job_id
from agents.postgres.cluster.lifecycle import Cluster
from agents.postgres.installs.ensure import ensure_install
from agents.postgres.installs.inventory import Install
from agents.postgres.osuser import chown_tree, ensure_os_user, make_dirs
from agents.sandbox import View
from agents.sweep import LocalPoints, PointContext, SweepPlace, SweepReporter

logger = logging.getLogger(__name__)

ROUND_TRIPS = 20
# How long a timed pgbench may run past its -T (a transaction in flight finishes) before
# the path to the server is taken for dead.
OVERRUN_GRACE_S = 30.0


class RemoteServer(Cluster):
    """The server half's cluster as the client sees it: an address, a port, a role with a
    password. Only the scratch directory (`job_dir`) is local; it is never initialised."""

    def __init__(
        self,
        install: Install,
        config: AgentConfig,
        job_id: str,
        ready: Message,
        cgroup: JobCgroup | None = None,
    ):
        os_user = ensure_os_user(config.os_user, config.sandbox, config.job_tmp_bytes)
        super().__init__(
            install,
            os_user.in_cgroup(cgroup),
            client_scratch(config),
            job_id=usable_job_id(job_id),
        )
        self.host = str(ready["host"])
        self.port = int(ready["port"])
        self.password = str(ready["password"])
        self.workload = WorkloadAccess(str(ready["user"]), str(ready["dbname"]), False)

    def pgbench_host(self) -> str:
        return self.host

    def client_view(self) -> View:
        """pgbench reaches the server half over TCP: the binaries and the host's network."""
        return View(read_only=(self.binaries.root,), network=True)

    def workload_env(self) -> dict[str, str]:
        access = self.require_workload()
        return {
            "PGHOST": self.host,
            "PGPORT": str(self.port),
            "PGUSER": access.user,
            "PGDATABASE": access.dbname,
            "PGPASSWORD": self.password,
        }

    def is_running(self) -> bool:
        """The server half watches its own server; a dead one ends the run from there."""
        return True

    def log_tail(self, lines: int = 50) -> str:
        return "(the server host keeps the server log)"


class OverrunGuard:
    """The client half's PgbenchStops: cancel, or a timed pgbench OVERRUN_GRACE_S past its
    -T, whose point then fails as `peer_lost`."""

    def __init__(self, reporter: SweepReporter, server_host: str) -> None:
        self.reporter = reporter
        self.server_host = server_host
        self.overran = False

    def should_stop(self, argv: list[str], timed: bool) -> Callable[[], bool]:
        self.overran = False
        cancelled = self.reporter.should_cancel
        if not timed or "-T" not in argv:
            return cancelled
        limit = time.monotonic() + int(argv[argv.index("-T") + 1]) + OVERRUN_GRACE_S

        def should_stop() -> bool:
            self.overran = self.overran or time.monotonic() > limit
            return self.overran or cancelled()

        return should_stop

    def failure(self, point: dict[str, Any]) -> JobError | None:
        if not self.overran:
            return None
        return JobError(
            "peer_lost",
            f"the server at {self.server_host} stopped answering pgbench over TCP: "
            f"pgbench ran {OVERRUN_GRACE_S:g} s past its -T at point {point['index'] + 1} and "
            "was stopped; check the network path between the two hosts",
        )


class LinkReporter:
    """The SweepReporter of the client half: everything goes to the server as messages."""

    def __init__(self, link: PairLink, should_cancel: Callable[[], bool]) -> None:
        self.link = link
        self.should_cancel = should_cancel
        self.failed_point: PointResult | None = None

    def status(self, state: str, message: str) -> None:
        logger.info("client half %s: %s", self.link.dispatch, message)

    def step(self, name: str, message: str, percent: float | None = None) -> None:
        logger.info("client half %s: %s %s", self.link.dispatch, name, message)

    def emit(self, event_type: str, data: Mapping[str, Any]) -> None:
        self.link.send("event", type=event_type, data=dict(data))

    def check_cancel(self) -> None:
        if self.should_cancel():
            raise Cancelled()

    def record_command(
        self, name: str, argv: list[str], seconds: float, exit_code: int | None
    ) -> None:
        logger.info("client half %s: %s exited %s", self.link.dispatch, name, exit_code)

    def record_dataset(self, key: str, value: object) -> None:
        """The server half loads the dataset; nothing to record here."""

    def keep_point(self, point: PointResult) -> None:
        self.link.send("point", point=point, error=None)

    def keep_failed_point(self, point: PointResult) -> None:
        self.failed_point = point

    def keep_cpu_profile(self, cpu_profile: CpuProfileResult) -> None:
        """Never called: the client half runs no CPU-profile pass (the server half's
        RemotePoints says so in the run's CPU profile)."""
        raise RuntimeError("the client half of a run has no CPU-profile pass")


def run_client_half(
    spec_doc: object, config: AgentConfig, link: PairLink, should_cancel: Callable[[], bool]
) -> JobOutcome:
    """Serve the server half until it says stop; returns how it ended (for the worker log).

    Failures go to the server as a `failed` message (it fails the run with the reason).
    """
    link.start()
    server: RemoteServer | None = None
    cgroup: JobCgroup | None = None
    try:
        spec = _checked(spec_doc, config)
        # Its pgbench runs lab code as the server half's does: in a cgroup ended with it.
        cgroup = open_job_cgroup(config, spec, usable_job_id(spec["run_id"] or "client"))
        link.send("joined", address=config.advertise_address)
        install = ensure_install(
            spec["postgres"]["version"], spec["postgres"]["source"], config.cache_dir
        )
        timeout = spec["network"]["join_timeout_s"]
        ready = link.wait_for({"ready"}, should_cancel, timeout)
        server = RemoteServer(install, config, spec["run_id"] or "client", ready, cgroup)
        link.send("network", **round_trip(server, config.advertise_address))
        reporter = LinkReporter(link, should_cancel)
        stops = OverrunGuard(reporter, server.pgbench_host())
        place = _place(server, config)
        context = PointContext.at(reporter, place, spec, stops, samples_server=False)
        _serve(LocalPoints(context), reporter, link)
        return "succeeded"
    except Cancelled:
        return "cancelled"
    except JobError as error:
        logger.warning("client half %s failed: %s", link.dispatch, error)
        link.send("failed", error=error.as_dict())
        return "failed"
    except Exception as error:
        logger.exception("client half %s failed with an unexpected error", link.dispatch)
        failure = JobError("internal_error", f"{type(error).__name__}: {error}")
        link.send("failed", error=failure.as_dict())
        return "failed"
    finally:
        link.close()
        problem = end_job_cgroup(cgroup) if cgroup is not None else None
        if problem is not None:
            logger.error("client half %s: %s", link.dispatch, problem)
        if server is not None:
            shutil.rmtree(server.job_dir, ignore_errors=True)


def _checked(spec_doc: object, config: AgentConfig) -> JobSpec:
    spec = validate_spec(spec_doc)
    check_workload_scripts(spec["workload"], config.allow_shell_scripts)
    check_workload_sql(spec, config.allow_superuser_sql)
    log_root(config.state_dir, {}, spec["workload"]["latency_log"])
    return spec


def client_scratch(config: AgentConfig) -> Path:
    """Where client halves keep their scratch directories, `benchlab-<job>`: each is marked
    as a cluster's directory is, so a worker starting after its agent was killed removes
    what a client half left (agents.postgres.cluster.leftovers)."""
    return config.state_dir / "client"


def _place(server: RemoteServer, config: AgentConfig) -> SweepPlace:
    make_dirs(server.job_dir)
    ClusterMarker.for_this_process(server.job_id).write(server.job_dir)
    chown_tree(server.job_dir, server.os_user)
    if server.install is None:
        raise RuntimeError("a remote server is always given an install")
    return SweepPlace(server, server.install, {}, config.state_dir)


def _serve(points: LocalPoints, reporter: LinkReporter, link: PairLink) -> None:
    """Measure what the server asks for until it says stop."""
    points.context.prepare_workdir()
    while True:
        kinds = {"measure", "warmup", "calibrate", "stop"}
        message = link.wait_for(kinds, reporter.should_cancel)
        if message["kind"] == "stop":
            return
        if message["kind"] in ("warmup", "calibrate"):
            _warm_up(points, link, message["kind"], int(message["clients"]))
            continue
        try:
            points.run_point(
                message["index"], message["total"], message["clients"], message["repeat"]
            )
        except JobError as error:
            link.send("point", point=reporter.failed_point or {}, error=error.as_dict())


def _warm_up(points: LocalPoints, link: PairLink, kind: str, clients: int) -> None:
    """A warm-up or calibration run asked for by the server half; answered `warmed`."""
    try:
        if kind == "calibrate":
            points.calibrate(clients)
        else:
            points.warm_up(clients, warm_up_seconds(points.context.spec["sweep"]))
        link.send("warmed", error=None)
    except JobError as error:
        link.send("warmed", error=error.as_dict())


def round_trip(server: RemoteServer, client_address: str) -> dict[str, Any]:
    """The network path: both addresses and the median latency of `SELECT 1` over TCP."""
    env = server.workload_env()
    conninfo = psycopg.conninfo.make_conninfo(
        host=env["PGHOST"],
        port=env["PGPORT"],
        user=env["PGUSER"],
        dbname=env["PGDATABASE"],
        password=env["PGPASSWORD"],
    )
    timings = []
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
            for _ in range(ROUND_TRIPS):
                started = time.perf_counter()
                conn.execute("SELECT 1")
                timings.append((time.perf_counter() - started) * 1000)
    except psycopg.Error as error:
        raise JobError(
            "peer_lost",
            f"the client host could not reach the server at {server.host}:{server.port} over "
            f"TCP: {error}; check the server agent's --advertise-address and the network path",
        ) from error
    return {
        "client_address": client_address,
        "server_address": server.host,
        "port": server.port,
        "transport": "tcp",
        "select1_ms": round(statistics.median(timings), 4),
        "select1_samples": ROUND_TRIPS,
    }
