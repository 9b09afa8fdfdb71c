"""`scripts/lab` itself, started with REDIS_URL on a Redis of the test's own, or on a free
port where the lab starts its own Redis, with a password.

Everything it starts (web, control worker, local agent) must use that Redis:
the local agent's heartbeats arriving through it prove the agent got the same
URL (and that the lab approved its own agent: other hosts' heartbeats are refused).
The lab database is a throw-away SQLite file, read here with sqlite3.
"""

import os
import signal
import sqlite3
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import redis

from tests.agents.worker.conftest import SpareRedis, free_port
from tests.integration.conftest import REPO
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

LAB_START_TIMEOUT_S = 180
HEARD_FROM_HOST = "SELECT name, enrollment FROM runs_host WHERE name = ? AND last_seen IS NOT NULL"
STORAGE_OF_HOST = (
    "SELECT s.name, s.path FROM runs_storagetarget s JOIN runs_host h ON s.host_id = h.id"
    " WHERE h.name = ? ORDER BY s.name"
)


@dataclass
class ScriptsLab:
    """A `scripts/lab` process group and the places it writes to."""

    process: subprocess.Popen
    database: Path
    log_dir: Path
    output: Path
    agent_name: str
    env: dict[str, str]

    def host_row(self) -> tuple | None:
        if not self.database.exists():
            return None
        with sqlite3.connect(self.database, timeout=5) as db:
            try:
                return db.execute(HEARD_FROM_HOST, (self.agent_name,)).fetchone()
            except sqlite3.OperationalError:  # not migrated yet
                return None

    def storage_targets(self) -> list[tuple[str, str]]:
        with sqlite3.connect(self.database, timeout=5) as db:
            return db.execute(STORAGE_OF_HOST, (self.agent_name,)).fetchall()

    def logs(self) -> str:
        paths = [self.output, *sorted(self.log_dir.glob("*.log"))]
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
            for path in paths
            if path.exists()
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def lab_environment(redis_url: str, workdir: Path, storage: Path, port: int) -> dict[str, str]:
    """The environment a person would set, plus places of the test's own for state and logs."""
    inherited = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("BENCHLAB_", "DATABASE_URL", "REDIS_URL", "DJANGO_"))
    }
    return {
        **inherited,
        "REDIS_URL": redis_url,
        "DATABASE_URL": f"sqlite:///{workdir / 'lab.sqlite3'}",
        "BENCHLAB_PORT": str(port),
        "BENCHLAB_AGENT_NAME": f"lab-{port}",
        "BENCHLAB_AGENT_STORAGE": str(storage / "data"),
        "BENCHLAB_AGENT_WAL_STORAGE": str(storage / "wal"),
        "BENCHLAB_AGENT_DIR": str(workdir / "agent-state"),
        "BENCHLAB_LOG_DIR": str(workdir / "log"),
        "BENCHLAB_ADMIN_PASSWORD": "lab-test-password",
    }


@pytest.fixture
def scripts_lab(own_redis: SpareRedis, tmp_path: Path) -> Iterator[ScriptsLab]:
    with started_lab(own_redis.url, tmp_path) as lab:
        yield lab


