"""A run with a client host: two real agent processes on real Redis, real PostgreSQL 16 and
real pgbench. Each agent has its own name, state directory and storage target; the server
half listens on 127.0.0.1 over TCP and the client half's pgbench connects there."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery

from agents.config import AgentConfig
from agents.contract.signing import sign
from agents.contract.wire import EVENTS_STREAM_ENV, agent_queue
from agents.identity import load_or_create_identity
from tests.agents.jobs import small_spec
from tests.agents.worker.test_worker import celery_client, run_events
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
TIMEOUT_S = 120


class PairedAgent:
    """`python -m agents worker` with a state directory and storage target of its own
    (the prebuilt PostgreSQL cache is shared through a link, so nothing is downloaded)."""

    def __init__(self, root: Path, role: str, stream: str) -> None:
        self.name = f"{role}-{uuid.uuid4().hex[:6]}"
        self.state_dir = root / f"{role}-state"
        self.storage = root / f"{role}-storage"
        for directory in (self.state_dir, self.storage):
            directory.mkdir(mode=0o755)
        (self.state_dir / "cache").symlink_to(AgentConfig().cache_dir)
        self.identity = load_or_create_identity(self.state_dir, self.name)
        self.log_path = root / f"{role}.log"
        self.stream = stream
        self.process = self.start()

    def start(self) -> subprocess.Popen:
        argv = [sys.executable, "-m", "agents", "worker", "--name", self.name]
        argv += ["--state-dir", str(self.state_dir), "--storage", f"data={self.storage}"]
        argv += ["--advertise-address", "127.0.0.1"]
        with self.log_path.open("ab") as log:
            return subprocess.Popen(
                argv,
                cwd=REPO,
                env={**os.environ, EVENTS_STREAM_ENV: self.stream, "REDIS_URL": REDIS_URL},
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=TIMEOUT_S)


@pytest.fixture
def client():
    connection = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    yield connection
    connection.close()


@pytest.fixture
def pair(client) -> Iterator[tuple[PairedAgent, PairedAgent]]:
    root = Path(tempfile.mkdtemp(prefix="benchlab-pair-", dir="/var/tmp"))
    root.chmod(0o755)
    stream = f"test:events:{uuid.uuid4().hex[:12]}"
    server, client_agent = PairedAgent(root, "server", stream), PairedAgent(root, "client", stream)
    for agent in (server, client_agent):
        wait_for(lambda a=agent: f"agent {a.name}: serving queue" in a.log(), TIMEOUT_S, "start")
    yield server, client_agent
    for agent in (server, client_agent):
        agent.stop()
        client.delete(agent_queue(agent.name), f"_kombu.binding.{agent_queue(agent.name)}")
    client.delete(stream)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def lab() -> Iterator[Celery]:
    celery = celery_client(REDIS_URL)
    yield celery
    celery.close()


def start_run(lab: Celery, server: PairedAgent, client_agent: PairedAgent, duration_s: int) -> str:
    """Send both halves of one run, as the lab does: one spec, one token, two roles."""
    run_id = f"r-pair-{uuid.uuid4().hex[:10]}"
    spec = small_spec(
        run_id=run_id,
        token=f"tok-{run_id}",
        storage={"wal": None},
        sweep={"clients": [2], "duration_s": duration_s},
    )
    halves = (
        (server, {"role": "server", "peer": client_agent.name, "join_timeout_s": 60}),
        (client_agent, {"role": "client", "peer": server.name, "join_timeout_s": 60}),
    )
    for agent, network in halves:
        signed = sign("job", {**spec, "network": network}, agent.identity.secret)
        lab.send_task("benchlab.agent.run_job", args=[signed], queue=agent_queue(agent.name))
    return run_id


def result_of(client, server: PairedAgent, run_id: str) -> dict:
    def result() -> list[dict]:
        events = run_events(client, server.stream, run_id)
        return [event["data"] for event in events if event["type"] == "result"]

    return wait_for(result, TIMEOUT_S, "the run's result", server.log, interval=0.5)[0]


def measuring(client, server: PairedAgent, run_id: str) -> bool:
    return any(e["type"] == "progress" for e in run_events(client, server.stream, run_id))


def clusters_in(storage: Path) -> list[Path]:
    return list(storage.glob("benchlab-*"))


def test_a_run_with_a_client_host_measures_over_tcp_and_keeps_both_hosts_samples(pair, lab, client):
    server, client_agent = pair
    run_id = start_run(lab, server, client_agent, duration_s=2)

    result = result_of(client, server, run_id)

    assert result["status"] == "succeeded", result["error"]
    (point,) = result["points"]
    argv = point["argv"]
    assert argv[argv.index("-h") + 1] == "127.0.0.1", "TCP, never the server's socket"
    assert point["tps"] > 0 and point["latency_percentiles_ms"]["sampled_transactions"] > 0
    assert point["host_samples"] and point["server_samples"], "the server host samples itself"
    assert point["client_host_samples"], "the client host samples itself"
    network = result["network"]
    assert network["transport"] == "tcp" and network["server_address"] == "127.0.0.1"
    assert 0 < network["select1_ms"] < 100
    events = run_events(client, server.stream, run_id)
    assert {event["agent"] for event in events} == {server.name}
    assert any("client_host" in e["data"] for e in events if e["type"] == "sample")
    assert clusters_in(server.storage) == []


def test_killing_the_client_agent_fails_the_run_naming_it_and_removes_the_cluster(
    pair, lab, client
):
    server, client_agent = pair
    run_id = start_run(lab, server, client_agent, duration_s=60)
    wait_for(lambda: measuring(client, server, run_id), TIMEOUT_S, "measuring", server.log)

    client_agent.kill()
    result = result_of(client, server, run_id)

    assert result["status"] == "failed"
    assert result["error"]["code"] == "peer_lost"
    assert client_agent.name in result["error"]["message"]
    assert clusters_in(server.storage) == []


def test_killing_the_server_agent_stops_the_client_half(pair, lab, client):
    server, client_agent = pair
    run_id = start_run(lab, server, client_agent, duration_s=60)
    wait_for(lambda: measuring(client, server, run_id), TIMEOUT_S, "measuring", server.log)

    server.kill()

    wait_for(
        lambda: f"run {run_id}: client half cancelled" in client_agent.log(),
        30,
        "the client half to stop",
        client_agent.log,
    )
    server.process = server.start()
    wait_for(lambda: not clusters_in(server.storage), TIMEOUT_S, "the left cluster removed")
