"""The lab for real: a control worker and an agent as separate processes.

- `lab`: starts `celery -A benchlab worker -Q control` (Django, the test
  database, a stream of its own) and `python -m agents worker` (no Django, only
  Redis), both as subprocesses, approves the agent's identity (as scripts/lab
  does for its own agent), waits until the agent has registered through the
  event stream, and stops both afterwards. The test process plays the web
  tier: it talks to the API in-process, and its commits reach the workers'
  database connections because the tests use `transactional_db`.
- `own_redis`: a redis-server of the test's own on a free port.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
import redis
from django.conf import settings
from django.db import connection
from rest_framework.test import APIClient

from agents.config import default_state_dir
from agents.contract.wire import EVENTS_STREAM_ENV, agent_queue, dead_letter_stream
from agents.worker.identity import load_or_create_identity
from runs import services
from runs.models import Host, Run
from runs.services.access.tokens import api_token_create
from tests.agents.worker.conftest import SpareRedis
from tests.runs.factories import UserFactory
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
TERMINAL = {Run.Status.SUCCEEDED, Run.Status.FAILED, Run.Status.CANCELLED}
# How often a wait on a run's or a host's row reads the database. A run changes state in
# seconds; at wait_for's 0.05 s a read (4.4 to 5.2 ms of this process's CPU and 31 to 35 ms
# of wall at load 16, docs/benchmarks.md) took about 5 % of a CPU from the lab under test.
ROW_POLL_S = 0.25


def database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] or "postgres"
    if db["PASSWORD"]:
        auth += f":{db['PASSWORD']}"
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Lab:
    """The control worker and one agent, with the knobs the tests turn.

    The agent's identity is created here, in the state directory the agent
    process uses, so a test can approve it (`approve`) or sign as it would.
    """

    def __init__(self, log_dir: Path, redis_url: str | None = None):
        # Options added to the agent worker's command line (its local config).
        self.agent_args: list[str] = []
        self.name = f"it-{uuid.uuid4().hex[:8]}"
        self.stream = f"benchlab:test-events:{self.name}"
        self.log_dir = log_dir
        self.storage = Path(tempfile.mkdtemp(prefix=f"benchlab-{self.name}-", dir="/var/tmp"))
        self.storage.chmod(0o755)
        self.redis_url = redis_url or settings.REDIS_URL
        self.redis = redis.Redis.from_url(self.redis_url)
        self.identity = load_or_create_identity(default_state_dir(), self.name)
        self.control: subprocess.Popen | None = None
        self.agent: subprocess.Popen | None = None
        # Every agent process started: what a killed one left is found (integration/faults.py).
        self.agent_pids: list[int] = []
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "REDIS_URL": self.redis_url,
            EVENTS_STREAM_ENV: self.stream,
            "HEARTBEAT_OFFLINE_AFTER_S": "8",
            "AGENT_LOST_GRACE_S": "12",
            "REAPER_INTERVAL_S": "2",
            "PYTHONUNBUFFERED": "1",
        }

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(
            argv, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        if name == "agent":
            self.agent_pids.append(process.pid)
        return process

    def start_control(self) -> None:
        self.control = self._spawn(
            "control",
            [sys.executable, "-m", "celery", "-A", "benchlab", "worker", "-Q", "control",
             "--concurrency", "1", "--pool", "solo", "-n", f"control-{self.name}@%h",
             "--without-gossip", "--without-mingle", "--loglevel", "info"],
        )  # fmt: skip

    def start_agent(self) -> None:
        self.agent = self._spawn(
            "agent",
            [sys.executable, "-m", "agents", "worker", "--name", self.name,
             "--redis-url", self.redis_url,
             "--storage", f"default={self.storage}", *self.agent_args],
        )  # fmt: skip

    def stop_control(self) -> None:
        _terminate(self.control)
        self.control = None

    def kill_control(self) -> None:
        """SIGKILL the control worker's process group, as a crash or an OOM kill would."""
        os.killpg(self.control.pid, signal.SIGKILL)
        self.control.wait(timeout=10)
        self.control = None

    def kill_agent(self) -> None:
        """SIGKILL the agent worker, as a crash of the host would stop it."""
        self.agent.send_signal(signal.SIGKILL)
        self.agent.wait(timeout=10)
        self.agent = None

    def approve(self) -> Host:
        """Approve the agent's identity, as scripts/lab does for its own agent."""
        return services.host_enroll(self.name, self.identity.secret)

    def wait_registered(self) -> Host:
        """The approved host once its registration is stored (its storage target exists)."""
        registered = Host.objects.filter(
            name=self.name, enrollment=Host.Enrollment.APPROVED, storage_targets__name="default"
        )
        return wait_for(
            registered.first, 60, f"agent {self.name} to register", self.logs, ROW_POLL_S
        )

    def wait_run(self, run_id: int, condition, what: str, timeout: float = 120) -> Run:
        def check():
            run = Run.objects.get(pk=run_id)
            return run if condition(run) else None

        return wait_for(check, timeout, f"run {run_id} {what}", self.logs, ROW_POLL_S)

    def wait_terminal(self, run_id: int, timeout: float = 120) -> Run:
        return self.wait_run(run_id, lambda run: run.status in TERMINAL, "to end", timeout)

    def stream_backlog(self) -> int:
        return self.redis.xlen(self.stream)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}"
            for path in sorted(self.log_dir.glob("*.log"))
        )

    def close(self) -> None:
        _terminate(self.agent, self.control)
        for process in psutil.process_iter(["cmdline"]):
            if str(self.storage) in " ".join(process.info["cmdline"] or []):
                process.kill()
        self.redis.delete(self.stream, dead_letter_stream(self.stream), agent_queue(self.name))
        self.redis.close()
        shutil.rmtree(self.storage, ignore_errors=True)
        self.identity.path.unlink(missing_ok=True)
        shutil.rmtree(default_state_dir() / "ledger" / self.name, ignore_errors=True)
        self.identity.confirmed_path.unlink(missing_ok=True)
        (default_state_dir() / "locks" / f"{self.name}.lock").unlink(missing_ok=True)


def _terminate(*processes: subprocess.Popen | None) -> None:
    """SIGTERM each process group, then wait for all: they shut down side by side (a
    Celery worker's warm shutdown takes seconds); a group still there after 30 s is killed."""
    running = [process for process in processes if process and process.poll() is None]
    for process in running:
        os.killpg(process.pid, signal.SIGTERM)
    for process in running:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@contextmanager
def running_lab(
    tmp_path: Path,
    redis_url: str | None = None,
    env: dict[str, str] | None = None,
    agent_args: list[str] | None = None,
) -> Iterator[Lab]:
    """A control worker and an approved agent that has registered; both stopped on exit.

    `env` adds to (or overrides) the environment both processes start with;
    `agent_args` add to the agent worker's command line.
    """
    lab = Lab(tmp_path, redis_url)
    lab.env.update(env or {})
    lab.agent_args = list(agent_args or [])
    try:
        lab.approve()
        lab.start_control()
        lab.start_agent()
        lab.wait_registered()
        yield lab
    finally:
        lab.close()


@pytest.fixture
def lab(transactional_db, tmp_path):
    with running_lab(tmp_path) as lab:
        yield lab


@pytest.fixture
def api(transactional_db) -> APIClient:
    client = APIClient()
    _row, token = api_token_create(UserFactory())
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[SpareRedis]:
    server = SpareRedis(tmp_path)
    server.start()
    yield server
    server.stop()
