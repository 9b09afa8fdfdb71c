"""Capacity searches in the lab (runs/services/capacity.py): the first probe at start, a
probe per step at the rate the search asks for, the end by itself, the design refused
naming the field, the estimate. The probes here are finished by the test with latencies
drawn from a seeded simulated server; tests/integration has pgbench measure them."""

import html
import math
import random
from collections.abc import Callable

import pytest
from django.urls import reverse
from hdrh.histogram import HdrHistogram

from agents.contract.errors import JobError
from runs import services
from runs.analysis.capacity import capacity_reading, plan_of, probes_expected
from runs.inference.capacity_search import Found, expected_probes, noise_probes
from runs.inference.capacity_spread import spread_widens
from runs.models import Experiment, ProgressSample, Result, Run
from runs.services.capacity import (
    ENDED_CANCELLED,
    capacity_notes,
    capacity_step,
    capacity_steps_due,
)
from runs.services.experiments import experiment_check
from runs.services.progress import experiment_progress
from tests.runs.factories import ExperimentFactory, UserFactory

pytestmark = pytest.mark.django_db

SATURATION_TPS, BASE_MS = 3000.0, 4.0  # p99 reaches 20 ms at 2,400 tps


def capacity_experiment(**fields: object) -> Experiment:
    values = {
        "execution": "rounds",
        "repeats": 1,
        "clients": [4],
        "duration_s": 20,
        "capacity": True,
        "capacity_percentile": 99.0,
        "capacity_limit_ms": 20.0,
        "capacity_low_tps": 100.0,
        "capacity_high_tps": 5000.0,
        "capacity_probes": 24,
        **fields,
    }
    return ExperimentFactory(**values)


def simulated_histogram(
    rate: float, seconds: float, rng: random.Random, saturation: float = SATURATION_TPS
) -> str:
    """Latencies (µs) of a queue's p99 at `rate`: BASE_MS / (1 - rate / saturation)."""
    p99_ms = BASE_MS / (1 - rate / saturation) if rate < saturation else 10_000.0
    sigma = 0.6
    mu = math.log(p99_ms * 1000) - 2.3263478740408408 * sigma
    histogram = HdrHistogram(1, 3_600_000_000, 3)
    for _ in range(int(min(rate, saturation) * seconds * 0.2)):
        histogram.record_value(max(1, int(rng.lognormvariate(mu, sigma))))
    return histogram.encode().decode()


def finish_probes(
    experiment: Experiment,
    rng: random.Random,
    saturation: Callable[[Run], float] = lambda run: SATURATION_TPS,
) -> bool:
    """Finish every queued probe, in queue order, as its cell's simulated server (which
    saturates at `saturation(run)` tps) would serve it, then step."""
    for run in experiment.runs.filter(status=Run.Status.QUEUED).order_by("position"):
        saturates = saturation(run)
        rate = run.spec["workload"]["rate_tps"]
        reached = min(rate, saturates * 0.98)
        histogram = simulated_histogram(rate, 20.0, rng, saturates)
        Result.objects.create(
            run=run,
            index=0,
            clients=4,
            repeat=run.round,
            tps=reached,
            duration_s=20.0,
            transactions=int(reached * 20),
            exit_code=0,
            percentiles={"p99": 1.0, "histogram": histogram},
        )
        services.run_finish(run, Run.Status.SUCCEEDED)
    return capacity_step(experiment.pk)


def search_to_end(
    experiment: Experiment,
    rng: random.Random,
    saturation: Callable[[Run], float] = lambda run: SATURATION_TPS,
) -> int:
    """Finish probes and step until the search ends by itself; how many steps it took."""
    steps = 0
    while finish_probes(experiment, rng, saturation):
        steps += 1
        experiment.refresh_from_db()
        if experiment.capacity_state["ended"]:
            break
    return steps


def noisy_search(rng: random.Random, sd: float) -> Experiment:
    """A search run to its end on a host of its own, each window's server saturating at
    SATURATION_TPS x e^N(0, `sd`)."""
    experiment = capacity_experiment()
    services.experiment_start(experiment, UserFactory())
    saturations: dict[int, float] = {}

    def noisy(run: Run) -> float:
        return saturations.setdefault(run.pk, SATURATION_TPS * rng.lognormvariate(0, sd))

    search_to_end(experiment, rng, noisy)
    return experiment


def refused_start(experiment: Experiment) -> JobError:
    """Why starting `experiment` was refused (it must be), having queued nothing."""
    with pytest.raises(JobError) as refused:
        services.experiment_start(experiment, UserFactory())
    assert not experiment.runs.exists()
    return refused.value


