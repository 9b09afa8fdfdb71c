"""Adaptive experiments in the lab (runs/services/adaptive.py): the plan at start, a step
per ended round, rounds added only for undecided cells, and each way it ends. The runs
here are finished by the test; tests/e2e/test_adaptive_page.py has real agents
measure them."""

import math
from datetime import timedelta
from functools import partial

import pytest
from django.urls import reverse
from django.utils import timezone

from agents.contract.errors import JobError
from runs import services
from runs.agentlink.transport import send_or_log
from runs.analysis.sequential import level_text
from runs.inference.spending import last_look_level, look_levels
from runs.inference.stats import ALPHA
from runs.models import Experiment, ProgressSample, Result, Run
from runs.services import adaptive, adaptive_rounds
from runs.services.adaptive import (
    ENDED_BUDGET,
    ENDED_CANCELLED,
    ENDED_DECIDED,
    ENDED_HOURS,
    adaptive_require_precision,
    adaptive_share_alpha,
    adaptive_step,
    adaptive_step_send,
    adaptive_steps_due,
)
from tests.runs.factories import ConfigProfileFactory, ExperimentFactory, UserFactory

pytestmark = pytest.mark.django_db


def adaptive_experiment(cells: int = 3, profiles: str = "p", **fields) -> Experiment:
    values = {
        "execution": "rounds",
        "repeats": 3,
        "adaptive": True,
        "max_rounds": 12,
        "clients": [2],
        "margin_pct": 5.0,
        **fields,
    }
    return ExperimentFactory(
        config_profiles=[ConfigProfileFactory(name=f"{profiles}{n}") for n in range(cells)],
        **values,
    )


def start(experiment: Experiment) -> list[Run]:
    return services.experiment_start(experiment, UserFactory())


def finish_round(
    experiment: Experiment,
    tps_of_cell: dict[int, float],
    spread: float = 0.001,
    swing: float | None = None,
):
    """Finish every queued run of the experiment with one point at its cell's tps, the
    first cell's a little apart from round to round, so the rounds' ratios of each cell
    to it are too (with `swing`: ten per-second samples swinging by that share around
    it, counted exactly); then the step the control worker would take."""
    for run in experiment.runs.filter(status=Run.Status.QUEUED):
        apart = spread * ((run.round or 1) % 3 - 1) if run.cell == 0 else 0.0
        tps = tps_of_cell[run.cell] * (1 + apart)
        Result.objects.create(
            run=run, index=0, clients=2, repeat=run.round or 1, tps=tps, exit_code=0
        )
        if swing is not None:
            ProgressSample.objects.bulk_create(
                ProgressSample(run=run, point=0, t=float(t), tps=tps * (1 + swing * (-1) ** t))
                for t in range(1, 11)
            )
        services.run_finish(run, Run.Status.SUCCEEDED)
    return adaptive_step(experiment.pk)


def rounds_of(experiment: Experiment) -> dict[int, list[int]]:
    """round -> the cells it ran."""
    found: dict[int, list[int]] = {}
    for round_number, cell in experiment.runs.values_list("round", "cell").order_by("position"):
        found.setdefault(round_number, []).append(cell)
    return {r: sorted(cells) for r, cells in found.items()}


def test_start_queues_the_first_rounds_and_plans_the_looks(lab_redis):
    experiment = adaptive_experiment()

    runs = start(experiment)

    experiment.refresh_from_db()
    assert len(runs) == 9
    assert experiment.adaptive_state["looks"] == [3, 6, 12]
    assert experiment.adaptive_state["ended"] == ""


def test_a_clear_difference_and_a_same_end_the_experiment_at_the_first_look(lab_redis):
    experiment = adaptive_experiment()
    start(experiment)

    assert finish_round(experiment, {0: 1000.0, 1: 2000.0, 2: 1000.0}) is True

    experiment.refresh_from_db()
    state = experiment.adaptive_state
    assert state["ended"] == ENDED_DECIDED
    verdicts = {p["cell"]: p["verdict"] for p in state["points"]}
    assert verdicts == {1: "faster", 2: "same"}
    assert [look["rounds"] for look in state["looked"]] == [3]
    assert sorted(rounds_of(experiment)) == [1, 2, 3], "no round added"
    sentences = {p["cell"]: p["sentence"] for p in state["points"]}
    assert sentences[1].startswith("faster by 100.0 % [")
    assert sentences[2].startswith("same within ±5 % [")


