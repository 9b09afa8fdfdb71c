"""One job, start to finish: a throw-away cluster, a dataset, a pgbench sweep.

`run_job` turns a job spec (docs/contracts.md section 1) into a result
document (section 3), emitting events as it goes. Job failures never raise:
they end up in the document with a stable code, and every point measured
before the failure is kept. Only bugs raise.
"""

import logging
import secrets
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import agents
from agents.cgroups import JobCgroup
from agents.config import AgentConfig
from agents.contract.errors import Cancelled, JobError
from agents.contract.reports.cpu_profiles import CpuProfileResult
from agents.contract.reports.results import (
    RESULT_VERSION,
    CommandRecord,
    PointResult,
    ResultDocument,
)
from agents.contract.settings.catalogue import Catalogue, refuse_settings, validate_settings
from agents.contract.spec.document import (
    JobSpec,
    PostgresSpec,
    SettingValue,
    validate_spec,
)
from agents.contract.spec.pgbench_versions import refuse_missing_options
from agents.contract.vocabulary import JobOutcome
from agents.contract.workload_text.scripts import check_workload_scripts
from agents.contract.workload_text.workload_sql import check_workload_sql
from agents.cpusets import CpuSet, open_cpuset
from agents.events import EventEmitter, now_iso
from agents.job_cgroup import end_job_cgroup, open_job_cgroup
from agents.observe import pg_statements
from agents.observe.canary import run_canary
from agents.observe.cpu_profile import no_cpu_profile, perf_for_job
from agents.observe.facts import collect_facts
from agents.pair.link import PairLink
from agents.pair.remote import RemotePoints
from agents.pgbench.latency_log import log_root
from agents.postgres import remote_access
from agents.postgres import settings as pg_settings
from agents.postgres.cluster.directories import usable_job_id
from agents.postgres.cluster.lifecycle import Cluster
from agents.postgres.cluster.template import TemplateStore
from agents.postgres.disk_full import ClusterPlaces, disk_full_error, job_targets
from agents.postgres.installs.build_steps import BuildFailed
from agents.postgres.installs.ensure import ensure_install
from agents.postgres.installs.inventory import Install, major_of, matches_version
from agents.postgres.installs.source_build import check_allowed as check_build_allowed
from agents.postgres.installs.source_build import ensure_build
from agents.postgres.osuser import OsUser, ensure_os_user, make_dirs
from agents.postgres.storage_targets import resolve_storage, storage_records
from agents.sweep import LocalPoints, PointContext, PointRunner, Sweep, SweepPlace
from agents.sweep.driver import records_cpu_profile

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostShare:
    """A job's part of a host it shares with another job at once (a side of a duet,
    agents/duet.py): the CPUs its programs run on, and what each point's window waits on
    before its pgbench starts (the other side's arrival)."""

    cpus: tuple[int, ...]
    before_window: Callable[[], None]


