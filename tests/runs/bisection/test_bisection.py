"""Bisections in the lab (runs/bisection/): each step an adaptive experiment, the range
halved on each verdict, a commit that does not build skipped, cancel, the API and the
form's errors. The runs here are finished by the test, with the build records an agent
would send; tests/e2e/test_bisection.py has a real agent build and measure them."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from django.utils import timezone

from runs import services
from runs.bisection.origins import alert_commits
from runs.bisection.report import bisection_report
from runs.bisection.reproduce import bisection_script
from runs.bisection.services import bisection_advance, bisection_cancel, bisection_start
from runs.bisection.steps import next_commit, pooled_change
from runs.inference.equivalence import MIN_MARGIN_PCT
from runs.models import (
    Alert,
    Bisection,
    BisectionStep,
    ChangePoint,
    Occurrence,
    Result,
    Run,
    Series,
)
from runs.services.adaptive import adaptive_step
from runs.services.errors import Conflict
from tests.runs.factories import (
    ConfigProfileFactory,
    ExperimentFactory,
    HostFactory,
    PgBuildFactory,
    RunFactory,
    UserFactory,
    WorkloadFactory,
)

COMMITS = [
    {"sha": f"{n:040x}", "parent": f"{n - 1:040x}", "author_date": "2026-01-01", "subject": f"c{n}"}
    for n in range(1, 9)
]


@pytest.mark.parametrize(
    ("good", "bad", "skipped", "expected"),
    [(-1, 7, set(), 3), (3, 7, set(), 5), (3, 5, set(), 4), (4, 5, set(), None), (3, 5, {4}, None),
     (-1, 7, {3}, 2), (-1, 0, set(), None)],
)  # fmt: skip
def test_the_next_commit_is_the_middle_of_what_is_left(good, bad, skipped, expected):
    bisection = Bisection(good_index=good, bad_index=bad, commits=COMMITS)
    assert next_commit(bisection, skipped) == expected


def definition_data(user, **changes) -> dict:
    return {
        "name": "find it",
        "host": HostFactory(),
        "repository": "/srv/pg.git",
        "good_ref": "base",
        "bad_ref": "head",
        "version": "15",
        "configure_flags": ["--without-icu"],
        "cflags": "-O0",
        "config_profile": ConfigProfileFactory(),
        "workload": WorkloadFactory(),
        "clients": 1,
        "duration_s": 2,
        "repeats": 3,
        "max_rounds": 6,
        "margin_pct": 10.0,
        **changes,
    }


def finish_step(
    bisection: Bisection,
    tps: float | None,
    good_tps: float = 1000.0,
    good_by_round: dict[int, float] | None = None,
) -> bool:
    """Finish the current step's queued runs as an agent would (`tps` None: the commit's
    build fails; `good_by_round`: good's tps in those rounds), take the adaptive step,
    then the bisection's."""
    step = bisection.steps.last()
    commit = COMMITS[step.commit_index if step.commit_index is not None else -1]
    for run in step.experiment.runs.filter(status=Run.Status.QUEUED):
        record = {"key": "k", "seconds": 12.5, "commit": commit}
        if step.commit_index is None and run.cell == 1:
            record["commits"] = COMMITS
        if run.cell == 1 and tps is None:
            error = {"code": "build_failed", "message": "source build failed at make"}
            services.run_finish(run, Run.Status.FAILED, error, snapshot={"build_record": record})
            continue
        good = (good_by_round or {}).get(run.round or 1, good_tps)
        # Good's rounds a little apart, so the rounds' ratios of commit to good are too.
        apart = 0.001 * ((run.round or 1) % 3 - 1) if run.cell == 0 else 0.0
        value = (good if run.cell == 0 else tps) * (1 + apart)
        Result.objects.create(run=run, index=0, clients=1, repeat=run.round, tps=value, exit_code=0)
        services.run_finish(run, Run.Status.SUCCEEDED, snapshot={"build_record": record})
    adaptive_step(step.experiment_id)
    return bisection_advance(bisection.pk)