def test_every_adaptive_interval_is_shown_with_its_looks_level(lab_redis, admin_client):
    # At an early look the intervals are wider than 95 %: without their level, one
    # comparison read [-81.8, -33.0] here and [-79.4, -40.6] on the compare page.
    experiment = adaptive_experiment()
    start(experiment)
    finish_round(experiment, {0: 1000.0, 1: 2000.0, 2: 1000.0})

    experiment.refresh_from_db()
    (look,) = experiment.adaptive_state["looked"]
    points = {p["cell"]: p for p in experiment.adaptive_state["points"]}
    differ_level = (1 - look["alpha"]) * 100.0
    same_level = (1 - 2 * look["alpha_same"]) * 100.0
    assert differ_level > 95.0 and same_level > 90.0
    assert points[1]["ci_level"] == pytest.approx(differ_level)
    assert points[2]["ci_level"] == pytest.approx(same_level)
    assert points[1]["sentence"].endswith(f"] ({level_text(differ_level)} interval)")
    assert points[2]["sentence"].endswith(f"] ({level_text(same_level)} interval)")
    page = admin_client.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    assert f"({level_text(differ_level)} interval)" in page
    api = admin_client.get(f"/api/experiments/{experiment.pk}/").json()
    api_points = {p["cell"]: p for p in api["adaptive_state"]["points"]}
    assert api_points[1]["ci_level"] == pytest.approx(differ_level)


def test_experiments_read_as_one_answer_share_the_error_and_the_page_says_so(
    lab_redis, admin_client
):
    # A patch try's battery exits "slower" when any experiment is: five of them each at
    # 5 % would call a patch that changes nothing slower or faster in about 23 % of tries.
    alone, shared = adaptive_experiment(), adaptive_experiment(profiles="q")
    start(alone)
    start(shared)
    adaptive_share_alpha(shared, 5)
    for experiment in (alone, shared):
        finish_round(experiment, {0: 1000.0, 1: 2000.0, 2: 1000.0})
        experiment.refresh_from_db()
    (alone_look,) = alone.adaptive_state["looked"]
    (shared_look,) = shared.adaptive_state["looked"]
    looks = tuple(shared.adaptive_state["looks"])
    assert shared_look["alpha"] == pytest.approx(look_levels(looks, ALPHA / 5)[0].alpha)
    assert shared_look["alpha"] == pytest.approx(alone_look["alpha"] / 5, rel=0.05)
    assert shared_look["alpha_same"] < alone_look["alpha_same"]
    page = admin_client.get(reverse("experiment-detail", args=[shared.pk])).content.decode()
    assert "error rates at 1 % over all looks" in page
    assert "one of 5 experiments read as one answer" in page
    with pytest.raises(ValueError, match="has looked already"):
        adaptive_share_alpha(shared, 2)


def test_only_undecided_cells_and_the_first_get_more_rounds(lab_redis):
    experiment = adaptive_experiment()
    start(experiment)
    # Cell 1 is twice as fast; cell 2 is 3 % faster with a spread that leaves it open.
    finish_round(experiment, {0: 1000.0, 1: 2000.0, 2: 1030.0}, spread=0.05)

    experiment.refresh_from_db()
    assert experiment.adaptive_state["ended"] == ""
    assert rounds_of(experiment)[4] == [0, 2]
    fourth = experiment.runs.filter(round=4)
    assert all(run.spec["sweep"]["first_repeat"] == 4 for run in fourth)
    assert {run.token for run in fourth} and all(run.token for run in fourth)


def test_a_step_while_the_round_runs_or_taken_twice_changes_nothing(lab_redis):
    experiment = adaptive_experiment()
    start(experiment)
    assert adaptive_step(experiment.pk) is False, "the first rounds still run"

    finish_round(experiment, {0: 1000.0, 1: 1030.0, 2: 1030.0}, spread=0.05)
    queued = experiment.runs.count()

    assert adaptive_step(experiment.pk) is False
    assert adaptive_steps_due() == 0
    assert experiment.runs.count() == queued