def test_start_queues_one_probe_at_the_lowest_rate_with_the_skip_limit(lab_redis):
    experiment = capacity_experiment(capacity_skip_limit_ms=200.0)

    runs = services.experiment_start(experiment, UserFactory())

    assert len(runs) == 1
    workload = runs[0].spec["workload"]
    assert (workload["rate_tps"], workload["latency_limit_ms"]) == (100.0, 200.0)
    experiment.refresh_from_db()
    assert experiment.capacity_state["ended"] == "" and experiment.status == "queued"


def test_the_search_probes_until_it_brackets_the_capacity_and_ends_itself(lab_redis, admin_client):
    experiment = capacity_experiment()
    services.experiment_start(experiment, UserFactory())
    rng = random.Random(11)

    steps = search_to_end(experiment, rng)

    rates = [run.spec["workload"]["rate_tps"] for run in experiment.runs.order_by("round")]
    assert rates[:2] == [100.0, 5000.0]
    assert len(rates) <= 16 and steps == len(rates)
    reading = capacity_reading(experiment)
    capacity = reading.capacity
    assert capacity.lower is not None and capacity.upper is not None
    assert capacity.lower <= 2400.0 <= capacity.upper
    assert experiment.capacity_state["answer"] == capacity.sentence
    assert capacity.sentence.endswith("at p99 <= 20 ms")
    assert all(p.percentiles[99.9] is not None for p in reading.probes)
    assert experiment.status == "succeeded"
    assert not capacity_step(experiment.pk)

    page = admin_client.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    assert html.escape(capacity.sentence) in page and 'id="fig-capacity"' in page
    for run in experiment.runs.all():
        assert reverse("run-detail", args=[run.pk]) in page
    assert "data-reload-s" not in page


def test_a_probe_that_stalled_is_seen_when_its_rate_is_probed_again(lab_redis, admin_client):
    # The third probe (aimed just under the capacity of 2,400) stalls as if the server
    # saturated at 500: it fails, and the search brackets below it. Its ceiling probed
    # again passes: the rate is mixed, and the interval spans it instead of ending there.
    experiment = capacity_experiment(capacity_probes=24)
    services.experiment_start(experiment, UserFactory())

    search_to_end(
        experiment,
        random.Random(5),
        lambda run: 500.0 if run.round == 3 else SATURATION_TPS,
    )

    reading = capacity_reading(experiment)
    stalled = experiment.runs.get(round=3).spec["workload"]["rate_tps"]
    mixed = [outcome for outcome in reading.outcomes if outcome.mixed]
    assert [outcome.offered_tps for outcome in mixed] == [stalled]
    capacity = reading.capacity
    assert capacity.lower is not None and capacity.upper is not None, capacity.sentence
    assert capacity.lower < stalled and capacity.upper >= 2400.0, capacity.sentence
    page = admin_client.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    assert "its probes disagree (1 passed, 1 failed): the host&#x27;s noise" in page


def test_the_estimate_counts_the_probes_the_hosts_latest_searches_took_beyond_the_schedule(
    lab_redis,
):
    # An earlier search on the host whose windows' servers saturate at 3,000 tps x
    # e^N(0, 0.1) takes 21 probes: 11 beyond a steady host's schedule, more than its windows'
    # spread alone accounts for (6). The next search on the host is expected to take as
    # many.
    rng = random.Random(9)
    earlier = noisy_search(rng, 0.1)
    host = earlier.hosts.get()
    beyond = earlier.runs.count() - expected_probes(plan_of(earlier, False))
    learned = probes_expected(earlier, 1, {host.pk})
    assert beyond > noise_probes(learned.spread)

    planned = capacity_experiment(hosts=[host])
    estimate = services.experiment_estimate(planned)
    assert (estimate["capacity_probes"], estimate["probes_beyond_schedule"]) == (
        10 + beyond,
        beyond,
    )

    running = capacity_experiment(hosts=[host])
    services.experiment_start(running, UserFactory())
    finish_probes(running, rng)
    running.refresh_from_db()
    assert running.runs.count() == 2 and not running.capacity_state["ended"]
    assert services.experiment_estimate(planned)["probes_beyond_schedule"] == beyond

    # Nor is a search that ended below its lowest rate: its range ended it, in few probes.
    below = capacity_experiment(hosts=[host], capacity_low_tps=4000.0)
    services.experiment_start(below, UserFactory())
    search_to_end(below, rng)
    assert capacity_reading(below).capacity.found == Found.BELOW
    assert below.runs.count() < 10
    assert services.experiment_estimate(planned)["probes_beyond_schedule"] == beyond


