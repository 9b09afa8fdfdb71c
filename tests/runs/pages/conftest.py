"""Fixtures for the page tests: a signed-in client and runs with stored numbers."""

import pytest
from django.test import Client

from runs.models import HostSample, ProgressSample, Result, Run
from tests.runs.factories import RunFactory


@pytest.fixture
def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def add_point(run: Run, index: int, clients: int, repeat: int, tps: float, latency: float):
    """A finished point with a two-second progress timeline and one host sample."""
    ProgressSample.objects.bulk_create(
        ProgressSample(run=run, point=index, t=t, tps=tps + t, latency_ms=latency)
        for t in (1.0, 2.0)
    )
    HostSample.objects.create(
        run=run,
        point=index,
        t=1.0,
        data={"t": 1.0, "cpu_user": 40.0, "cpu_system": 10.0, "cpu_iowait": 2.5, "disks": {}},
    )
    return Result.objects.create(
        run=run,
        index=index,
        clients=clients,
        threads=clients,
        repeat=repeat,
        tps=tps,
        latency_avg_ms=latency,
        latency_stddev_ms=latency / 10,
        percentiles={"p95": latency * 1.5},
        transactions=int(tps * 2),
        failed=0,
        duration_s=2.0,
        argv=["/usr/bin/pgbench", "-c", str(clients), "-T", "2"],
        exit_code=0,
    )


def finished_run(points: list[tuple[int, int, float, float]], **fields) -> Run:
    """A succeeded run with (clients, repeat, tps, latency_ms) points."""
    spec = {
        "settings": fields.pop("settings", {}),
        "sweep": {"clients": sorted({p[0] for p in points}), "repeats": 1, "duration_s": 2},
    }
    run = RunFactory(status=Run.Status.SUCCEEDED, spec=spec, **fields)
    for index, (clients, repeat, tps, latency) in enumerate(points):
        add_point(run, index, clients, repeat, tps, latency)
    return run


@pytest.fixture
def run_with_results(db) -> Run:
    return finished_run([(1, 1, 1234.5678, 0.8101), (2, 1, 2345.25, 0.8529)])