def test_undecided_at_the_budget_ends_with_the_budget_spent(lab_redis):
    experiment = adaptive_experiment(cells=2, max_rounds=4)
    start(experiment)
    finish_round(experiment, {0: 1000.0, 1: 1030.0}, spread=0.05)
    assert rounds_of(experiment)[4] == [0, 1]

    finish_round(experiment, {0: 1000.0, 1: 1030.0}, spread=0.05)

    experiment.refresh_from_db()
    assert experiment.adaptive_state["ended"] == ENDED_BUDGET
    assert [p["verdict"] for p in experiment.adaptive_state["points"]] == ["undecided"]
    assert max(rounds_of(experiment)) == 4


def test_the_time_limit_ends_with_a_last_look_at_the_rounds_measured(lab_redis, admin_client):
    # Looks after rounds 3, 6 and 12; the hours end after round 5: rounds 4 and 5 were
    # never judged, and the answer was round 3's "undecided".
    experiment = adaptive_experiment(cells=2, max_hours=1.0)
    start(experiment)
    finish_round(experiment, {0: 1000.0, 1: 1100.0}, spread=0.05)
    experiment.refresh_from_db()
    assert [p["verdict"] for p in experiment.adaptive_state["points"]] == ["undecided"]
    finish_round(experiment, {0: 1000.0, 1: 1100.0}, spread=0.05)
    two_hours_ago = timezone.now() - timedelta(hours=2)
    experiment.runs.update(started_at=two_hours_ago)

    finish_round(experiment, {0: 1000.0, 1: 1100.0}, spread=0.05)

    experiment.refresh_from_db()
    state = experiment.adaptive_state
    assert state["ended"] == ENDED_HOURS
    assert max(rounds_of(experiment)) == 5
    first, last = state["looked"]
    assert (first["rounds"], last["rounds"], last["ended"]) == (3, 5, ENDED_HOURS)
    assert last["alpha"] == pytest.approx(last_look_level((3, 6, 12), 5).alpha)
    assert first["alpha"] < last["alpha"] < 0.05
    (point,) = state["points"]
    assert (point["verdict"], point["rounds"]) == ("faster", 5)
    assert point["sentence"].endswith(f"; last look after round 5: {ENDED_HOURS}")
    page = admin_client.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    assert f"last look after round 5: {ENDED_HOURS}" in page


def test_a_cancelled_run_ends_the_experiment_without_more_rounds(lab_redis):
    experiment = adaptive_experiment(cells=2)
    runs = start(experiment)
    services.run_cancel(runs[0], UserFactory())
    finish_round(experiment, {0: 1000.0, 1: 1030.0}, spread=0.05)

    experiment.refresh_from_db()
    assert experiment.adaptive_state["ended"] == ENDED_CANCELLED
    assert max(rounds_of(experiment)) == 3


def test_a_run_that_ends_sends_the_step_to_the_control_worker(
    lab_redis, django_capture_on_commit_callbacks, monkeypatch
):
    experiment = adaptive_experiment(cells=2)
    run = start(experiment)[0]

    with django_capture_on_commit_callbacks() as callbacks:
        services.run_finish(run, Run.Status.SUCCEEDED)

    sends = [c.args[2] for c in callbacks if isinstance(c, partial) and c.func is send_or_log]
    steps = [s.args for s in sends if isinstance(s, partial) and s.func is adaptive_step_send]
    assert steps == [(experiment.pk,)]
    sent = []
    monkeypatch.setattr(adaptive.app, "send_task", lambda *a, **kw: sent.append((a, kw)))
    adaptive_step_send(experiment.pk)
    assert sent == [((adaptive.ADAPTIVE_TASK,), {"args": [experiment.pk], "queue": "control"})]