def test_its_progress_counts_probes_against_the_budget_and_says_how_it_ended(lab_redis):
    experiment = capacity_experiment()
    services.experiment_start(experiment, UserFactory())
    rng = random.Random(11)
    finish_probes(experiment, rng)
    experiment.refresh_from_db()

    running = experiment_progress(experiment)

    assert (running["rounds"], running["max_rounds"], running["ended"]) == (2, 24, "")
    per_round = services.experiment_estimate(experiment)["estimated_seconds"]
    assert per_round is not None
    # About ten probes expected, the second of them open: nine rounds' time left.
    assert running["remaining_seconds"] == pytest.approx(9 * per_round, abs=per_round)

    search_to_end(experiment, rng)
    ended = experiment_progress(experiment)
    assert ended["ended"] == experiment.capacity_state["ended"] != ""
    assert ended["remaining_seconds"] == 0


def test_a_window_the_host_stalled_in_is_flagged_and_its_rate_probed_again(
    lab_redis, admin_client
) -> None:
    # The first probe (100 tps, 60 s) logs 5 ms everywhere but in its 34th second, where
    # the 2 % of its transactions that waited behind a stall finished at 300 ms.
    experiment = capacity_experiment(duration_s=60)
    (run,) = services.experiment_start(experiment, UserFactory())
    histogram = HdrHistogram(1, 3_600_000_000, 3)
    histogram.record_value(5_000, 5880)
    histogram.record_value(300_000, 120)
    Result.objects.create(
        run=run,
        index=0,
        clients=4,
        tps=100.0,
        duration_s=60.0,
        transactions=6000,
        exit_code=0,
        percentiles={"p99": 300.0, "histogram": histogram.encode().decode()},
    )
    ProgressSample.objects.bulk_create(
        ProgressSample(
            run=run,
            point=0,
            t=float(t),
            tps=100.0,
            sampled=100,
            sampling_rate=1.0,
            p50_ms=5.0,
            p95_ms=300.0 if t == 34 else 5.0,
            p99_ms=300.0 if t == 34 else 5.0,
        )
        for t in range(1, 61)
    )
    services.run_finish(run, Run.Status.SUCCEEDED)

    assert capacity_step(experiment.pk)

    again = experiment.runs.get(round=2)
    assert again.spec["workload"]["rate_tps"] == 100.0
    reading = capacity_reading(experiment)
    (outcome,) = reading.outcomes
    assert (outcome.probes, outcome.stalled, outcome.counted) == (1, 1, 0)
    stall = "p99 over 20 ms only in a burst of 1 of its 60 seconds (34 s: 300 ms)"
    assert (reading.probes[0].stall or "").startswith(stall)
    assert reading.capacity.sentence.endswith("; 1 of 1 window stalled (host, not load): repeated")
    page = admin_client.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    assert f"stalled: {stall}" in page and "data-stalled" in page


def test_probes_so_short_that_one_stall_fails_them_are_said_before_the_start(lab_redis):
    short = capacity_experiment(duration_s=5)

    notes = experiment_check(short)[0].notes

    said = (
        "capacity search: at p99 over 5 s probes, one stall of the host longer than 70 ms "
        "fails a probe at any rate, so on a shared VM the capacity measures the host's "
        "hiccups; probes of 23 s or more need a stall of 250 ms"
    )
    assert said in notes and capacity_notes(short) == [said]
    assert capacity_notes(capacity_experiment(duration_s=30)) == []
    assert capacity_notes(capacity_experiment(duration_s=5, capacity_percentile=95.0)) == []


def test_a_cancelled_probe_ends_the_search_and_the_reaper_steps_a_lost_message(lab_redis):
    experiment = capacity_experiment()
    run = services.experiment_start(experiment, UserFactory())[0]
    services.run_finish(run, Run.Status.CANCELLED)

    assert capacity_steps_due() == 1

    experiment.refresh_from_db()
    assert experiment.capacity_state["ended"] == ENDED_CANCELLED
    assert experiment.runs.count() == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"adaptive": True, "max_rounds": 5}, "adaptive"),
        ({"execution": "blocks"}, "execution"),
        ({"clients": [1, 2]}, "sweep.clients"),
        ({"repeats": 3}, "repeats"),
        ({"capacity_limit_ms": None}, "capacity_limit_ms"),
        ({"capacity_limit_ms": 3_600_001.0}, "capacity_limit_ms"),
        ({"capacity_percentile": 100.0}, "capacity_percentile"),
        ({"capacity_skip_limit_ms": 0.0}, "capacity_skip_limit_ms"),
        ({"capacity_skip_limit_ms": 1e300}, "capacity_skip_limit_ms"),
        ({"capacity_low_tps": 0.0}, "capacity_low_tps"),
        ({"capacity_high_tps": 50.0}, "capacity_high_tps"),
        ({"capacity_probes": 1}, "capacity_probes"),
    ],
)
def test_a_search_that_cannot_run_is_refused_naming_the_field(fields, field):
    experiment = capacity_experiment(**fields)

    assert refused_start(experiment).field == field


