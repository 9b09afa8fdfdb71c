"""A run with a client host end to end: the API, the control worker and two real agent
processes (each with its own name, state directory and storage target), real Redis, real
PostgreSQL 16 and real pgbench. The server half listens on 127.0.0.1 over TCP and the
client half's pgbench connects there; killing either agent ends the run naming it."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.config import AgentConfig
from agents.contract.wire import agent_queue
from agents.worker.identity import load_or_create_identity
from runs import services
from runs.models import Host, HostSample, Run
from tests.integration.conftest import REPO, Lab, running_lab
from tests.integration.faults import PACED_TPS
from tests.integration.test_lab import create, start
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


class ClientAgent:
    """A second `python -m agents worker`, enrolled with the lab as the client host."""

    def __init__(
        self,
        lab: Lab,
        prefix: tuple[str, ...] = (),
        redis_url: str = "",
        args: tuple[str, ...] = (),
    ) -> None:
        """`prefix` goes before the command (`ip netns exec NS`), `args` after it;
        `redis_url` is the lab's Redis as this host reaches it (default: `lab.redis_url`)."""
        self.lab = lab
        self.name = f"client-{uuid.uuid4().hex[:6]}"
        self.root = Path(tempfile.mkdtemp(prefix=f"benchlab-{self.name}-", dir="/var/tmp"))
        self.root.chmod(0o755)
        self.state_dir = self.root / "state"
        self.state_dir.mkdir(mode=0o755)
        (self.state_dir / "cache").symlink_to(AgentConfig().cache_dir)
        identity = load_or_create_identity(self.state_dir, self.name)
        services.host_enroll(self.name, identity.secret)
        self.log_path = lab.log_dir / f"{self.name}.log"
        argv = [*prefix, sys.executable, "-m", "agents", "worker", "--name", self.name]
        argv += ["--redis-url", redis_url or lab.redis_url, "--state-dir", str(self.state_dir)]
        self.argv = [*argv, "--storage", f"default={self.root / 'storage'}", *args]
        self.start()

    def start(self) -> None:
        """Start the agent worker (again, after `kill`: the same name and state directory)."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv, cwd=REPO, env=self.lab.env, stdout=log, stderr=subprocess.STDOUT
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_registered(self) -> Host:
        registered = Host.objects.filter(name=self.name, storage_targets__name="default")
        return wait_for(registered.first, 60, f"agent {self.name} to register", self.log)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)
        self.lab.redis.delete(agent_queue(self.name))
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def pair(transactional_db, tmp_path) -> Iterator[tuple[Lab, ClientAgent]]:
    with running_lab(tmp_path) as lab:
        client = ClientAgent(lab)
        try:
            client.wait_registered()
            yield lab, client
        finally:
            client.close()


def experiment(
    api, lab: Lab, client: Host, duration_s: int, rate_tps: float | None = None, warmup_s: int = 0
) -> int:
    """A TPC-B-like point at 2 clients on the lab's host, pgbench on `client` (paced to
    `rate_tps` if given, after a warm-up of `warmup_s`); the experiment's id."""
    server = lab.wait_registered()
    build = create(
        api, "builds", {"name": f"pg16-{duration_s}", "version": "16", "source": "prebuilt"}
    )
    profile = create(api, "config-profiles", {"name": f"defaults-{duration_s}", "settings": {}})
    workload = create(
        api,
        "workloads",
        {
            "name": f"tpcb-{duration_s}",
            "scale": 1,
            "scripts": [{"builtin": "tpcb-like", "weight": 1}],
            "rate_tps": rate_tps,
        },
    )
    created = create(
        api,
        "experiments",
        {
            "name": "client host",
            "hosts": [server.pk],
            "client_host": client.pk,
            "builds": [build["id"]],
            "config_profiles": [profile["id"]],
            "workloads": [workload["id"]],
            "clients": [2],
            "duration_s": duration_s,
            "warmup_s": warmup_s,
        },
    )
    return created["id"]


def clusters(lab: Lab) -> list[Path]:
    return list(lab.storage.glob("benchlab-*"))


def test_a_client_host_measures_over_tcp_and_losing_it_fails_the_run_naming_it(pair, api):
    lab, client = pair
    client_host = client.wait_registered()
    (run_id,) = start(api, experiment(api, lab, client_host, duration_s=2, warmup_s=1))

    run = lab.wait_terminal(run_id)

    assert run.status == Run.Status.SUCCEEDED, run.error_message
    steps = run.events.filter(type="step", payload__name="warmup")
    warm_ups = {event.payload["message"] for event in steps}
    assert "warming up for 1 s on the client at 2 clients" in warm_ups, warm_ups
    (result,) = run.results.all()
    assert result.argv[result.argv.index("-h") + 1] == "127.0.0.1", "TCP, not the socket"
    assert run.host_samples.filter(role=HostSample.Role.SERVER).exists()
    assert run.server_samples.exists()
    client_samples = run.host_samples.filter(role=HostSample.Role.CLIENT)
    assert client_samples.exists(), "the client host samples itself"
    assert run.network["transport"] == "tcp" and run.network["select1_ms"] > 0
    # The server half counts its server around the client's pgbench.
    per_transaction = result.counters["per_transaction"]
    assert per_transaction["wal.bytes"] > 0 and per_transaction["os.pgbench_cpu_s"] > 0
    # Read before the client's pgbench started and after it ended: one commit each.
    assert 0.95 < per_transaction["db.xact_commit"] < 1.1, per_transaction
    page = api.get(f"/api/runs/{run_id}/").json()
    assert page["client_host"] == client.name

    (second,) = start(api, experiment(api, lab, client_host, 60, rate_tps=PACED_TPS))
    lab.wait_run(second, lambda r: r.progress.exists(), "to measure")
    client.kill()
    failed = lab.wait_terminal(second, timeout=60)

    assert failed.status == Run.Status.FAILED
    assert failed.error_code == "peer_lost"
    assert client.name in failed.error_message
    assert clusters(lab) == [], "the server half removed its cluster"


def test_losing_the_server_agent_fails_the_run_naming_it_and_stops_the_client_half(pair, api):
    lab, client = pair
    host = client.wait_registered()
    (run_id,) = start(api, experiment(api, lab, host, 60, rate_tps=PACED_TPS))
    lab.wait_run(run_id, lambda r: r.progress.exists(), "to measure")

    lab.kill_agent()

    # About 5 s on a quiet machine (the server's liveness key expires, then pgbench's SIGALRM);
    # where the client never saw that key, the cancel flag the lab sets when it fails the run
    # as agent_lost (after the 12 s grace here) stops it instead. Where the server's
    # PostgreSQL went with its agent, the client's pgbench fails first: the half ends failed.
    wait_for(
        lambda: re.search(r"client half (cancelled|failed)", client.log()),
        90,
        "the client half to stop",
        client.log,
    )
    failed = lab.wait_terminal(run_id, timeout=60)
    assert failed.error_code == "agent_lost"
    assert lab.name in failed.error_message
    lab.start_agent()
    wait_for(lambda: not clusters(lab), 60, "the restarted agent to remove the cluster", lab.logs)
    assert os.path.isdir(lab.storage)
