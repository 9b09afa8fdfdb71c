"""Estimates learned from the runs a host finished (runs/estimates.py): cluster setup, load
(a fixed part and a part per scale unit) and per-point overhead from the agent's status
events, per host and build."""

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from runs import services
from runs.estimates import (
    DEFAULT_TIMINGS,
    GUESSED_TPS,
    RUN_OVERHEAD_S,
    SCALE_LOAD_S_PER_UNIT,
    Timings,
    learned_rates,
    learned_timings,
)
from runs.models import Host, PgBuild, Run, RunEvent, Workload
from runs.queues import estimated_seconds, host_queues
from tests.runs.factories import (
    ExperimentFactory,
    HostFactory,
    PgBuildFactory,
    ResultFactory,
    RunFactory,
    WorkloadFactory,
)

pytestmark = pytest.mark.django_db

SPEC = {"sweep": {"clients": [1, 2], "repeats": 1, "duration_s": 10}, "dataset": {"scale": 2}}


def finished_like_an_agent(
    host: Host,
    build: PgBuild,
    setup_s: float,
    load_s: float,
    overhead_s: float,
    spec: dict | None = None,
) -> Run:
    """A succeeded run of `spec` (SPEC) with the status events an agent sends, its phases
    lasting `setup_s` (half before the load, half after the points), `load_s` and every
    point of 10 s plus `overhead_s` (two, and one more per client count of a CPU-profile pass)."""
    spec = spec or SPEC
    points = 2 + (2 if spec["sweep"].get("cpu_profile") else 0)
    start = timezone.now() - timedelta(hours=1)
    loading = start + timedelta(seconds=setup_s / 2)
    running = loading + timedelta(seconds=load_s)
    stopping = running + timedelta(seconds=points * (10 + overhead_s))
    finished = stopping + timedelta(seconds=setup_s / 2)
    run = RunFactory(
        host=host,
        build=build,
        spec=spec,
        status=Run.Status.SUCCEEDED,
        started_at=start,
        finished_at=finished,
    )
    said: list[tuple[datetime, str, str]] = [
        (start, "provisioning", "finding PostgreSQL 16"),
        (start + timedelta(seconds=1), "initdb", "creating a throw-away cluster"),
        (loading, "loading", "pgbench -i at scale 2"),
        (running, "running", "running 2 points"),
        (running, "running", "point 1 of 2: 1 clients, run 1"),
        (stopping, "stopping", "stopping and removing the cluster"),
    ]
    RunEvent.objects.bulk_create(
        RunEvent(run=run, seq=n, type="status", ts=ts, payload={"state": s, "message": m})
        for n, (ts, s, m) in enumerate(said, start=1)
    )
    return run


def test_a_finished_runs_phases_are_learned_for_its_host_and_build() -> None:
    """The newest run's setup, eight times the others', is left out (runs/estimates.py,
    recent_midmean)."""
    host, build = HostFactory(), PgBuildFactory()
    for setup in (4.5, 5.0, 5.0, 5.5, 40.0):
        finished_like_an_agent(host, build, setup_s=setup, load_s=1.0, overhead_s=1.5)

    learned = learned_timings([host.pk])

    timings = learned.for_cell(host.pk, build.pk)
    assert timings.runs == 5
    assert timings.setup_s == pytest.approx(5.0, abs=0.2)
    assert timings.load_s_per_unit == pytest.approx(0.5)
    assert timings.point_overhead_s == pytest.approx(1.5)
    other_build = PgBuildFactory()
    assert learned.for_cell(host.pk, other_build.pk) == learned.by_host[host.pk]
    assert learned.for_cell(HostFactory().pk, build.pk) == DEFAULT_TIMINGS


def test_a_build_learned_on_the_host_wins_over_the_hosts_other_builds() -> None:
    host, slow, fast = HostFactory(), PgBuildFactory(), PgBuildFactory()
    finished_like_an_agent(host, slow, setup_s=60.0, load_s=1.0, overhead_s=0.5)
    finished_like_an_agent(host, fast, setup_s=4.0, load_s=1.0, overhead_s=0.5)

    learned = learned_timings([host.pk])

    assert learned.for_cell(host.pk, slow.pk).setup_s == pytest.approx(60.0)
    assert learned.for_cell(host.pk, fast.pk).setup_s == pytest.approx(4.0)