def test_a_search_of_several_pgbench_processes_is_refused_naming_the_field():
    experiment = capacity_experiment()
    two = [{"scripts": [], "clients": 2, "threads": None}] * 2
    experiment.workloads.update(processes=two)

    assert refused_start(experiment).field == "workload.processes"


@pytest.mark.parametrize("latency_log", ["aggregate", "none"])
def test_a_search_of_a_workload_without_single_latencies_is_refused(latency_log):
    experiment = capacity_experiment()
    experiment.workloads.update(latency_log=latency_log)

    assert refused_start(experiment).field == "workload.latency_log"


def test_the_api_refuses_a_search_without_a_limit_with_a_400(api_client, experiment_payload):
    payload = experiment_payload(
        clients=[4], duration_s=5, capacity=True, capacity_low_tps=10, capacity_high_tps=100
    )

    response = api_client.post("/api/experiments/", payload, format="json")

    assert response.status_code == 400, response.json()
    assert list(response.json()["error"]["fields"]) == ["capacity_limit_ms"]


def test_the_estimate_says_how_long_the_search_takes_at_most():
    experiment = capacity_experiment(capacity_probes=20)

    estimate = services.experiment_estimate(experiment)

    assert estimate["runs"] == 1
    probe_s = estimate["estimated_seconds"]
    assert probe_s is not None and probe_s > experiment.duration_s
    # 100 to 5,000 tps: two ends, three interpolations to 20 % and two halvings to 5 %
    # (seven halvings alone), one repeat, the floor and the ceiling probed again; at most
    # the budget.
    assert estimate["expected_seconds"] == pytest.approx(10 * probe_s, abs=10)
    assert estimate["max_seconds"] == pytest.approx(20 * probe_s, abs=20)
    assert estimate["capacity_probes"] == 10 and estimate["window_spread_pct"] is None


def test_the_estimate_counts_more_probes_on_a_host_whose_windows_spread(lab_redis, admin_client):
    # An earlier search on the host, each window's server saturating at 3,000 tps x
    # e^N(0, 0.05): near its capacity (a load of 0.8) that spreads a window's p99 by about
    # a fifth. The next search on the host is expected to take more probes, and the
    # estimate says why; one on another host is not.
    rng = random.Random(5)
    earlier = noisy_search(rng, 0.05)
    host = earlier.hosts.get()
    spread = probes_expected(earlier, 1, {host.pk}).spread
    assert spread is not None and spread_widens(spread)

    planned = capacity_experiment(capacity_probes=20, hosts=[host])
    estimate = services.experiment_estimate(planned)
    elsewhere = services.experiment_estimate(capacity_experiment(capacity_probes=20))

    # The earlier search took `beyond` probes more than a steady host's schedule for it.
    beyond = earlier.runs.count() - expected_probes(plan_of(earlier, False))
    assert estimate["probes_beyond_schedule"] == max(beyond, 0)
    assert estimate["window_spread_pct"] == pytest.approx(spread.percent, abs=0.05)
    assert estimate["capacity_probes"] == 10 + max(noise_probes(spread), beyond) > 10
    probe_s = estimate["estimated_seconds"]
    assert estimate["expected_seconds"] == pytest.approx(
        estimate["capacity_probes"] * probe_s, abs=10
    )
    assert (elsewhere["capacity_probes"], elsewhere["window_spread_pct"]) == (10, None)
    assert elsewhere["probes_beyond_schedule"] is None
    page = admin_client.get(reverse("experiment-detail", args=[planned.pk])).content.decode()
    said = f"{estimate['capacity_probes']} probes a search usually takes here (in the host's "
    assert said in page
    spread_said = f"its windows at one rate spread {estimate['window_spread_pct']:.0f} %"
    assert spread_said in page
    longer = services.experiment_estimate(
        capacity_experiment(capacity_probes=20, hosts=[host], duration_s=60)
    )
    # Windows of another length spread otherwise: nothing learned for them.
    assert (longer["capacity_probes"], longer["window_spread_pct"]) == (10, None)
    assert longer["probes_beyond_schedule"] is None
