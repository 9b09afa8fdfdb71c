"""An experiment's cells keep the order they were given: the first given is cell 0, the
reference of its adaptive looks and the default baseline of a comparison of its runs.
Stored in name order, the reference (and the sign of every answer) was whichever cell
sorted first; picked by run id, the default baseline was the first run of a random
queue."""

import pytest
from django.http import QueryDict
from django.urls import reverse

from runs.forms.experiments import ScheduleForm
from runs.models import Comparison, Experiment, Run
from runs.services.adaptive_rounds import BASELINE_CELL
from runs.services.experiments import experiment_cells
from tests.runs.factories import ConfigProfileFactory, ExperimentFactory

pytestmark = pytest.mark.django_db


def test_cells_given_as_b_then_a_keep_b_first_as_reference_and_default_baseline(
    api_client, lab_redis, experiment_payload, user, client
):
    later_by_name = ConfigProfileFactory(name="zz tuned")
    earlier_by_name = ConfigProfileFactory(name="aa default")
    payload = experiment_payload(
        config_profiles=[later_by_name.pk, earlier_by_name.pk],
        execution="rounds",
        repeats=3,
        adaptive=True,
        max_rounds=6,
        clients=[2],
        seed=3,
    )
    created = api_client.post("/api/experiments/", payload, format="json")
    assert created.status_code == 201, created.json()
    experiment = Experiment.objects.get(pk=created.json()["id"])
    assert [c.config_profile for c in experiment_cells(experiment)] == [
        later_by_name,
        earlier_by_name,
    ]
    assert api_client.post(f"/api/experiments/{experiment.pk}/start/").status_code == 201
    runs = list(experiment.runs.order_by("pk"))
    assert {run.config_profile for run in runs if run.cell == BASELINE_CELL} == {later_by_name}
    client.force_login(user)
    page = client.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    heading = page.split("<h2>Adaptive: each cell against ", 1)[1].split("</h2>", 1)[0]
    assert "zz tuned" in heading and "aa default" not in heading

    # The queue's first run may be either cell; the default baseline is the first cell's.
    ticked = sorted(runs, key=lambda run: run.position, reverse=True)
    client.post(reverse("comparison-create"), {"runs": [run.pk for run in ticked]})
    baseline = Comparison.objects.get().baseline
    assert baseline is not None and baseline.config_profile == later_by_name
    assert baseline.round == 1


def test_the_schedule_form_keeps_the_order_its_choices_were_submitted_in(experiment_payload):
    later_by_name = ConfigProfileFactory(name="zz tuned")
    earlier_by_name = ConfigProfileFactory(name="aa default")
    payload = experiment_payload()
    data = QueryDict(mutable=True)
    data.update(
        {
            "name": "ordered",
            "storage": "default",
            "clients": "1",
            "duration_s": "5",
            "repeats": "1",
            "warmup_s": "0",
            "order": "ascending",
            "between_points": "checkpoint",
            "execution": "rounds",
        }
    )
    data.setlist("hosts", [str(pk) for pk in payload["hosts"]])
    data.setlist("builds", [str(pk) for pk in payload["builds"]])
    data.setlist("workloads", [str(pk) for pk in payload["workloads"]])
    data.setlist("config_profiles", [str(later_by_name.pk), str(earlier_by_name.pk)])
    form = ScheduleForm(data)
    if not form.is_valid():
        pytest.fail(str(form.errors))
    assert form.service_data()["config_profiles"] == [later_by_name, earlier_by_name]


def test_an_experiment_made_before_the_order_was_kept_goes_by_name():
    profiles = [ConfigProfileFactory(name="zz tuned"), ConfigProfileFactory(name="aa default")]
    experiment = ExperimentFactory(config_profiles=profiles)
    assert experiment.cell_order == {}
    assert [c.config_profile.name for c in experiment_cells(experiment)] == [
        "aa default",
        "zz tuned",
    ]
    assert Run.objects.count() == 0
