"""Runs across network namespaces: real interfaces, links that go down, nothing lost.

The test builds three hosts on one machine (tests/netns.py): the lab (the root
namespace: the control worker, the test process as the web tier, and a
redis-server of the test's own listening on 127.0.0.1 and on the lab's end of
two veth pairs), the server host B and the client host C, each an agent worker
in a namespace of its own, with a veth pair B-C between them. Agents reach
Redis only over their veth, and a client host's pgbench reaches the server's
cluster only over B-C, so pg_hba, `--advertise-address` and scram-sha-256 work
on real interfaces. A partition is a link taken down (`ip link set ... down`):
packets are dropped silently, as when a cable or a switch fails.

Each test logs its figures (`time to recover ...`; pytest
`-o log_cli=true --log-cli-level=WARNING`); docs/reliability.md, "Networks".
"""

import logging
import secrets
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.contract.wire import dead_letter_stream
from benchlab.celery import app
from runs.models import Host, HostSample, Run
from tests.agents.worker.conftest import SpareRedis
from tests.integration.conftest import Lab
from tests.integration.faults import (
    PACED_TPS,
    assert_measured_once,
    assert_no_orphans,
    assert_stored_once,
    next_run_succeeds,
    recovered,
)
from tests.integration.test_client_host_lab import ClientAgent, clusters
from tests.integration.test_lab import create, start
from tests.integration.test_redis_loss import use_broker
from tests.netns import ROOT, Link, Network, network
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

logger = logging.getLogger(__name__)

PARTITION_S = 60


class NamespacedLab(Lab):
    """The lab's control worker in the root namespace, its agent (host B) inside `namespace`."""

    def __init__(self, log_dir: Path, redis_url: str, namespace: str, agent_redis_url: str):
        super().__init__(log_dir, redis_url)
        self.namespace = namespace
        self.agent_redis_url = agent_redis_url

    def start_agent(self) -> None:
        self.agent = self._spawn(
            "agent",
            [*Network.exec_argv(self.namespace), sys.executable, "-m", "agents", "worker",
             "--name", self.name, "--redis-url", self.agent_redis_url,
             "--storage", f"default={self.storage}", *self.agent_args],
        )  # fmt: skip


@dataclass
class Hosts:
    """The test's network and the lab on it: links lab-B, lab-C and B-C."""

    net: Network
    lab: NamespacedLab
    redis: SpareRedis
    to_b: Link
    to_c: Link
    b_c: Link

    def client(self) -> ClientAgent:
        """Host C's agent, advertising its end of B-C; the caller closes it."""
        return ClientAgent(
            self.lab,
            prefix=tuple(Network.exec_argv(self.namespace_c)),
            redis_url=self.redis.url.replace("127.0.0.1", self.to_c.left.address),
            args=("--advertise-address", self.b_c.right.address),
        )

    @property
    def namespace_c(self) -> str:
        return str(self.b_c.right.namespace)


@contextmanager
def lab_across_namespaces(tmp_path: Path, settings, env: dict[str, str]) -> Iterator[Hosts]:
    """The lab in the root namespace, an approved and registered agent in namespace B."""
    broker = app.conf.broker_url
    with network() as net:
        b, c = net.namespace(), net.namespace()
        to_b, to_c, b_c = net.link(ROOT, b), net.link(ROOT, c), net.link(b, c)
        binds = (to_b.left.address, to_c.left.address)
        redis = SpareRedis(tmp_path, binds, password=secrets.token_hex(16))
        redis.start()
        settings.REDIS_URL = redis.url
        use_broker(redis.url)
        agent_redis = redis.url.replace("127.0.0.1", to_b.left.address)
        lab = NamespacedLab(tmp_path, redis.url, b, agent_redis)
        lab.env.update(env)
        lab.agent_args = ["--advertise-address", b_c.left.address]
        try:
            lab.approve()
            lab.start_control()
            lab.start_agent()
            lab.wait_registered()
            yield Hosts(net, lab, redis, to_b, to_c, b_c)
        finally:
            lab.close()
            use_broker(broker)
            redis.stop()


@contextmanager
def client_host(hosts: Hosts) -> Iterator[ClientAgent]:
    client = hosts.client()
    try:
        client.wait_registered()
        yield client
    finally:
        client.close()


def experiment(
    api,
    server: Host,
    client: Host | None,
    clients: list[int],
    duration_s: int,
    rate_tps: float | None = None,
) -> int:
    """A TPC-B-like sweep on `server` (pgbench on `client` when given, paced to `rate_tps`
    if given); the experiment's id."""
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
    payload = {
        "name": "across namespaces",
        "hosts": [server.pk],
        "builds": [build["id"]],
        "config_profiles": [profile["id"]],
        "workloads": [workload["id"]],
        "clients": clients,
        "duration_s": duration_s,
    }
    if client is not None:
        payload["client_host"] = client.pk
    return create(api, "experiments", payload)["id"]