class Job:
    """The state of one job while it runs; `run()` returns the result document."""

    def __init__(
        self,
        spec_doc: object,
        config: AgentConfig,
        emitter: EventEmitter,
        should_cancel: Callable[[], bool],
        link: PairLink | None = None,
        share: HostShare | None = None,
    ) -> None:
        self.spec_doc = spec_doc
        self.config = config
        self.emitter = emitter
        self.should_cancel = should_cancel
        # The server half of a run with a client host talks to the client through `link`.
        self.link = link
        self.client_address: str | None = None
        self.cluster: Cluster | None = None
        # Every program of the job runs in this cgroup (agents/cgroups.py); None before
        # prepare() opens it, after end_cgroup(), and on a host without cgroups.
        self.cgroup: JobCgroup | None = None
        # A side of a duet: its part of the host, and its CPU set once prepare() opened it.
        self.share = share
        self.cpuset: CpuSet | None = None
        # perf's path when this job records a CPU-profile pass (agents/observe/cpu_profile.py).
        self.perf: str | None = None
        # What the job is doing (its last status message), for a failure to name.
        self.doing = "the start of the job"
        self.result: ResultDocument = new_result(spec_doc)

    def run(self) -> ResultDocument:
        try:
            self._run()
            self.result["status"] = "succeeded"
        except Cancelled as error:
            self._fail(error, "cancelled")
        except KeyboardInterrupt:
            self._fail(Cancelled("interrupted (Ctrl-C) on the agent"), "cancelled")
        except JobError as error:
            self._fail(error, "failed")
        except Exception as error:
            logger.exception("job %s failed with an unexpected error", self.result["run_id"])
            self._fail(JobError("internal_error", f"{type(error).__name__}: {error}"), "failed")
        finally:
            try:
                self.teardown()
            finally:
                self.end_cgroup()
        self.result["finished_at"] = now_iso()
        self.emit("status", {"state": "finished", "message": self.result["status"]})
        self.emit("result", self.result)
        return self.result

    def emit(self, event_type: str, data: Mapping[str, Any]) -> None:
        self.emitter.emit(event_type, data)

    def status(self, state: str, message: str) -> None:
        logger.info("run %s: %s", self.result["run_id"], message)
        self.doing = message
        self.emit("status", {"state": state, "message": message})

    def step(self, name: str, message: str, percent: float | None = None) -> None:
        self.emit("step", {"name": name, "percent": percent, "message": message})

    def check_cancel(self) -> None:
        if self.should_cancel():
            raise Cancelled()

    def record_command(
        self,
        name: str,
        argv: list[str],
        seconds: float,
        exit_code: int | None,
        note: str | None = None,
    ) -> None:
        """Every command the job runs is kept with its exact argv (cluster steps come here
        too); `note` says how one that did not run for this job came to be."""
        record = CommandRecord(name=name, argv=argv, seconds=seconds, exit_code=exit_code)
        if note is not None:
            record["note"] = note
        self.result["steps"].append(record)

    def record_dataset(self, key: str, value: object) -> None:
        self.result["dataset"][key] = value

    def keep_point(self, point: PointResult) -> None:
        self.result["points"].append(point)
        self.emit("point", point)

    def keep_failed_point(self, point: PointResult) -> None:
        self.result["failed_point"] = point

    def keep_cpu_profile(self, cpu_profile: CpuProfileResult) -> None:
        self.result.setdefault("cpu_profiles", []).append(cpu_profile)
        self.emit("cpu_profile", cpu_profile)
        if cpu_profile["error"]:
            message = f"no CPU profile: {cpu_profile['error']}"
            self.emit("log", {"level": "warning", "message": message})

    def _run(self) -> None:
        install, spec = self.prepare()
        before_window = self.share.before_window if self.share is not None else None
        context = PointContext.at(
            self, self.sweep_place(install), spec, before_window=before_window
        )
        points: PointRunner = LocalPoints(context)
        if self.link is not None:
            self._announce_ready()
            points = RemotePoints(self.link, context, self.should_cancel)
        Sweep(context, points, self.perf).run()

    def _await_client(self, spec: JobSpec) -> None:
        """The server half starts nothing before its client half has joined."""
        if spec["network"]["role"] == "local":
            return
        if spec["network"]["role"] == "client" or self.link is None:
            raise JobError(
                "invalid_spec",
                "a run with a client host runs only in the lab: its server half on an agent "
                "worker, its client half on the client host's worker",
                field="network.role",
            )
        self.link.start()
        self.status("provisioning", f"waiting for the client host {self.link.peer_name}")
        joined = self.link.wait_for(
            {"joined"}, self.should_cancel, spec["network"]["join_timeout_s"]
        )
        self.client_address = str(joined["address"])

    def _announce_ready(self) -> None:
        """Let the client in (its address, a password drawn now) and tell it where to connect."""
        if self.link is None or self.cluster is None or self.client_address is None:
            raise RuntimeError("the server half announces only a started cluster to its client")
        password = remote_access.admit_client(self.cluster, self.client_address)
        access = self.cluster.require_workload()
        self.link.send(
            "ready",
            host=self.config.advertise_address,
            port=self.cluster.started_port(),
            user=access.user,
            dbname=access.dbname,
            password=password,
        )
        network = self.link.wait_for({"network"}, self.should_cancel)
        self.result["network"] = {k: v for k, v in network.items() if k != "kind"}
        self.emit("log", {"level": "info", "message": _network_line(self.result["network"])})

    def sweep_place(self, install: Install) -> SweepPlace:
        """Where the sweep runs: the started cluster and the storage targets it sits on."""
        if self.cluster is None:
            raise RuntimeError("prepare() returned without a running cluster")
        storage = {role: Path(entry["path"]) for role, entry in self.result["storage"].items()}
        return SweepPlace(self.cluster, install, storage, self.config.state_dir)

    def prepare(self) -> tuple[Install, JobSpec]:
        """Validate, provision binaries, start the cluster with its settings: (install, spec)."""
        spec = validate_spec(self.spec_doc)
        self.result["spec"] = spec
        self.result["settings"]["requested"] = spec["settings"]
        refuse_missing_options(spec)
        check_workload_scripts(spec["workload"], self.config.allow_shell_scripts)
        check_workload_sql(spec, self.config.allow_superuser_sql)
        refuse_settings(spec["settings"], self.config.allow_settings)
        if spec["postgres"]["build"] is not None:
            check_build_allowed(spec["postgres"]["build"], self.config)
        self.cgroup = open_job_cgroup(
            self.config, spec, usable_job_id(self.result["run_id"] or "local")
        )
        if self.share is not None:
            self.cpuset = open_cpuset(self.share.cpus, self.cgroup)
            self.result["cpus"] = list(self.share.cpus)
        self.perf, problem = perf_for_job(
            records_cpu_profile(spec["sweep"]), self.config.allow_cpu_profiling
        )
        if problem is not None:
            self.keep_cpu_profile(no_cpu_profile(problem))
        self._await_client(spec)
        storage = resolve_storage(self.config, spec["storage"])
        log_root(self.config.state_dir, storage, spec["workload"]["latency_log"])
        self.check_cancel()
        install = self._provision(spec["postgres"])
        tracks_statements = spec["workload"]["track_statements"]
        if tracks_statements:
            pg_statements.check_available(install)
        self.result["facts"] = collect_facts(storage)
        self.result["storage"].update(
            storage_records(storage, spec["storage"], self.result["facts"])
        )
        self.status("provisioning", "timing the host (a CPU loop, fsyncs on the data storage)")
        self.result["canary"] = run_canary(storage["data"])
        self.check_cancel()
        self._start_cluster(install, storage, spec["settings"], tracks_statements)
        return install, spec

    def _provision(self, postgres: PostgresSpec) -> Install:
        self.status("provisioning", f"finding PostgreSQL {postgres['version']}")

        def progress(message: str, percent: float | None) -> None:
            self.step("install", message, percent)

        if postgres["build"] is not None:
            install = self._build_from_source(postgres)
        else:
            install = ensure_install(
                postgres["version"], postgres["source"], self.config.cache_dir, progress
            )
        self.result["install"] = install.as_dict()
        self.step("install", f"using {install.postgres_version} from {install.bindir}", 100.0)
        return install

    def _build_from_source(self, postgres: PostgresSpec) -> Install:
        """Build (or reuse the cached build of) `postgres.build`; keep its record and log."""
        if postgres["build"] is None:
            raise RuntimeError("_build_from_source needs postgres.build")

        reported: set[int] = set()

        def progress(message: str, percent: float | None) -> None:
            whole = int(percent or 0)
            if whole not in reported:  # one event per percent, not one per poll
                reported.add(whole)
                self.step("build", message, percent)

        try:
            install, record = ensure_build(
                postgres["build"],
                self.config,
                self.os_user(),
                progress,
                self.should_cancel,
            )
        except BuildFailed as failure:
            self.result["build"] = failure.record
            raise
        self.result["build"] = record
        reused = "reused the cached build" if record["reused"] else "built"
        self.step("build", f"{reused} {record['key']} ({record['seconds']} s to build)", 100.0)
        if not matches_version(install.version, postgres["version"]):
            raise JobError(
                "version_unavailable",
                f"the source builds PostgreSQL {install.version}, not {postgres['version']}: "
                f"set the build's version to {major_of(install.version)}",
                field="postgres.version",
            )
        return install

    def _start_cluster(
        self,
        install: Install,
        storage: dict[str, Path],
        requested: Mapping[str, SettingValue],
        tracks_statements: bool,
    ) -> None:
        """initdb, start, validate and apply the settings, read back the effective ones.

        With a cached catalogue of this exact version the settings are validated
        before initdb and the cluster starts once, with them; otherwise the catalogue is
        read from a first start, and the settings are validated and applied by a restart,
        before anything is measured.
        Tracking statements adds the library the agent loads to the validated settings.
        """
        catalogue_dir = self._catalogue_dir(install)
        catalogue = pg_settings.read_cached_catalogue(
            pg_settings.catalogue_path(catalogue_dir, install.version)
        )
        if catalogue is not None:
            self._validate_settings(requested, catalogue)
        os_user = self.os_user()
        job_id = self.result["run_id"] or f"local-{secrets.token_hex(4)}"
        for path in storage.values():
            make_dirs(path)
        cluster = self.cluster = Cluster(
            install,
            os_user,
            data_parent=storage["data"],
            wal_parent=storage.get("wal"),
            job_id=usable_job_id(job_id),
            on_step=self.record_command,
            templates=TemplateStore(catalogue_dir),
        )
        self.status("initdb", "creating a throw-away cluster")
        cluster.initdb()
        if self.client_address is not None:
            remote_access.listen_on(cluster, self.config.advertise_address)
        self.check_cancel()
        if catalogue is None:
            self.status("starting", "starting PostgreSQL to read its settings catalogue")
            cluster.start()
            catalogue = pg_settings.load_or_read_catalogue(
                install, catalogue_dir, lambda: nullcontext(cluster)
            )
            self._validate_settings(requested, catalogue)
            if install.source != "build":
                self.result["settings"]["catalogue"] = catalogue.as_dict()
        applied = pg_statements.with_library(requested) if tracks_statements else requested
        if applied:
            action = "restarting" if cluster.is_running() else "starting"
            self.status("starting", f"applying settings and {action} PostgreSQL")
            pg_settings.apply_settings(cluster, applied)
        elif not cluster.is_running():
            self.status("starting", "starting PostgreSQL")
            cluster.start()
        with cluster.connect() as conn:
            self.result["settings"]["effective"] = pg_settings.read_effective_settings(conn)
            self.result["settings"]["compiled"] = pg_settings.read_compiled_settings(conn)
        access = cluster.create_workload_database(self.config.allow_superuser_sql)
        self.result["dataset"]["workload"] = access.as_dict()
        if tracks_statements:
            pg_statements.create_extension(cluster)

    def os_user(self) -> OsUser:
        """Who runs the job's programs: the config's OS user, in the job's cgroup (and on
        its side's CPUs in a duet)."""
        user = ensure_os_user(self.config.os_user, self.config.sandbox, self.config.job_tmp_bytes)
        return user.in_cgroup(self.cgroup).on_cpus(self.cpuset)

    def _catalogue_dir(self, install: Install) -> Path:
        """Where this install's catalogue is cached: a source build keeps its own, since
        compile-time constants change settings' units and limits (16 kB blocks: 16kB units)."""
        return install.bindir.parent if install.source == "build" else self.config.cache_dir

    def _validate_settings(
        self, requested: Mapping[str, SettingValue], catalogue: Catalogue
    ) -> None:
        warnings = validate_settings(requested, catalogue, self.config.allow_settings)
        self.result["settings"]["warnings"] = warnings
        for warning in warnings:
            self.emit("log", {"level": "warning", "message": warning})

    def _fail(self, error: JobError, status: JobOutcome) -> None:
        if status == "failed":
            error = self._disk_full(error) or error
        self.result["status"] = status
        self.result["error"] = error.as_dict()
        level = "warning" if status == "cancelled" else "error"
        self.emit("log", {"level": level, "message": str(error)})

    def _disk_full(self, error: JobError) -> JobError | None:
        """The failure as `disk_full` when a storage target filled up (postgres/disk_full.py)."""
        targets = job_targets(self.result)
        cluster = self.cluster
        places = ClusterPlaces(cluster.data_dir, cluster.wal_dir) if cluster else None
        server_log = cluster.log_tail(200) if cluster else ""
        return disk_full_error(error, server_log, targets, places, self.doing)

    def teardown(self) -> None:
        """Stop and remove the cluster, keeping its log tail; safe to call twice.

        Every way a job ends comes here (`run`'s finally): success, failure, cancel, a lost
        peer or Redis. The client half of a run with a client host is told to stop first
        (the message waits in the link's spool while Redis is down), and nothing the link
        does keeps the cluster up: it is removed before the link closes, whatever happened.
        """
        link, self.link = self.link, None
        try:
            if link is not None:
                link.send("stop")
        finally:
            try:
                self._remove_cluster()
            finally:
                if link is not None:
                    link.close()

    def _remove_cluster(self) -> None:
        if self.cluster is None:
            return
        self.status("stopping", "stopping and removing the cluster")
        self.result["server_log_tail"] = self.cluster.log_tail(80)
        error = self.result["error"]
        # A server on a full disk cannot write its shutdown checkpoint: no fast stop.
        self.cluster.destroy(
            "immediate" if error and error["code"] == "disk_full" else "fast",
            before_removal=self.end_cgroup,
        )
        self.cluster = None

    def end_cgroup(self) -> None:
        """Kill whatever the job's programs left running and remove the job's cgroup, once
        the server is down (whatever the job ended by); a process that will not die, or a
        cgroup that cannot be removed, is an error in the job's log (its outcome stands)."""
        cgroup, self.cgroup = self.cgroup, None
        cpuset, self.cpuset = self.cpuset, None
        problems = [end_job_cgroup(cgroup) if cgroup is not None else None]
        problems.append(cpuset.remove() if cpuset is not None else None)
        for problem in problems:
            if problem is not None:
                logger.error("run %s: %s", self.result["run_id"], problem)
                self.emit("log", {"level": "error", "message": problem})