@pytest.mark.django_db
def test_the_steps_halve_the_range_to_the_first_bad_commit(lab_redis, client):
    user = UserFactory()
    client.force_login(user)
    bisection = bisection_start(user, definition_data(user))
    first = bisection.steps.get()
    assert first.experiment.builds.count() == 2
    spec = first.experiment.runs.filter(cell=1).first().spec["postgres"]["build"]["source"]
    assert spec == {"kind": "git", "location": "/srv/pg.git", "ref": "head", "list_from": "base"}

    assert finish_step(bisection, 500.0)  # step 0: the bad ref is slower
    bisection.refresh_from_db()
    assert (bisection.good_index, bisection.bad_index, len(bisection.commits)) == (-1, 7, 8)
    assert bisection_advance(bisection.pk) is False, "a step measuring changes nothing"
    page = client.get(reverse("bisection-detail", args=[bisection.pk])).content.decode()
    assert "data-steps-left>3<" in page and 'name="cancel"' in page
    # The regression came with commit index 5 (the sixth): 3 good, 5 bad, 4 good.
    tps_of = {3: 1000.0, 5: 500.0, 4: 1000.0}
    while bisection.status == Bisection.Status.RUNNING:
        index = bisection.steps.last().commit_index
        finish_step(bisection, tps_of[index])
        bisection.refresh_from_db()
    assert bisection.status == Bisection.Status.SUCCEEDED
    assert bisection.culprit_index == 5
    outcomes = list(bisection.steps.values_list("commit_index", "outcome"))
    assert outcomes == [(None, "bad"), (3, "good"), (5, "bad"), (4, "good")]
    report = bisection_report(bisection)
    assert report.culprit is not None and report.culprit.commit["sha"] == COMMITS[5]["sha"]
    assert bisection.change_pct == pytest.approx(-50.0, abs=0.2)
    # A commit is placed at good's level or at the change's (-50 %).
    assert report.culprit.culprit_sentence.startswith("at the changed level (-50.0 %): -50.0 % [")
    assert report.culprit.parent_sentence.startswith("at the first cell's level, not -50.0 %: +0.0")
    assert report.culprit.change_at_bad_ref.startswith("slower by")
    later = bisection.steps.get(number=1).experiment
    assert later.adaptive_state["between_pct"] == pytest.approx(-50.0, abs=0.1)
    assert 0 < later.adaptive_state["between_se"] < 0.01
    assert (later.margin_pct, later.min_effect_pct) == (MIN_MARGIN_PCT, 0.0)
    step_page = client.get(reverse("experiment-detail", args=[later.pk])).content.decode()
    assert 'id="adaptive-between"' in step_page and "moved by -50.0 %" in step_page
    assert COMMITS[5]["sha"] in bisection_script(bisection).split("\n")[2]
    page = client.get(reverse("bisection-detail", args=[bisection.pk])).content.decode()
    assert f"<code data-culprit>{COMMITS[5]['sha']}</code>" in page
    assert 'name="cancel"' not in page
    assert bisection.name in client.get(reverse("bisection-list")).content.decode()
    api = client.get(f"/api/bisections/{bisection.pk}/").json()
    assert api["culprit_index"] == 5 and [s["outcome"] for s in api["steps"]][-1] == "good"


@pytest.mark.django_db
def test_a_duet_bisection_measures_each_step_s_two_builds_at_once(lab_redis):
    user = UserFactory()
    host = HostFactory(facts={"cpu": {"threads": 4}, "memory": {"total_bytes": 8 * 2**30}})
    bisection = bisection_start(user, definition_data(user, host=host, duet=True))

    first = bisection.steps.get().experiment
    assert first.duet
    rounds = first.runs.order_by("round", "cell")
    assert rounds.count() == 6
    for number in (1, 2, 3):
        good, candidate = rounds.filter(round=number)
        # One duet job per round: both builds, each its own run, sent together.
        assert good.celery_task_id == candidate.celery_task_id != ""
        assert good.spec["postgres"]["build"]["source"]["ref"] == "base"
        assert candidate.spec["postgres"]["build"]["source"]["ref"] == "head"
    assert finish_step(bisection, 500.0)
    first.refresh_from_db()
    point = next(p for p in first.adaptive_state["points"] if p["cell"] == 1)
    assert point["design"].startswith("duet over")
    later = bisection.steps.get(number=1).experiment
    assert (
        later.duet and later.runs.filter(round=1).values("celery_task_id").distinct().count() == 1
    )


