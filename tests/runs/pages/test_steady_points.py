"""Steady state applied to stored points: a ramp before tps settles is flagged, kept in the
run's digest and drawn as a band on its tps chart; a point that never
settles is flagged and left out of verdicts unless the user keeps it."""

import math

import pytest
from django.urls import reverse
from django.utils import timezone

from runs import services
from runs.analysis.validity import (
    PointSamples,
    ValidityWarning,
    point_steady_state,
    sample_warnings,
)
from runs.models import ProgressSample, Result, Run
from runs.stats_tables import load_inputs, table_of
from runs.timelines import store
from tests.runs.factories import ExperimentFactory, RunFactory

pytestmark = pytest.mark.django_db

SECONDS = 60


def ramp(t: int) -> float:
    """A cold cache: 40 % below the plateau at first, within 1 % of it after 24 s."""
    return 1000.0 * (1 - 0.4 * math.exp(-t / 6))


def flat(t: int) -> float:
    return 1000.0 + (7.0 if t % 2 else -7.0)


def climbing(t: int) -> float:
    return 500.0 + 12.0 * t


def measured_run(
    shape, tps_values=(1000.0, 1010.0, 990.0), experiment=None, seconds: int = SECONDS
) -> Run:
    """A succeeded run with one point per repeat, each second shaped by `shape`."""
    run = RunFactory(
        status=Run.Status.SUCCEEDED,
        finished_at=timezone.now(),
        experiment=experiment or ExperimentFactory(),
    )
    for index, tps in enumerate(tps_values):
        Result.objects.create(
            run=run, index=index, clients=2, repeat=index + 1, tps=tps, exit_code=0
        )
        ProgressSample.objects.bulk_create(
            ProgressSample(run=run, point=index, t=float(t), tps=shape(t), latency_ms=2.0)
            for t in range(1, seconds + 1)
        )
    return run


def progress_of(shape) -> PointSamples:
    return PointSamples(
        progress=[ProgressSample(point=0, t=float(t), tps=shape(t)) for t in range(1, SECONDS + 1)]
    )


def warnings_of(shape) -> list[ValidityWarning]:
    samples = progress_of(shape)
    return sample_warnings(0, samples, point_steady_state(samples))


def test_a_ramp_is_a_warm_up_inside_the_window_naming_when_tps_settled():
    (warning,) = [w for w in warnings_of(ramp) if w.code.startswith("warm")]
    assert warning.code == "warm_up_in_window"
    settled = int(warning.detail.split("after ")[1].split(" of")[0])
    # At 1,000 tps a second's count scatters by 3 %, which the drift bound allows for.
    assert 8 <= settled <= 30


def test_a_flat_point_has_no_steady_state_warning():
    codes = {w.code for w in warnings_of(flat)}
    assert not codes & {"warm_up_in_window", "never_settled"}


def test_a_climbing_point_never_settles():
    found = {w.code: w.detail for w in warnings_of(climbing)}
    assert "never_settled" in found and "of 60 s" in found["never_settled"]


def test_the_digest_keeps_when_each_point_settled_and_the_run_page_draws_it(signed_in):
    run = measured_run(ramp, tps_values=(1000.0,))
    store.digest_refresh(run.pk)

    digest = store.digests([run])[run.pk]
    assert list(digest.warm_ups) == [0] and 8 <= digest.warm_ups[0] <= 30
    # One settle time: the band ends where the warning says tps settled.
    [warning] = [w for w in digest.warnings[0] if w.code == "warm_up_in_window"]
    assert warning.detail == f"tps settled after {digest.warm_ups[0]:.0f} of {SECONDS} s"

    response = signed_in.get(reverse("run-detail", args=[run.pk]))
    layout = response.context["figures"]["tps"]["layout"]
    bands = [shape for shape in layout["shapes"] if shape["type"] == "rect"]
    assert [(band["x0"], band["x1"]) for band in bands] == [(0.0, digest.warm_ups[0])]
    assert layout["annotations"][0]["text"] == f"warm-up {digest.warm_ups[0]:.0f} s"


