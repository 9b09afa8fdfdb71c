"""A throw-away PostgreSQL cluster for one job.

Layout, all owned by the PostgreSQL OS user:

    <data_parent>/benchlab-<job_id>/         job directory (marker file inside)
        data/                                 the data directory (0700)
        socket/                               private Unix socket directory (0700)
        server.log                            server log (stderr), kept until destroy
    <wal_parent>/benchlab-<job_id>-wal/       only when WAL goes elsewhere (marker file inside)
        pg_wal/                               initdb --waldir; data/pg_wal links here

Every directory the cluster creates carries a marker file naming the job and
the process that created it (pid and start time), and `destroy()` removes only
directories whose marker names its own job, so it never touches a cluster it
did not create. `remove_leftover_clusters` (agents/postgres/cluster/leftovers.py) removes
only clusters whose creating process is gone, so agents (or a local `run`)
sharing a storage directory never remove each other's live clusters. The
postmaster runs in its own session, so a Ctrl-C on the agent's terminal does
not reach it: stopping it is ours to do.

How clients reach it (the superuser's and the workload's connections) is
clients.py; its directories and files, directories.py.
"""

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import psycopg

from agents.contract.errors import JobError
from agents.markers import JOB_ID, process_start
from agents.postgres.cluster.clients import SUPERUSER, ClusterClients, WorkloadAccess
from agents.postgres.cluster.directories import (
    SETTINGS_FILE,
    base_config,
    check_socket_path,
    create_owned_dir,
    kill_stragglers,
    marked_for_job,
    require_reachable,
)
from agents.postgres.cluster.template import Template, TemplateStore, copy_template
from agents.postgres.installs.inventory import Install
from agents.postgres.osuser import OsUser, chown_tree
from agents.sandbox import View

logger = logging.getLogger(__name__)

STOP_MODES = ("smart", "fast", "immediate")
# What pg_ctl stop sends the postmaster for each mode.
STOP_SIGNALS = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}


class StepCallback(Protocol):
    """Called after every command the cluster runs, with its exact argv; `note` says
    how a command that did not run for this job came to be (initdb's template)."""

    def __call__(
        self,
        name: str,
        argv: list[str],
        seconds: float,
        exit_code: int | None,
        note: str | None = None,
    ) -> None: ...


def _ignore_step(
    name: str, argv: list[str], seconds: float, exit_code: int | None, note: str | None = None
) -> None:
    """The default step callback: record nothing."""