@pytest.mark.django_db
def test_a_commit_that_does_not_build_is_skipped(lab_redis):
    user = UserFactory()
    bisection = bisection_start(user, definition_data(user))
    finish_step(bisection, 500.0)
    bisection.refresh_from_db()
    finish_step(bisection, None)  # commit 3 fails to build
    skipped = bisection.steps.get(commit_index=3)
    assert skipped.outcome == BisectionStep.Outcome.SKIPPED
    assert skipped.note.startswith("build_failed: source build failed at make")
    assert bisection.steps.last().commit_index == 2
    finish_step(bisection, 1000.0)  # commit 2 good; then 4 (nearest the middle of 3..6) bad
    finish_step(bisection, 500.0)
    bisection.refresh_from_db()
    assert (bisection.status, bisection.culprit_index) == (Bisection.Status.SUCCEEDED, 4)
    culprit = bisection_report(bisection).culprit
    assert culprit is not None and culprit.skipped_between == [COMMITS[3]]
    assert culprit.parent_label.endswith(
        "the last good commit (skipped between it and the culprit)"
    )


@pytest.mark.django_db
def test_a_commit_halfway_through_the_change_is_skipped_after_its_rounds(lab_redis):
    """Two regressions of -29.3 % each make the bad ref's -50 %: the commit after the first
    lies at the middle, neither side of it, so its step spends its rounds and is skipped."""
    user = UserFactory()
    bisection = bisection_start(user, definition_data(user))
    finish_step(bisection, 500.0)
    step = bisection.steps.last()
    while bisection.steps.last() == step:
        finish_step(bisection, 1000.0 * 2**-0.5)
        step.refresh_from_db()
    assert step.outcome == BisectionStep.Outcome.SKIPPED
    assert step.note == "undecided: budget of rounds spent"
    assert step.sentence.startswith(
        "undecided between the first cell's level and -50.0 %: -29.3 % ["
    )
    assert step.sentence.endswith("(paired over 6 rounds)")
    assert step.experiment.runs.filter(cell=1).count() == 6


@pytest.mark.django_db
def test_an_outlier_round_of_step_0_does_not_move_the_middle(lab_redis):
    """Good's first round three times the others, so that round's ratio is an outlier: its
    look answers from ranks (the unpaired ones while its rounds are too few for signed
    ranks at the look's level), and the change the middle is drawn from is that answer's
    (-50 %), not the geometric means' (-58 %), so commits as slow as the bad ref are not
    pushed toward the middle."""
    user = UserFactory()
    bisection = bisection_start(user, definition_data(user))
    step = bisection.steps.get()
    while bisection.steps.count() == 1 and bisection.status == Bisection.Status.RUNNING:
        finish_step(bisection, 500.0, good_by_round={1: 3000.0})
        bisection.refresh_from_db()
    step.refresh_from_db()
    assert "rank-based (round ratios: outlier round 1)" in step.sentence
    assert bisection.change_pct == pytest.approx(-50.0, abs=0.5)


@pytest.mark.django_db
def test_a_bad_ref_that_measures_the_same_ends_the_bisection(lab_redis):
    user = UserFactory()
    bisection = bisection_start(user, definition_data(user))
    finish_step(bisection, 1000.0)
    bisection.refresh_from_db()
    assert bisection.status == Bisection.Status.FAILED
    assert "does not measure slower" in bisection.error_message