def test_points_that_never_settled_are_left_out_of_verdicts_unless_kept():
    experiment = ExperimentFactory()
    baseline = measured_run(flat, experiment=experiment)
    # Twice as fast, but every point still climbing: no steady state to compare.
    drifting = measured_run(climbing, (2000.0, 2010.0, 1990.0), experiment=experiment)
    loaded = load_inputs([baseline, drifting])

    left_out = table_of(loaded, baseline, 1.0, ("tps",))
    kept = table_of(loaded, baseline, 1.0, ("tps",), keep_unsettled=True)

    def row_of(table):
        return next(row for row in table.rows if row.run.pk == drifting.pk)

    assert row_of(left_out).cells["tps"].judgement is None
    assert "never_settled" in {w.code for w in row_of(left_out).warnings}
    assert row_of(kept).cells["tps"].judgement.verdict == "faster"


def test_the_comparison_page_and_the_api_take_keep_unsettled(signed_in, user, api_client):
    experiment = ExperimentFactory()
    runs = [
        measured_run(flat, experiment=experiment),
        measured_run(climbing, experiment=experiment),
    ]
    comparison = services.comparison_create(user, "drift", runs, runs[0])

    page = signed_in.get(reverse("comparison-detail", args=[comparison.pk]))
    assert b"left out of the verdicts" in page.content
    kept = signed_in.get(reverse("comparison-detail", args=[comparison.pk]), {"keep_unsettled": 1})
    assert b"counted, as you asked" in kept.content

    url = f"/api/comparisons/{comparison.pk}/statistics/"
    left_out = api_client.get(url).json()
    counted = api_client.get(url, {"keep_unsettled": "true"}).json()
    assert left_out["comparisons"] < counted["comparisons"]


# A 12 s point whose tps doubled, with 8 % noise a second (seeded): its last seconds' trend
# is not significant, but it drifts by hundreds of percent a minute.
DOUBLING = [
    5000.0 * (1 + t / 11) * f
    for t, f in enumerate([1.03, 0.95, 1.08, 0.97, 1.02, 0.91, 1.06, 0.99, 1.09, 0.93, 1.01, 0.96])
]


def doubling(t: int) -> float:
    return DOUBLING[t - 1]


def falling(t: int) -> float:
    """15,000 tps falling to 5,000 over the first seconds, then holding."""
    return {1: 15_000.0, 2: 11_000.0, 3: 7_000.0}.get(t, 5_000.0 + (20.0 if t % 2 else -20.0))


def test_a_short_noisy_point_whose_tps_doubled_never_settles_and_leaves_the_verdict():
    experiment = ExperimentFactory()
    baseline = measured_run(flat, experiment=experiment, seconds=12)
    drifting = measured_run(doubling, (2000.0, 2010.0, 1990.0), experiment, seconds=12)
    loaded = load_inputs([baseline, drifting])
    row = next(r for r in table_of(loaded, baseline, 1.0, ("tps",)).rows if r.run == drifting)

    found = {w.code: w.detail for w in row.warnings}
    assert "never_settled" in found and "warm_up_in_window" not in found
    assert found["never_settled"].startswith("repeat 1: tps drifts +")
    assert row.cells["tps"].judgement is None


def test_a_start_that_falls_is_a_drift_not_a_warm_up_and_draws_no_band():
    found = {w.code: w.detail for w in warnings_of(falling)}
    assert "warm_up_in_window" not in found
    assert (
        "tps fell for the first 3 of 60 s, then held (a drift down, not a warm-up)"
        in (found["unsteady_timeline"])
    )
    run = measured_run(falling, tps_values=(5000.0,))
    store.digest_refresh(run.pk)
    assert store.digests([run])[run.pk].warm_ups == {}