def new_result(spec_doc: object) -> ResultDocument:
    """The result document of a job that starts now: running, nothing measured yet."""
    return {
        "version": RESULT_VERSION,
        "run_id": _run_id(spec_doc),
        "status": "running",
        "error": None,
        "started_at": now_iso(),
        "finished_at": None,
        "spec": spec_doc if isinstance(spec_doc, dict) else {},
        "install": None,
        "build": None,
        "facts": None,
        "storage": {},
        "settings": {"requested": {}, "effective": [], "warnings": []},
        "steps": [],
        "dataset": {"steps": {}},
        "points": [],
        "server_log_tail": "",
        "agent_version": agents.__version__,
    }


def _network_line(network: Mapping[str, Any]) -> str:
    return (
        f"pgbench runs on the client host: {network.get('client_address')} -> "
        f"{network.get('server_address')}:{network.get('port')} over TCP, "
        f"SELECT 1 takes {network.get('select1_ms')} ms "
        f"(median of {network.get('select1_samples')})"
    )


def _run_id(spec_doc: object) -> str | None:
    """The run id of a spec not validated yet (a failed validation still names its run)."""
    run_id = spec_doc.get("run_id") if isinstance(spec_doc, dict) else None
    return run_id if isinstance(run_id, str) else None


def run_job(
    spec: object,
    config: AgentConfig,
    emitter: EventEmitter,
    should_cancel: Callable[[], bool] = lambda: False,
    link: PairLink | None = None,
) -> ResultDocument:
    """Run one job; return the result document (also emitted as a `result` event).

    `link` connects the server half of a run with a client host to its client half.
    """
    return Job(spec, config, emitter, should_cancel, link).run()