@pytest.fixture
def hosts(transactional_db, tmp_path, settings) -> Iterator[Hosts]:
    with lab_across_namespaces(tmp_path, settings, {}) as hosts:
        yield hosts


def test_a_client_host_in_another_namespace_measures_over_its_own_interface(hosts, api):
    lab = hosts.lab
    with client_host(hosts) as client:
        exp = experiment(api, lab.wait_registered(), client.wait_registered(), [2], duration_s=3)
        (run_id,) = start(api, exp)

        run = lab.wait_terminal(run_id)

    assert run.status == Run.Status.SUCCEEDED, run.error_message
    (result,) = run.results.all()
    server_address, client_address = hosts.b_c.left.address, hosts.b_c.right.address
    assert result.argv[result.argv.index("-h") + 1] == server_address, "B's interface, over TCP"
    assert run.network["server_address"] == server_address
    assert run.network["client_address"] == client_address
    assert run.network["transport"] == "tcp" and run.network["select1_ms"] > 0
    assert run.host_samples.filter(role=HostSample.Role.CLIENT).exists()
    assert clusters(lab) == []
    assert_stored_once(run)


@pytest.mark.faults
def test_a_client_host_cut_off_from_its_server_mid_point_fails_the_run_keeping_points(hosts, api):
    lab = hosts.lab
    with client_host(hosts) as client:
        exp = experiment(
            api, lab.wait_registered(), client.wait_registered(), [1, 2], 10, rate_tps=PACED_TPS
        )
        (run_id,) = start(api, exp)
        lab.wait_run(run_id, lambda r: r.progress.filter(point=1).exists(), "to measure point 2")

        hosts.net.down(hosts.b_c.left)
        cut = time.monotonic()
        run = lab.wait_terminal(run_id, timeout=120)
        recovered("client cut off from its server: run final", cut)

    assert run.status == Run.Status.FAILED
    assert run.error_code == "peer_lost", run.error_message
    assert hosts.b_c.left.address in run.error_message and client.name in run.error_message
    assert list(run.results.values_list("index", flat=True)) == [0], "the finished point is kept"
    wait_for(lambda: clusters(lab) == [], 30, "the server half to remove its cluster", lab.logs)
    assert_stored_once(run)
    assert_measured_once(lab, [run])
    assert_no_orphans(lab)
    ended = time.monotonic()
    next_run_succeeds(api, lab)  # B's queue moves, the link to C still down
    recovered("client cut off from its server: B's next run", ended)


@pytest.fixture
def hosts_default_grace(transactional_db, tmp_path, settings) -> Iterator[Hosts]:
    """The documented defaults: offline after 30 s without a heartbeat, runs failed after 90 s."""
    env = {"HEARTBEAT_OFFLINE_AFTER_S": "30", "AGENT_LOST_GRACE_S": "90"}
    settings.HEARTBEAT_OFFLINE_AFTER_S = 30
    with lab_across_namespaces(tmp_path, settings, env) as hosts:
        yield hosts


@pytest.mark.faults
def test_an_agent_cut_off_from_redis_for_a_minute_finishes_its_run_storing_everything_once(
    hosts_default_grace, api
):
    hosts = hosts_default_grace
    lab = hosts.lab
    server = lab.wait_registered()
    (run_id,) = start(api, experiment(api, server, None, [1, 2, 4], 25, rate_tps=PACED_TPS))
    lab.wait_run(run_id, lambda r: r.progress.exists(), "to measure")

    hosts.net.down(hosts.to_b.left)
    time.sleep(PARTITION_S)
    seen_offline = not Host.objects.get(pk=server.pk).is_online
    running = Run.objects.get(pk=run_id).status == Run.Status.RUNNING
    hosts.net.up(hosts.to_b.left)
    back = time.monotonic()
    wait_for(lambda: Host.objects.get(pk=server.pk).is_online, 60, "a heartbeat", lab.logs)
    online_after = time.monotonic() - back
    run = lab.wait_terminal(run_id, timeout=120)
    final_after = time.monotonic() - back

    logger.warning(
        "time to recover, agent cut off from Redis for %s s: heartbeat after %.1f s, "
        "run final %.1f s after the link came back",
        PARTITION_S,
        online_after,
        final_after,
    )
    assert seen_offline, "a host silent for longer than HEARTBEAT_OFFLINE_AFTER_S shows offline"
    assert running, "a partition shorter than AGENT_LOST_GRACE_S does not fail the run"
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    assert sorted(run.results.values_list("clients", flat=True)) == [1, 2, 4]
    assert_stored_once(run)
    assert run.progress.values("point").distinct().count() == 3
    assert lab.redis.xlen(dead_letter_stream(lab.stream)) == 0, "no event was refused"
    assert_measured_once(lab, [run])
    assert_no_orphans(lab)
    next_run_succeeds(api, lab)