def test_the_reaper_takes_a_step_whose_message_was_lost(lab_redis):
    experiment = adaptive_experiment()
    start(experiment)
    for run in experiment.runs.all():
        Result.objects.create(run=run, index=0, clients=2, repeat=run.round, tps=1000.0 + run.cell)
        services.run_finish(run, Run.Status.SUCCEEDED)

    assert adaptive_steps_due() == 1

    experiment.refresh_from_db()
    assert experiment.adaptive_state["looked"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"execution": "blocks"}, "execution"),
        ({"repeats": 2}, "repeats"),
        ({"max_rounds": None}, "max_rounds"),
        ({"max_rounds": 2}, "max_rounds"),
        ({"max_rounds": 10_000}, "max_rounds"),
        ({"margin_pct": 0.0}, "margin_pct"),
        ({"min_effect_pct": 80.0}, "min_effect_pct"),
        ({"max_hours": 0.0}, "max_hours"),
    ],
)
def test_an_adaptive_design_that_cannot_run_is_refused_naming_the_field(fields, field):
    experiment = adaptive_experiment(**fields)

    with pytest.raises(JobError) as refused:
        start(experiment)

    assert refused.value.field == field
    assert not experiment.runs.exists()


def test_one_cell_has_nothing_to_compare_with(lab_redis):
    with pytest.raises(JobError, match="at least two") as refused:
        start(adaptive_experiment(cells=1))
    assert refused.value.field == "adaptive"


def test_the_estimate_gives_the_first_rounds_the_expected_and_the_longest_time():
    experiment = adaptive_experiment(cells=2, max_rounds=24)

    estimate = services.experiment_estimate(experiment)

    assert estimate["runs"] == 6
    first = estimate["estimated_seconds"]
    # Rounds after the first look may run points twice as long (longer points pay).
    experiment.duration_s *= 2
    longer_first = services.experiment_estimate(experiment)["estimated_seconds"]
    most = first + longer_first * (24 - 3) / 3
    assert first and estimate["max_seconds"] == pytest.approx(most, rel=0.01)
    assert first < estimate["expected_seconds"] <= estimate["max_seconds"]


def test_points_run_longer_after_a_look_when_second_to_second_noise_dominates(
    lab_redis, admin_client
):
    experiment = adaptive_experiment(cells=2)
    start(experiment)
    # Seconds swinging by 40 % around repeats 5 % apart: longer windows pay, not rounds.
    finish_round(experiment, {0: 1000.0, 1: 1030.0}, spread=0.05, swing=0.4)

    experiment.refresh_from_db()
    lengthened = experiment.adaptive_state["lengthened"]
    assert lengthened["from_round"] == 4 and lengthened["factor"] == 2
    assert "longer points narrow the interval faster" in lengthened["advice"]
    first, fourth = experiment.runs.get(round=1, cell=0), experiment.runs.get(round=4, cell=0)
    assert fourth.spec["sweep"]["duration_s"] == 2 * first.spec["sweep"]["duration_s"]
    page = admin_client.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    assert "From round 4, points run 2 times as long: " in page


def test_points_keep_their_length_when_rounds_pay(lab_redis):
    experiment = adaptive_experiment(cells=2)
    start(experiment)
    finish_round(experiment, {0: 1000.0, 1: 1030.0}, spread=0.05, swing=0.001)

    experiment.refresh_from_db()
    # The split was there to read, and it said rounds pay.
    measured = Result.objects.filter(run__experiment=experiment)
    repeats = [
        list(measured.filter(run__cell=cell).values_list("tps", flat=True)) for cell in (0, 1)
    ]
    split = adaptive_rounds.experiment_split(experiment, repeats)
    assert split is not None and split.more_rounds_pay
    assert "lengthened" not in experiment.adaptive_state
    first, fourth = experiment.runs.get(round=1, cell=0), experiment.runs.get(round=4, cell=0)
    assert fourth.spec["sweep"]["duration_s"] == first.spec["sweep"]["duration_s"]


def test_a_lengthened_point_stops_at_the_longest_the_field_allows(lab_redis):
    experiment = adaptive_experiment(cells=2)
    start(experiment)
    run = experiment.runs.get(round=1, cell=0)
    week = 7 * 24 * 3600
    run.spec["sweep"] = {**run.spec["sweep"], "duration_s": week - 3600}
    checked = adaptive._checked_cell(run, adaptive.LONGER_POINTS_FACTOR)
    assert checked.spec["sweep"]["duration_s"] == week
    run.spec["sweep"] = {**run.spec["sweep"], "duration_s": None, "transactions": 10**12 - 1}
    checked = adaptive._checked_cell(run, adaptive.LONGER_POINTS_FACTOR)
    assert checked.spec["sweep"]["transactions"] == 10**12