def test_the_queue_starts_waiting_runs_at_the_learned_times() -> None:
    host, build = HostFactory(), PgBuildFactory()
    finished_like_an_agent(host, build, setup_s=6.0, load_s=2.0, overhead_s=1.0)
    started = timezone.now() - timedelta(seconds=5)
    RunFactory(host=host, build=build, spec=SPEC, status=Run.Status.RUNNING, started_at=started)
    waiting = RunFactory(host=host, build=build, spec=SPEC, position=1)

    (queued,) = host_queues([host])[host.pk].waiting

    learned = Timings(6.0, 1.0, 1.0)
    assert estimated_seconds(waiting, learned) == pytest.approx(6 + 2 + 2 * 11)
    assert queued.starts_at == started + timedelta(seconds=30)
    assert estimated_seconds(waiting) == RUN_OVERHEAD_S + 2 * 0.5 + 2 * 10


def test_an_experiments_estimate_uses_what_its_host_learned() -> None:
    host, build = HostFactory(), PgBuildFactory()
    finished_like_an_agent(host, build, setup_s=6.0, load_s=2.0, overhead_s=1.0)
    experiment = ExperimentFactory(hosts=[host], builds=[build], clients=[1, 2], duration_s=10)

    estimate = services.experiment_estimate(experiment)

    # The load, 2 s at scale 2, learned from one scale: 0.5 s per unit (SCALE_LOAD_S_PER_UNIT,
    # the most one scale teaches) and 1 s fixed; the workload's scale is 1.
    load = 1.0 + 1 * SCALE_LOAD_S_PER_UNIT
    assert estimate["setup_seconds"] == round(6 + load)
    assert estimate["estimated_seconds"] == round(6 + load + 2 * 11)


def test_a_cpu_profile_pass_counts_as_points_learned_and_estimated() -> None:
    """The CPU-profile pass (sweep.cpu_profile) runs each client count once more after the
    measured points: learned from, it does not inflate the per-point overhead, and the
    estimates count it (once per cell: only the first round records one)."""
    host, build = HostFactory(), PgBuildFactory()
    with_cpu_profile = {**SPEC, "sweep": {**SPEC["sweep"], "cpu_profile": True, "first_repeat": 1}}
    finished_like_an_agent(
        host, build, setup_s=6.0, load_s=2.0, overhead_s=1.0, spec=with_cpu_profile
    )

    assert learned_timings([host.pk]).for_cell(host.pk, build.pk).point_overhead_s == 1.0
    waiting = RunFactory(host=host, build=build, spec=with_cpu_profile)
    assert estimated_seconds(waiting, Timings(6.0, 1.0, 1.0)) == pytest.approx(6 + 2 + 4 * 11)
    later_round = {**with_cpu_profile, "sweep": {**with_cpu_profile["sweep"], "first_repeat": 2}}
    later = RunFactory(host=host, build=build, spec=later_round)
    assert estimated_seconds(later, Timings(6.0, 1.0, 1.0)) == pytest.approx(6 + 2 + 2 * 11)
    experiment = ExperimentFactory(
        hosts=[host], builds=[build], clients=[1, 2], duration_s=10, cpu_profile=True
    )
    load = 1.0 + 1 * SCALE_LOAD_S_PER_UNIT  # 2 s at scale 2, learned as above
    assert services.experiment_estimate(experiment)["estimated_seconds"] == round(6 + load + 4 * 11)


def test_runs_without_their_phases_teach_nothing() -> None:
    host = HostFactory()
    RunFactory(host=host, spec=SPEC, status=Run.Status.SUCCEEDED, started_at=timezone.now())
    RunFactory(host=host, spec=SPEC, status=Run.Status.FAILED, started_at=timezone.now())

    assert learned_timings([host.pk]).for_cell(host.pk, None) == DEFAULT_TIMINGS


def measured(host: Host, build: PgBuild, workload: Workload, tps_by_clients: dict, **run) -> Run:
    """A run on `host` of `workload` whose points measured `tps_by_clients` (clients -> tps)."""
    run = RunFactory(host=host, build=build, workload=workload, **run)
    for index, (clients, tps) in enumerate(tps_by_clients.items()):
        ResultFactory(run=run, index=index, clients=clients, tps=tps)
    return run


