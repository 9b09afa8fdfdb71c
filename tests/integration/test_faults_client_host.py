"""Runs with a client host under the faults a run without one survives: the lab's Redis
down for a minute (ridden out), down past the agents' grace (the run fails naming the
outage), a cancel, and the client agent SIGKILLed. Real control worker, two real agents
(the server host and the client host), real PostgreSQL 16 and pgbench over TCP, and a
redis-server of the test's own (appendonly, so a stop keeps its data); the test process
is the web tier on that Redis.

Whatever the ending, nothing of the run is left on either host: no server, pgbench or
sandbox process (psutil), no cluster or scratch directory, no message waiting in a spool.
Each test logs its `time to recover` (docs/reliability.md).
"""

import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from agents.config import default_state_dir
from runs.models import Host, Run
from tests.agents.worker.conftest import SpareRedis
from tests.integration.api import create, start
from tests.integration.conftest import Lab, running_lab
from tests.integration.faults import (
    PACED_TPS,
    all_final,
    assert_measured_once,
    assert_no_orphans,
    assert_stored_once,
    recovered,
)
from tests.integration.test_client_host_lab import ClientAgent
from tests.integration.test_redis_loss import web_tier_on  # noqa: F401 - a fixture
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.faults]

# The lab's documented defaults: an outage shorter than AGENT_LOST_GRACE_S fails no run.
ENV = {"HEARTBEAT_OFFLINE_AFTER_S": "30", "AGENT_LOST_GRACE_S": "90", "REAPER_INTERVAL_S": "1"}
OUTAGE_S = 60
# The agents' --redis-grace in the test of an outage past it (the lab's grace stays 90 s,
# so the agent's reason, not the lab's `agent_lost`, ends the run).
SHORT_GRACE_S = 10
LONG_OUTAGE_S = 25


@contextmanager
def pair_on(
    tmp_path: Path, redis: SpareRedis, agent_args: list[str]
) -> Iterator[tuple[Lab, ClientAgent]]:
    """The lab with its server host and a client host, every process on `redis`."""
    with running_lab(tmp_path, redis.url, ENV, agent_args) as lab:
        client = ClientAgent(lab, args=tuple(agent_args))
        try:
            client.wait_registered()
            yield lab, client
        finally:
            client.close()


@pytest.fixture
def pair(transactional_db, tmp_path, own_redis, web_tier_on) -> Iterator[tuple[Lab, ClientAgent]]:  # noqa: F811
    with pair_on(tmp_path, own_redis, []) as both:
        yield both


@pytest.fixture
def impatient_pair(
    transactional_db,
    tmp_path,
    own_redis,
    web_tier_on,  # noqa: F811
) -> Iterator[tuple[Lab, ClientAgent]]:
    with pair_on(tmp_path, own_redis, ["--redis-grace", str(SHORT_GRACE_S)]) as both:
        yield both


def client_host_run(api, lab: Lab, client: ClientAgent, points: int, duration_s: int) -> int:
    """Start a run of `points` points of `duration_s` on the lab's host, pgbench on the
    client host paced to PACED_TPS (the runs only have to last through the faults); its id."""
    tag = uuid.uuid4().hex[:6]
    build = create(api, "builds", {"name": f"pg16-{tag}", "version": "16", "source": "prebuilt"})
    profile = create(api, "config-profiles", {"name": f"pair-{tag}", "settings": {}})
    workload = create(
        api,
        "workloads",
        {
            "name": f"pair-{tag}",
            "scale": 1,
            "scripts": [{"builtin": "tpcb-like", "weight": 1}],
            "rate_tps": PACED_TPS,
        },
    )
    payload = {
        "name": f"pair {tag}",
        "hosts": [lab.wait_registered().pk],
        "client_host": client.wait_registered().pk,
        "builds": [build["id"]],
        "config_profiles": [profile["id"]],
        "workloads": [workload["id"]],
        "clients": list(range(1, points + 1)),
        "duration_s": duration_s,
    }
    (run_id,) = start(api, create(api, "experiments", payload)["id"])
    return run_id


def client_leftovers(client: ClientAgent) -> list[str]:
    """What a client half left on its host: a process started under its directory (pgbench,
    its sandbox), a scratch directory, a message waiting in a spool."""
    found = [
        f"process {p.pid}: {' '.join(p.info['cmdline'])}"
        for p in psutil.process_iter(["cmdline"])
        if str(client.root) in " ".join(p.info["cmdline"] or []) and p.pid != client.process.pid
    ]
    found += [str(path) for path in (client.state_dir / "client").glob("benchlab-*")]
    return found + pair_spools(client.state_dir)


def pair_spools(state_dir: Path) -> list[str]:
    return [str(path) for path in (state_dir / "spool").glob("benchlab:pair:*")]