def test_a_change_measured_for_precision_gets_rounds_after_its_verdict(lab_redis):
    """A bisection's step 0: cell 1 is 10 % slower, clear at the first look, but its
    rounds' ratios spreading by about 1 % leave its change known to over a twentieth of
    itself, so rounds go on (the verdict kept) until it is known to that share or the
    budget ends."""
    experiment = adaptive_experiment(cells=2, max_rounds=48)
    start(experiment)
    experiment.refresh_from_db()
    adaptive_require_precision(experiment, 0.05)

    finish_round(experiment, {0: 1000.0, 1: 900.0}, spread=0.011)

    experiment.refresh_from_db()
    state = experiment.adaptive_state
    (point,) = state["points"]
    assert point["verdict"] == "slower" and state["ended"] == ""
    assert point["log_se"] > 0.05 * abs(math.log1p(point["pct"] / 100))
    while finish_round(experiment, {0: 1000.0, 1: 900.0}, spread=0.011):
        experiment.refresh_from_db()
        if experiment.adaptive_state["ended"]:
            break
    (point,) = experiment.adaptive_state["points"]
    assert experiment.adaptive_state["ended"] == ENDED_DECIDED
    assert point["verdict"] == "slower" and point["rounds"] > 3
    assert point["log_se"] <= 0.05 * abs(math.log1p(point["pct"] / 100))
    assert point["sentence"].startswith("slower by 10.")
    assert point["design"] == f"paired over {point['rounds']} rounds"


def test_precision_is_not_asked_of_a_cell_found_the_same(lab_redis):
    experiment = adaptive_experiment(cells=2)
    start(experiment)
    experiment.refresh_from_db()
    adaptive_require_precision(experiment, 0.25)

    finish_round(experiment, {0: 1000.0, 1: 1000.0})

    experiment.refresh_from_db()
    assert experiment.adaptive_state["ended"] == ENDED_DECIDED


def test_the_report_of_an_adaptive_experiment_answers_by_its_looks(lab_redis, admin_client):
    # Three rounds 3 % apart, the first cell's spreading by 1 %: a test at 95 % on them
    # says faster (t 5.2 at 2 df), the first look, which spends a part of the 5 % (and
    # whose rounds may grow), says undecided. The report, whose outcome is an exit code,
    # must say what the look said.
    experiment = adaptive_experiment(cells=2, min_effect_pct=1.0)
    start(experiment)
    finish_round(experiment, {0: 1000.0, 1: 1030.0}, spread=0.01)
    experiment.refresh_from_db()
    (point,) = experiment.adaptive_state["points"]
    assert point["verdict"] == "undecided"
    shown = point["shown"]
    url = f"/api/experiments/{experiment.pk}/"
    (fixed,) = [
        row
        for row in admin_client.get(url + "statistics/").json()["rows"]
        if row["metric"] == "tps" and not row["is_baseline"]
    ]
    assert fixed["verdict"] == "faster", "the case: a test at 95 % would call it"

    report = admin_client.get(url + "report/", {"format": "json"}).json()
    (row,) = report["cells"]
    assert (row["verdict"], row["diff_pct"]) == ("undecided", shown["pct"])
    assert (row["diff_ci_low_pct"], row["diff_ci_high_pct"]) == (shown["low"], shown["high"])
    assert row["interval_level_pct"] == shown["level"] > 95.0
    assert row["answered_by"] == "adaptive look after 3 rounds, " + point["design"]
    assert report["outcome"] == "undecided"
    text = admin_client.get(url + "report/", {"format": "text"}).content.decode()
    assert f"{shown['pct']:+.1f}% [{shown['low']:+.1f}, {shown['high']:+.1f}]" in text
    assert f"intervals ({shown['level']:.1f}%) from the adaptive looks" in " ".join(text.split())