@pytest.mark.django_db
def test_a_deleted_step_experiment_ends_the_bisection(lab_redis):
    user = UserFactory()
    bisection = bisection_start(user, definition_data(user))
    experiment = bisection.steps.get().experiment
    experiment.runs.all().delete()
    experiment.delete()
    assert bisection_advance(bisection.pk) is True
    bisection.refresh_from_db()
    assert bisection.status == Bisection.Status.FAILED
    assert bisection.error_message == "the experiment of step 0 was deleted"


@pytest.mark.django_db
def test_cancel_stops_the_step_and_is_for_the_owner(lab_redis):
    owner = UserFactory()
    bisection = bisection_start(owner, definition_data(owner))
    with pytest.raises(PermissionDenied):
        bisection_cancel(bisection, UserFactory())
    bisection_cancel(bisection, owner)
    assert not Run.objects.filter(status__in=(Run.Status.QUEUED, Run.Status.RUNNING)).exists()
    step = bisection.steps.get()
    assert (step.outcome, step.note) == (BisectionStep.Outcome.CANCELLED, f"cancelled by {owner}")
    with pytest.raises(Conflict):
        bisection_cancel(bisection, owner)


@pytest.mark.django_db
def test_the_page_cancels_for_the_owner_only(lab_redis, client):
    owner = UserFactory()
    bisection = bisection_start(owner, definition_data(owner))
    cancel = reverse("bisection-cancel", args=[bisection.pk])
    client.force_login(UserFactory())
    assert client.post(cancel).status_code == 403
    assert 'name="cancel"' not in client.get(bisection.get_absolute_url()).content.decode()
    client.force_login(owner)
    assert client.post(cancel).status_code == 302
    bisection.refresh_from_db()
    assert bisection.status == Bisection.Status.CANCELLED
    assert client.post(f"/api/bisections/{bisection.pk}/cancel/").status_code == 409


@pytest.mark.django_db
@pytest.mark.parametrize("ref", ["--upload-pack=touch /tmp/x", "-n", "base..head", ""])
def test_a_bad_ref_is_refused_naming_its_field(client, ref):
    user = UserFactory()
    client.force_login(user)
    data = definition_data(user)
    form = {k: getattr(v, "pk", v) for k, v in data.items()}
    form.update(good_ref=ref, configure_flags='["--without-icu"]', direction="slower")
    form["min_effect_pct"], form["storage_data"] = 1.0, "default"
    response = client.post(reverse("bisection-new"), form)
    assert response.status_code == 200
    assert response.context["form"].errors["good_ref"]
    api = client.post(
        "/api/bisections/", {**form, "configure_flags": ["--without-icu"]}, "application/json"
    )
    assert api.status_code == 400 and "good_ref" in str(api.json()), api.json()
    assert not Bisection.objects.exists()


def occurrence_built_from(series: Series, commit: str, minutes: int) -> Occurrence:
    """An occurrence whose run an agent built from `commit` of /srv/pg.git."""
    source = {"kind": "git", "location": "/srv/pg.git", "ref": "main"}
    definition = {"source": source, "configure_flags": [], "patches": [], "cflags": None}
    build = PgBuildFactory(source="build", version="15", definition=definition)
    experiment = ExperimentFactory(builds=[build], clients=[4])
    RunFactory(
        experiment=experiment,
        build=build,
        status=Run.Status.SUCCEEDED,
        build_record={"definition": definition, "source_digest": f"git:{commit}"},
    )
    when = timezone.now() - timedelta(minutes=minutes)
    return Occurrence.objects.create(series=series, experiment=experiment, fired_at=when)