def test_a_sweep_by_transactions_lasts_transactions_times_clients_over_the_learned_tps() -> None:
    """A point of -t 500 at 1 client takes 500 / tps s, at 2 clients 1,000 / tps s: the
    rates are the midmeans of what the host measured for the workload per client count
    (the newest run's 160 left out), in its succeeded runs only, not another workload's nor
    another host's."""
    host, build, workload = HostFactory(), PgBuildFactory(), WorkloadFactory(scale=2)
    succeeded = {"status": Run.Status.SUCCEEDED}
    for tps_at_1 in (100.0, 100.0, 100.0, 100.0, 160.0):
        measured(host, build, workload, {1: tps_at_1, 2: 200.0}, **succeeded)
    measured(host, build, workload, {1: 1.0, 2: 1.0}, status=Run.Status.FAILED)
    measured(host, build, WorkloadFactory(), {1: 5.0, 2: 5.0}, **succeeded)
    measured(HostFactory(), build, workload, {1: 5.0, 2: 5.0}, **succeeded)
    experiment = ExperimentFactory(
        hosts=[host],
        builds=[build],
        workloads=[workload],
        clients=[1, 2],
        duration_s=None,
        transactions=500,
        warmup_s=0,
    )

    estimate = services.experiment_estimate(experiment)

    rates = learned_rates([host.pk], [workload.pk])
    assert rates.tps[(host.pk, workload.pk, 1)] == pytest.approx(100.0)
    points = 500 * 1 / 100.0 + 500 * 2 / 200.0
    assert estimate["estimated_seconds"] == round(RUN_OVERHEAD_S + 2 * 0.5 + points)
    assert estimate["transaction_rates"] == "learned"


def test_a_client_count_the_host_never_measured_borrows_the_workloads_rate_per_cpu() -> None:
    """4 clients on 2 CPUs keep twice the CPUs 1 client does busy: 200 tps borrowed."""
    host = HostFactory(facts={"cpu": {"threads": 2, "cores": 2}})
    build, workload = PgBuildFactory(), WorkloadFactory(scale=2)
    measured(host, build, workload, {1: 100.0}, status=Run.Status.SUCCEEDED)
    experiment = ExperimentFactory(
        hosts=[host],
        builds=[build],
        workloads=[workload],
        clients=[1, 4],
        duration_s=None,
        transactions=1000,
        warmup_s=0,
    )

    estimate = services.experiment_estimate(experiment)

    points = 1000 * 1 / 100.0 + 1000 * 4 / 200.0
    assert estimate["estimated_seconds"] == round(RUN_OVERHEAD_S + 2 * 0.5 + points)
    assert estimate["transaction_rates"] == "borrowed"
    duration = services.experiment_estimate(ExperimentFactory(hosts=[host], duration_s=10))
    assert duration["transaction_rates"] is None


def test_a_workload_never_measured_borrows_its_scripts_rate_at_the_nearest_scale() -> None:
    """TPC-B at scale 20 never ran on the host; TPC-B at scale 1 and 50 did, and a select-only
    at scale 20: the nearest scale of the same scripts and query mode lends its rate."""
    host = HostFactory(facts={"cpu": {"threads": 2}})
    build = PgBuildFactory()
    tpcb = [{"builtin": "tpcb-like", "weight": 1}]
    wanted = WorkloadFactory(scale=20, scripts=tpcb, query_mode="simple")
    near = WorkloadFactory(scale=50, scripts=tpcb, query_mode="simple")
    far = WorkloadFactory(scale=1, scripts=tpcb, query_mode="simple")
    other_mode = WorkloadFactory(scale=20, scripts=tpcb, query_mode="prepared")
    select = WorkloadFactory(scale=20, scripts=[{"builtin": "select-only", "weight": 1}])
    for workload, tps in ((near, 300.0), (far, 900.0), (other_mode, 5.0), (select, 7.0)):
        measured(host, build, workload, {2: tps}, status=Run.Status.SUCCEEDED)

    rates = learned_rates([host.pk], [wanted.pk])

    assert rates.rate(host.pk, wanted.pk, 2) == (pytest.approx(300.0), "borrowed")
    assert rates.rate(host.pk, wanted.pk, 1) == (pytest.approx(150.0), "borrowed")
    assert rates.point_length(host.pk, wanted.pk, [2], 300).source == "borrowed"
    alone = WorkloadFactory(scale=20, scripts=[{"builtin": "simple-update", "weight": 1}])
    assert learned_rates([host.pk], [alone.pk]).rate(host.pk, alone.pk, 2) == (
        GUESSED_TPS,
        "guessed",
    )
