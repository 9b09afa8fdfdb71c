"""The host's noise on the lab's side: each point's steal and foreign CPU stored as sent,
and each run's canary kept as its host's series and checked against the host's spread."""

from datetime import UTC, datetime, timedelta

import pytest

from runs import services
from runs.analysis.run_checks import run_warnings
from runs.host_noise import canary_bands
from runs.inference.usual import MIN_HISTORY
from runs.models import Host, HostCanary, Result, Run
from tests.runs import events
from tests.runs.factories import HostFactory, RunFactory

pytestmark = pytest.mark.django_db

NOISE = {
    "window_s": 2.01,
    "cpus": 2,
    "cpu_steal_percent": 3.5,
    "host_busy_cpu_s": 3.2,
    "job_cpu_s": 2.1,
    "job_cpu_source": "cgroup",
    "agent_cpu_s": 0.02,
    "foreign_cpu_s": 1.08,
    "foreign_cpu_percent": 26.87,
}


def test_a_points_noise_is_stored_with_its_result():
    run = RunFactory()
    point = {**events.point(0), "noise": NOISE}

    services.run_record_event(events.run_event(run, 1, "point", point))

    result = Result.objects.get(run=run, index=0)
    assert (result.cpu_steal_percent, result.foreign_cpu_percent) == (3.5, 26.87)
    assert result.noise == NOISE


def test_a_point_of_an_agent_before_noise_stores_none():
    run = RunFactory()

    services.run_record_event(events.run_event(run, 1, "point", events.point(0)))

    result = Result.objects.get(run=run, index=0)
    assert (result.cpu_steal_percent, result.foreign_cpu_percent, result.noise) == (None, None, {})


def canary(cpu_loop_ns: float, fsync_ms: float, at: datetime) -> dict:
    """A canary as the agent sends it in its result (agents/contract/reports/noise.py)."""
    return {
        "at": at.isoformat(),
        "seconds": 0.9,
        "cpu_loop_iterations": 200_000,
        "cpu_loop_runs": 25,
        "cpu_loop_ns": cpu_loop_ns,
        "fsync_directory": "/srv/benchlab",
        "fsync_count": 20,
        "fsync_ms": fsync_ms,
        "fsync_max_ms": fsync_ms * 3,
    }


def finish_with_canary(run: Run, cpu_loop_ns: float, fsync_ms: float, at: datetime) -> Run:
    document = {**events.result(run), "canary": canary(cpu_loop_ns, fsync_ms, at)}
    services.run_record_event(events.run_event(run, 1, "result", document))
    run.refresh_from_db()
    return run


def steady_history(host: Host, start: datetime, count: int = 10) -> None:
    """`count` earlier runs whose canaries wobble a percent around 40 ns and 2 ms."""
    for number in range(count):
        wobble = 1 + 0.01 * ((number % 3) - 1)
        finish_with_canary(
            RunFactory(host=host), 40.0 * wobble, 2.0 * wobble, start + timedelta(minutes=number)
        )


def test_a_canary_within_the_hosts_usual_spread_leaves_the_run_unflagged():
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    steady_history(host, start)

    run = finish_with_canary(RunFactory(host=host), 40.6, 2.1, start + timedelta(hours=1))

    assert run.host_noise == {"outside_usual": False, "detail": ""}
    assert HostCanary.objects.filter(host=host).count() == 11
    assert run_warnings(run, []) == []


def test_a_slower_cpu_loop_flags_the_run_and_its_verdicts_warn():
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    steady_history(host, start)

    run = finish_with_canary(RunFactory(host=host), 52.0, 2.0, start + timedelta(hours=1))

    assert run.host_noise["outside_usual"] is True
    assert run.host_noise["detail"].startswith("CPU loop 52 ns/iteration, usual 40 ns")
    assert run.canary.outside_usual and run.canary.cpu_loop_ns == 52.0
    (warning,) = run_warnings(run, [])
    assert (warning.code, warning.detail) == ("host_outside_usual_spread", run.host_noise["detail"])


def test_a_slower_fsync_flags_the_run_too():
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    steady_history(host, start)

    run = finish_with_canary(RunFactory(host=host), 40.0, 5.0, start + timedelta(hours=1))

    assert run.host_noise["detail"].startswith("fsync 5 ms, usual 2 ms")


def test_a_host_with_too_few_canaries_flags_nothing_yet():
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    steady_history(host, start, count=MIN_HISTORY - 1)

    run = finish_with_canary(RunFactory(host=host), 400.0, 50.0, start + timedelta(hours=1))

    assert run.host_noise == {"outside_usual": False, "detail": ""}


def test_only_earlier_canaries_of_the_same_host_make_its_spread():
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    steady_history(host, start)
    # Another host's, and a later one of this host, do not count.
    steady_history(HostFactory(), start, count=10)
    finish_with_canary(RunFactory(host=host), 80.0, 2.0, start + timedelta(days=1))

    bands = canary_bands(host, before=start + timedelta(hours=1))

    assert bands.canaries == 10
    assert bands.cpu_loop_ns is not None and bands.cpu_loop_ns.median == pytest.approx(40.0)


def test_a_result_sent_twice_stores_its_canary_once():
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    run = RunFactory(host=host)
    document = {**events.result(run), "canary": canary(40.0, 2.0, start)}

    services.run_record_event(events.run_event(run, 1, "result", document))
    services.run_record_event(events.run_event(run, 2, "result", document))

    assert HostCanary.objects.filter(run=run).count() == 1