@contextmanager
def started_lab(redis_url: str, tmp_path: Path) -> Iterator[ScriptsLab]:
    """`scripts/lab` started with REDIS_URL `redis_url`, stopped on exit."""
    storage = Path(tempfile.mkdtemp(prefix="benchlab-scripts-lab-", dir="/var/tmp"))
    env = lab_environment(redis_url, tmp_path, storage, free_port())
    output = tmp_path / "lab.out"
    with output.open("wb") as out:
        process = subprocess.Popen(
            [str(REPO / "scripts" / "lab")],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    lab = ScriptsLab(
        process, tmp_path / "lab.sqlite3", tmp_path / "log", output, env["BENCHLAB_AGENT_NAME"], env
    )
    try:
        yield lab
    finally:
        lab.stop()
        subprocess.run(["rm", "-rf", str(storage)], check=False)


def test_scripts_lab_gives_the_local_agent_the_redis_of_redis_url(scripts_lab, own_redis):
    def registered() -> tuple | None:
        assert scripts_lab.process.poll() is None, "scripts/lab exited\n" + scripts_lab.logs()
        return scripts_lab.host_row()

    name, enrollment = wait_for(
        registered, LAB_START_TIMEOUT_S, "the local agent to register", scripts_lab.logs, 1.0
    )

    assert name == scripts_lab.agent_name
    assert enrollment == "approved", "the lab's own agent is approved at start"
    env = scripts_lab.env
    data, wal = env["BENCHLAB_AGENT_STORAGE"], env["BENCHLAB_AGENT_WAL_STORAGE"]
    assert scripts_lab.storage_targets() == [("default", data), ("wal", wal)]
    queues = own_redis.client().keys("_kombu.binding.*")
    assert f"_kombu.binding.agent.{name}" in queues, "the agent listens on the test's Redis"

    def beat_started() -> bool:
        log = scripts_lab.log_dir / "control.log"
        return log.exists() and "beat: Starting" in log.read_text(errors="replace")

    wait_for(
        beat_started, 60, "the control worker's beat (series schedules)", scripts_lab.logs, 1.0
    )


def test_scripts_lab_starts_with_debug_off_and_keeps_its_files_private(scripts_lab):
    wait_for(scripts_lab.host_row, LAB_START_TIMEOUT_S, "the lab to start", scripts_lab.logs, 1.0)
    url = f"http://127.0.0.1:{scripts_lab.env['BENCHLAB_PORT']}"

    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{url}/static/missing.js", timeout=30)
    with urllib.request.urlopen(f"{url}/static/app.css", timeout=30) as css:
        assert css.status == 200

    body = missing.value.read().decode(errors="replace")
    assert missing.value.code == 404
    for word in ("REDIS_URL", "DATABASE_URL", "DEBUG", "Traceback", scripts_lab.env["REDIS_URL"]):
        assert word not in body
    assert "DEBUG=false" in scripts_lab.output.read_text()
    assert (REPO / "var").stat().st_mode & 0o777 == 0o700
    assert (REPO / "var" / "secret-key").stat().st_mode & 0o777 == 0o600
    private = [scripts_lab.database, *scripts_lab.log_dir.glob("*.log")]
    assert {path.name: path.stat().st_mode & 0o777 for path in private} == {
        path.name: 0o600 for path in private
    }


@contextmanager
def lab_redis_server(port: int) -> Iterator[None]:
    """Stop the redis-server scripts/lab started (daemonized) on `port`, and remove its files."""
    directory = REPO / "var" / "redis" / str(port)
    try:
        yield
    finally:
        pid_file = directory / "redis.pid"
        if pid_file.exists():
            server = psutil.Process(int(pid_file.read_text()))
            server.terminate()
            server.wait(timeout=30)
        subprocess.run(["rm", "-rf", str(directory)], check=False)


def environment_of(lab: ScriptsLab, program: str) -> dict[str, str]:
    """The environment of the lab's process whose command line names `program`."""
    for process in psutil.Process(lab.process.pid).children(recursive=True):
        if program in " ".join(process.cmdline()):
            return process.environ()
    raise AssertionError(f"no {program} process in the lab\n{lab.logs()}")


def test_scripts_lab_starts_its_own_redis_with_a_password_it_gives_web_control_and_agent(
    tmp_path: Path,
) -> None:
    port = free_port()
    with (
        lab_redis_server(port),
        started_lab(f"redis://127.0.0.1:{port}/0", tmp_path) as lab,
    ):
        wait_for(lab.host_row, LAB_START_TIMEOUT_S, "the local agent to register", lab.logs, 1.0)

        password_file = REPO / "var" / "redis-password"
        password = password_file.read_text().strip()
        url = f"redis://:{password}@127.0.0.1:{port}/0"
        assert password_file.stat().st_mode & 0o777 == 0o600
        conf = REPO / "var" / "redis" / str(port) / "redis.conf"
        assert conf.stat().st_mode & 0o777 == 0o600
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port).ping()
        queues = redis.Redis(port=port, password=password, decode_responses=True).keys()
        assert f"_kombu.binding.agent.{lab.agent_name}" in queues, "the agent uses that Redis"
        for program in ("uvicorn", "celery", "agents worker"):
            assert environment_of(lab, program)["REDIS_URL"] == url, program
        command_lines = [
            " ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])
        ]
        assert not [line for line in command_lines if password in line], "no password in ps"
        redis_log = (REPO / "var" / "redis" / str(port) / "redis.log").read_text()
        assert password not in lab.logs() + redis_log
        assert "lab: redis    redis://:***@127.0.0.1" in lab.output.read_text()
