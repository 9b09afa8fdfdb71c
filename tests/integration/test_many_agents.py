"""Three agent processes on this machine, one control worker: each host runs one job at a
time while its other runs wait in its queue, and the hosts work at once."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agents.contract.wire import EVENTS_STREAM_ENV
from runs.models import Host, Run
from runs.queues import host_queues
from tests.integration.conftest import TERMINAL, Lab, running_lab
from tests.integration.test_lab import create, start

pytestmark = pytest.mark.integration

POLL_S = 0.2


@contextmanager
def more_agents(lab: Lab, log_dir: Path, count: int) -> Iterator[list[Lab]]:
    """`count` more approved agents sending their events to `lab`'s control worker."""
    extras: list[Lab] = []
    try:
        for n in range(count):
            (log_dir / f"agent-{n}").mkdir()
            extra = Lab(log_dir / f"agent-{n}", lab.redis_url)
            extra.stream = lab.stream
            extra.env[EVENTS_STREAM_ENV] = lab.stream
            extra.approve()
            extra.start_agent()
            extras.append(extra)
        for extra in extras:
            extra.wait_registered()
        yield extras
    finally:
        for extra in extras:
            extra.close()


def two_runs_per_host(api, hosts: list[Host]) -> list[int]:
    build = create(api, "builds", {"name": "pg16", "version": "16", "source": "prebuilt"})
    profiles = [create(api, "config-profiles", {"name": f"p{n}"})["id"] for n in range(2)]
    workload = create(
        api,
        "workloads",
        {"name": "tpcb", "scale": 1, "scripts": [{"builtin": "tpcb-like", "weight": 1}]},
    )
    experiment = create(
        api,
        "experiments",
        {
            "name": "three hosts",
            "hosts": [host.pk for host in hosts],
            "builds": [build["id"]],
            "config_profiles": profiles,
            "workloads": [workload["id"]],
            "storage_layouts": [{"data": "default", "wal": None}],
            "clients": [1],
            "duration_s": 2,
            "repeats": 1,
        },
    )
    return start(api, experiment["id"])


def watch(run_ids: list[int], hosts: list[Host], timeout_s: float) -> list[dict[int, tuple]]:
    """Snapshots until every run is final: host id -> (running run ids, waiting run ids)."""
    snapshots = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        running = Run.objects.filter(host__in=hosts, status=Run.Status.RUNNING)
        now_running = list(running.values_list("host_id", "pk"))
        snapshots.append(
            {
                pk: (
                    [run for host, run in now_running if host == pk],
                    [w.run.pk for w in q.waiting],
                )
                for pk, q in host_queues(hosts).items()
            }
        )
        if set(Run.objects.filter(pk__in=run_ids).values_list("status", flat=True)) <= TERMINAL:
            return snapshots
        time.sleep(POLL_S)
    raise AssertionError(f"runs {run_ids} did not end in {timeout_s} s")


def test_three_agents_run_one_job_per_host_at_a_time_while_the_others_queue(
    api, transactional_db, tmp_path
):
    with running_lab(tmp_path) as lab, more_agents(lab, tmp_path, 2) as extras:
        hosts = [agent.wait_registered() for agent in (lab, *extras)]
        run_ids = two_runs_per_host(api, hosts)
        assert len(run_ids) == 6
        snapshots = watch(run_ids, hosts, timeout_s=240)

        runs = list(Run.objects.filter(pk__in=run_ids).order_by("started_at"))
        assert [run.status for run in runs] == [Run.Status.SUCCEEDED] * 6, lab.logs()
        assert all(len(running) <= 1 for snap in snapshots for running, _ in snap.values())
        waited = {pk for snap in snapshots for pk, (now, queued) in snap.items() if now and queued}
        assert waited == {host.pk for host in hosts}, "each host ran one run while one waited"
        for host in hosts:
            first, second = [run for run in runs if run.host_id == host.pk]
            assert second.started_at >= first.finished_at, "a host's second run waits for its first"
        busy_at_once = max(sum(bool(running) for running, _ in snap.values()) for snap in snapshots)
        assert busy_at_once >= 2, "the hosts work at the same time"