def assert_nothing_left(lab: Lab, client: ClientAgent) -> None:
    """No server, cluster or spooled message on the server host, nothing on the client host."""
    assert_no_orphans(lab)
    wait_for(lambda: not client_leftovers(client), 30, "the client half's leftovers to go",
             lambda: str(client_leftovers(client)))  # fmt: skip
    assert pair_spools(default_state_dir()) == []


def test_a_client_host_run_rides_out_a_minute_without_redis_measured_once(api, pair, own_redis):
    lab, client = pair
    run_id = client_host_run(api, lab, client, points=2, duration_s=10)
    lab.wait_run(run_id, lambda r: r.progress.exists(), "to measure")

    own_redis.stop()
    down = time.monotonic()
    wait_for(lambda: time.monotonic() - down >= OUTAGE_S, OUTAGE_S + 5, "the outage to last",
             interval=1)  # fmt: skip
    host = Host.objects.get(name=lab.name)
    seen_offline = not host.is_online
    still_running = Run.objects.get(pk=run_id).status == Run.Status.RUNNING
    own_redis.start()
    back = time.monotonic()
    (run,) = all_final(lab, [run_id], within_s=120)
    recovered("client-host run, Redis down 60 s: run final", back)

    assert seen_offline and still_running
    assert run.status == Run.Status.SUCCEEDED, f"{run.error_message}\n{lab.logs()}\n{client.log()}"
    assert run.results.count() == 2
    assert run.host_samples.filter(role="client").exists()
    assert_stored_once(run)
    assert_measured_once(lab, [run])
    assert_nothing_left(lab, client)


def test_a_client_host_run_without_redis_past_the_grace_fails_naming_the_outage(
    api, impatient_pair, own_redis
):
    lab, client = impatient_pair
    run_id = client_host_run(api, lab, client, points=1, duration_s=20)
    lab.wait_run(run_id, lambda r: r.progress.exists(), "to measure")

    own_redis.stop()
    down = time.monotonic()
    wait_for(lambda: time.monotonic() - down >= LONG_OUTAGE_S, LONG_OUTAGE_S + 5,
             "the outage to last", interval=1)  # fmt: skip
    own_redis.start()
    back = time.monotonic()
    (run,) = all_final(lab, [run_id], within_s=90)
    recovered("client-host run, Redis down past the grace: run final", back)

    assert run.status == Run.Status.FAILED
    assert run.error_code == "redis_lost", f"{run.error_message}\n{lab.logs()}\n{client.log()}"
    assert "lost Redis for" in run.error_message
    assert_stored_once(run)
    assert_nothing_left(lab, client)
    # Both hosts take the next run, and it measures alone on them.
    (next_run,) = all_final(lab, [client_host_run(api, lab, client, 1, 2)], within_s=90)
    assert next_run.status == Run.Status.SUCCEEDED, next_run.error_message
    assert_nothing_left(lab, client)


def test_a_client_host_run_cancelled_its_agent_stopped_or_its_client_killed_leaves_nothing(
    api, pair
):
    lab, client = pair
    cancelled = client_host_run(api, lab, client, points=1, duration_s=60)
    lab.wait_run(cancelled, lambda r: r.progress.exists(), "to measure")
    asked = time.monotonic()
    assert api.post(f"/api/runs/{cancelled}/cancel/").status_code == 200
    assert Run.objects.get(pk=cancelled).status == Run.Status.CANCELLED
    assert_nothing_left(lab, client)
    recovered("client-host run cancelled: nothing left on either host", asked)

    # SIGTERM is the worker's warm shutdown: the job ends as it would, then the agent exits.
    stopped = client_host_run(api, lab, client, points=1, duration_s=4)
    lab.wait_run(stopped, lambda r: r.progress.exists(), "to measure")
    lab.agent.send_signal(signal.SIGTERM)
    lab.agent.wait(timeout=60)
    (run,) = all_final(lab, [stopped], within_s=30)
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    assert_nothing_left(lab, client)
    lab.start_agent()

    killed = client_host_run(api, lab, client, points=1, duration_s=60)
    lab.wait_run(killed, lambda r: r.progress.exists(), "to measure")
    client.kill()
    gone = time.monotonic()
    (run,) = all_final(lab, [killed], within_s=60)
    recovered("client agent SIGKILLed: run final", gone)

    assert (run.status, run.error_code) == (Run.Status.FAILED, "peer_lost")
    assert client.name in run.error_message
    assert_no_orphans(lab)
    assert pair_spools(default_state_dir()) == []
    # What the killed client half left (its scratch directory) goes when its agent starts.
    assert list((client.state_dir / "client").glob("benchlab-*")), "the scratch directory"
    client.start()
    wait_for(lambda: not client_leftovers(client), 60, "the restarted client agent to clean up",
             lambda: f"{client_leftovers(client)}\n{client.log()}")  # fmt: skip