@pytest.mark.django_db
def test_an_alert_between_two_commits_offers_to_find_the_commit(client):
    series = Series.objects.create(
        name="nightly", template=ExperimentFactory(), schedule="0 3 * * *"
    )
    before = occurrence_built_from(series, "a" * 40, 60)
    after = occurrence_built_from(series, "b" * 40, 10)
    change = ChangePoint.objects.create(
        series=series, metric="tps", key="cell 0, 4 clients", before_occurrence=before,
        after_occurrence=after, before=1000.0, after=800.0, change_percent=-20.0,
        low_percent=-22.0, high_percent=-18.0, p_value=1e-6,
    )  # fmt: skip
    alert = Alert.objects.create(
        series=series, occurrence=after, change_point=change, metric="tps",
        key="cell 0, 4 clients", before=1000.0, after=800.0, change_percent=-20.0,
    )  # fmt: skip
    client.force_login(UserFactory())

    alerts = client.get(reverse("alert-list")).content.decode()
    assert f"/bisections/new?alert={alert.pk}" in alerts
    form = client.get(reverse("bisection-new"), {"alert": alert.pk}).context["form"]
    assert (form.initial["good_ref"], form.initial["bad_ref"]) == ("a" * 40, "b" * 40)
    assert form.initial["repository"] == "/srv/pg.git" and form.initial["clients"] == 4

    Occurrence.objects.exclude(pk=after.pk).delete()
    assert alert_commits(alert) == "the series has no occurrence before the change point"
    assert (
        f"/bisections/new?alert={alert.pk}"
        not in client.get(reverse("alert-list")).content.decode()
    )


@pytest.mark.django_db
def test_a_run_built_from_git_offers_a_bisection_of_its_cell(client):
    source = {"kind": "git", "location": "/srv/pg.git", "ref": "main"}
    definition = {"source": source, "configure_flags": ["-O0"], "patches": [], "cflags": "-O0"}
    build = PgBuildFactory(source="build", version="15", definition=definition)
    run = RunFactory(
        experiment=ExperimentFactory(builds=[build], clients=[8], duration_s=30),
        build=build,
        status=Run.Status.SUCCEEDED,
        build_record={"key": "k", "definition": definition, "commit": COMMITS[0]},
    )
    client.force_login(UserFactory())
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    link = f"/bisections/new?experiment={run.experiment_id}&amp;cell={run.cell}"
    assert link in page
    initial = client.get(link.replace("&amp;", "&")).context["form"].initial
    assert (initial["repository"], initial["bad_ref"], initial["clients"]) == (
        "/srv/pg.git",
        "main",
        8,
    )
    assert (initial["host"], initial["duration_s"], initial["cflags"]) == (run.host_id, 30, "-O0")


@pytest.mark.django_db
def test_a_bad_commit_pools_its_change_into_the_level_the_next_is_placed_at(lab_redis):
    """Step 0 measures -50 %, the first bad commit -60 % with as many rounds and as much
    spread: the change the next commit is placed against is their pooled -55.3 %, with
    a smaller standard error than step 0's alone."""
    user = UserFactory()
    bisection = bisection_start(user, definition_data(user))
    finish_step(bisection, 500.0)
    first = bisection.steps.last().experiment.adaptive_state
    finish_step(bisection, 400.0)  # commit 3: bad

    bisection.refresh_from_db()
    assert bisection.steps.get(commit_index=3).outcome == BisectionStep.Outcome.BAD
    assert bisection.change_pct == pytest.approx(-55.3, abs=0.1)
    later = bisection.steps.last().experiment.adaptive_state
    assert later["between_pct"] == pytest.approx(-55.3, abs=0.1)
    assert later["between_se"] < first["between_se"]


@pytest.mark.django_db
def test_a_step_whose_looks_recorded_no_error_pools_with_its_stored_rounds(lab_redis):
    """Steps looked at before looks recorded `log_se`: their error comes from their
    stored rounds, the same figure the look records."""
    user = UserFactory()
    bisection = bisection_start(user, definition_data(user))
    finish_step(bisection, 500.0)
    step = bisection.steps.get(number=0)
    recorded = pooled_change([step])
    state = step.experiment.adaptive_state
    for point in state["points"]:
        del point["log_se"]
    step.experiment.save(update_fields=["adaptive_state"])

    step.experiment.refresh_from_db()
    assert recorded is not None
    assert pooled_change([step]) == pytest.approx(recorded)