def initdb_version_args(version_num: int, wal_dir: Path | None) -> list[str]:
    """initdb's host authentication and WAL directory options as this version names them.

    SCRAM and `--waldir` came in 10; before that md5 and `--xlogdir`.
    """
    modern = version_num >= 100000
    argv = [f"--auth-host={'scram-sha-256' if modern else 'md5'}"]
    if wal_dir is not None:
        argv += ["--waldir" if modern else "--xlogdir", str(wal_dir)]
    return argv


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Cluster(ClusterClients):
    """One throw-away cluster: initdb, start, stop, destroy. Use it as a context manager.

    `on_step(name, argv, seconds, exit_code)` is called after every command the
    cluster runs (initdb, start, stop), with its exact argv. With `templates`, initdb
    runs once per binaries and options and later clusters copy its output
    (template.py). `install` is None only for destroying what an earlier process left
    (remove_leftover_clusters).
    """

    def __init__(
        self,
        install: Install | None,
        os_user: OsUser,
        data_parent: Path,
        wal_parent: Path | None = None,
        job_id: str = "local",
        on_step: StepCallback | None = None,
        templates: TemplateStore | None = None,
    ):
        if not JOB_ID.match(job_id):
            raise ValueError(f"job id {job_id!r} is not usable in a directory name")
        self.install = install
        self.os_user = os_user
        self.job_id = job_id
        self.on_step = on_step or _ignore_step
        self.templates = templates
        self.job_dir = Path(data_parent) / f"benchlab-{job_id}"
        self.data_dir = self.job_dir / "data"
        self.socket_dir = self.job_dir / "socket"
        self.log_file = self.job_dir / "server.log"
        self.wal_container = Path(wal_parent) / f"benchlab-{job_id}-wal" if wal_parent else None
        self.port: int | None = None
        self.workload: WorkloadAccess | None = None
        # Only a server that a client host connects to keeps the host's network.
        self.serves_network = False
        self._process: subprocess.Popen[bytes] | None = None
        self._postmaster_pid: int | None = None

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.destroy()

    @property
    def wal_dir(self) -> Path | None:
        """Where WAL lives when it is placed outside the data directory."""
        return self.wal_container / "pg_wal" if self.wal_container else None

    @property
    def settings_file(self) -> Path:
        """The conf file (inside the data directory) that postgresql.conf includes last."""
        return self.data_dir / SETTINGS_FILE

    @property
    def postmaster_pid(self) -> int | None:
        """The postmaster's own pid (not its sandbox's) while it runs."""
        return self._postmaster_pid if self.is_running() else None

    def server_view(self) -> View:
        """What the server, initdb and pg_ctl see: the binaries, and this job's directories."""
        writable = [self.job_dir] + ([self.wal_container] if self.wal_container else [])
        return View(
            read_only=(self.binaries.root,), writable=tuple(writable), network=self.serves_network
        )

    def client_view(self) -> View:
        """What pgbench sees of this cluster: the binaries and the socket directory."""
        return View(read_only=(self.binaries.root,), writable=(self.socket_dir,))

    @property
    def binaries(self) -> Install:
        """The install this cluster runs; only clusters made to be destroyed have none."""
        if self.install is None:
            raise RuntimeError(f"{self} has no install: it can only be destroyed")
        return self.install

    def _postmaster(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise RuntimeError(f"{self} has not been started")
        return self._process

    def is_running(self) -> bool:
        """True while the postmaster this object started is alive. Its own pid is asked, not
        only its sandbox's launcher: the launcher exits a moment after a killed postmaster,
        and a pgbench that failed in that moment would be blamed instead of the server."""
        if self._process is None or self._process.poll() is not None:
            return False
        return self._postmaster_pid is None or process_start(self._postmaster_pid) is not None

    # Creation

    def initdb(self) -> None:
        """Create the directories and the cluster; write its connection settings."""
        require_reachable(self.binaries.bindir, "the PostgreSQL binaries", self.os_user)
        create_owned_dir(self.job_dir, self.job_id, self.os_user)
        if self.wal_container is not None:
            create_owned_dir(self.wal_container, self.job_id, self.os_user)
        check_socket_path(self.socket_dir)
        self.socket_dir.mkdir(mode=0o700)
        self.log_file.touch(mode=0o600)
        chown_tree(self.job_dir, self.os_user)
        # --no-sync skips only initdb's own fsync of the files it writes: the cluster
        # is throw-away, and the running server still syncs exactly as configured.
        argv = [
            str(self.binaries.program("initdb")),
            "-D", str(self.data_dir),
            "-U", SUPERUSER,
            "--auth-local=trust",
            "-E", "UTF8",
            "--locale=C",
            "--no-sync",
            *initdb_version_args(self.binaries.version_num, self.wal_dir),
        ]  # fmt: skip
        template = self.templates.find(self.binaries, argv) if self.templates else None
        if template is not None:
            self._copy_template(template, argv)
        else:
            result = self._run("initdb", argv, timeout=300)
            if result.returncode != 0:
                raise JobError("initdb_failed", f"initdb failed: {result.stderr.strip()[-2000:]}")
            if self.templates is not None:
                self._keep_template(self.templates, argv)
        self._write_base_config()

    def _keep_template(self, templates: TemplateStore, argv: list[str]) -> None:
        try:
            templates.keep(self.binaries, argv, self.data_dir, self.wal_dir, self.job_id)
        except OSError as error:
            logger.warning(
                "initdb's output was not kept as a template (%s): the next cluster runs "
                "initdb again",
                error,
            )

    def _copy_template(self, template: Template, argv: list[str]) -> None:
        started = time.monotonic()
        try:
            copy_template(template, self.data_dir, self.wal_dir)
        except OSError as error:  # a full disk among them: its words reach disk_full.py
            raise JobError("initdb_failed", f"copying initdb's template failed: {error}") from error
        for directory in (self.job_dir, self.wal_container):
            if directory is not None:
                chown_tree(directory, self.os_user)
        self.on_step("initdb", argv, time.monotonic() - started, 0, template.note())

    def _write_base_config(self) -> None:
        with open(self.data_dir / "postgresql.conf", "a") as conf:
            conf.write(base_config(self.socket_dir))
        self.write_settings_file("")

    def write_settings_file(self, text: str) -> None:
        """Replace the job's settings file (takes effect at the next start or reload)."""
        self.settings_file.write_text(text)
        chown_tree(self.settings_file, self.os_user)

    # Running

    def start(self, timeout: float = 60) -> None:
        """Start the postmaster (in its own session) and wait until it accepts connections."""
        if self.is_running():
            return
        if self.port is None:
            self.port = free_port()
        try:
            self._start_once(timeout)
        except JobError:
            if "could not bind" not in self.log_tail(20):
                raise
            logger.warning("port %s was taken; starting %s on another port", self.port, self)
            self.port = free_port()
            self._start_once(timeout)

    def _start_once(self, timeout: float) -> None:
        argv = [
            str(self.binaries.program("postgres")),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
        ]
        started = time.monotonic()
        with open(self.log_file, "ab") as log:
            postmaster = self.os_user.start(
                argv,
                self.server_view(),
                self.job_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._process, self._postmaster_pid = postmaster.process, postmaster.pid
        exit_code = self._wait_ready(started + timeout)
        self.on_step("start", argv, time.monotonic() - started, exit_code)
        if exit_code != 0:
            raise JobError(
                "server_start_failed",
                f"PostgreSQL did not start (exit code {exit_code}): {self.log_tail(20)}",
            )

    def _wait_ready(self, deadline: float) -> int | None:
        """0 once the server accepts connections; its exit code, or None on timeout."""
        while time.monotonic() < deadline:
            if self._postmaster().poll() is not None:
                return self._postmaster().returncode
            try:
                with psycopg.connect(self.conninfo(), connect_timeout=5):
                    return 0
            except psycopg.OperationalError:
                time.sleep(0.1)
        self._signal_and_reap(signal.SIGKILL)
        return None

    def stop(self, mode: str = "fast", timeout: float = 60) -> None:
        """Stop the server as `pg_ctl stop -m <mode> -w` would; kill it if that fails.

        pg_ctl reads the postmaster's pid from postmaster.pid, which holds the pid the
        postmaster has inside its sandbox's namespace; so the agent sends the mode's
        signal to the pid it holds itself and waits for the postmaster to exit. The
        step keeps pg_ctl's equivalent command, with a note saying what ran instead.
        """
        if mode not in STOP_MODES:
            raise ValueError(f"stop mode must be one of {STOP_MODES}")
        if not self.is_running() or self._postmaster_pid is None:
            self._reap()
            return
        argv = [
            str(self.binaries.program("pg_ctl")), "stop", "-D", str(self.data_dir),
            "-m", mode, "-w", "-t", str(int(timeout)),
        ]  # fmt: skip
        started = time.monotonic()
        signum = STOP_SIGNALS[mode]
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._postmaster_pid, signum)
        try:
            exit_code: int | None = self._postmaster().wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            exit_code = None
        note = (
            f"pg_ctl did not run: the agent sent {signum.name} to the postmaster "
            f"(pid {self._postmaster_pid}) and waited for it to exit, as this command does"
        )
        self.on_step("stop", argv, time.monotonic() - started, exit_code, note)
        if exit_code is None:
            logger.warning("the server did not stop within %s s (-m %s)", timeout, mode)
            if mode != "immediate":
                self.stop("immediate", timeout)
                return
            self._signal_and_reap(signal.SIGKILL)
        self._reap()

    def restart(self, timeout: float = 60) -> None:
        """Stop (fast) and start again, e.g. to apply postmaster-context settings."""
        self.stop("fast", timeout)
        self.start(timeout)

    def kill_server(self) -> None:
        """SIGKILL the postmaster, as a crash would (its backends notice and exit)."""
        if self.is_running():
            self._signal_and_reap(signal.SIGKILL)

    def _signal_and_reap(self, signum: int) -> None:
        """Signal the postmaster itself (its sandbox forwards nothing) and reap its sandbox."""
        postmaster = self._postmaster()
        if postmaster.poll() is None and self._postmaster_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._postmaster_pid, signum)
        postmaster.wait(timeout=30)

    def _reap(self) -> None:
        if self._process is None:
            return
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._signal_and_reap(signal.SIGKILL)

    def log_tail(self, lines: int = 50) -> str:
        """The last `lines` lines of the server log."""
        try:
            with open(self.log_file, "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - 256 * 1024))
                text = log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # Teardown

    def destroy(
        self, stop_mode: str = "fast", before_removal: Callable[[], None] | None = None
    ) -> None:
        """Stop the server and remove the directories this cluster created (and only those).

        `immediate` for a server that cannot finish a clean shutdown (a full disk:
        its checkpoint cannot be written, and a fast stop waits out its timeout).
        `before_removal` runs once the server is down (a job ends its cgroup there, so
        nothing it left writes into the directories while they are removed)."""
        try:
            self.stop(stop_mode, timeout=30)
        except (JobError, OSError, subprocess.SubprocessError) as error:
            logger.warning("stopping %s failed (%s); killing it", self, error)
            if self.is_running():
                self._signal_and_reap(signal.SIGKILL)
        if before_removal is not None:
            before_removal()
        for directory in (self.job_dir, self.wal_container):
            if directory is None or not directory.exists():
                continue
            if not marked_for_job(directory, self.job_id):
                logger.warning("%s has no marker of job %s; leaving it", directory, self.job_id)
                continue
            if directory == self.job_dir:
                kill_stragglers(self.job_dir, self)
            shutil.rmtree(directory)

    def _run(self, name: str, argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        result = subprocess.run(
            self.os_user.command(argv, self.server_view(), self.job_dir),
            capture_output=True,
            text=True,
            cwd=self.job_dir,
            timeout=timeout,
            **self.os_user.subprocess_kwargs(),
        )
        self.on_step(name, argv, time.monotonic() - started, result.returncode)
        return result

    def __repr__(self) -> str:
        return f"<Cluster {self.job_id} at {self.data_dir}>"


@contextlib.contextmanager
def running_cluster(
    install: Install,
    os_user: OsUser,
    data_parent: Path,
    job_id: str,
    wal_parent: Path | None = None,
    on_step: StepCallback | None = None,
) -> Iterator[Cluster]:
    """A cluster that is created and started on entry and destroyed on exit."""
    with Cluster(install, os_user, data_parent, wal_parent, job_id, on_step) as cluster:
        cluster.initdb()
        cluster.start()
        yield cluster
