"""Scheduling an experiment from one form; errors next to the field."""

import re

import pytest
from django.urls import reverse

from runs import services
from runs.agentlink.execution import execution_plan
from runs.models import Experiment, Run
from tests.runs.factories import (
    ConfigProfileFactory,
    HostFactory,
    PgBuildFactory,
    WorkloadFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def catalogue():
    return {
        "hosts": HostFactory(),
        "builds": PgBuildFactory(),
        "config_profiles": ConfigProfileFactory(),
        "workloads": WorkloadFactory(),
    }


def form_data(catalogue, **overrides) -> dict:
    data = {
        "name": "sweep",
        "hosts": [catalogue["hosts"].pk],
        "builds": [catalogue["builds"].pk],
        "config_profiles": [catalogue["config_profiles"].pk],
        "workloads": [catalogue["workloads"].pk],
        "storage": "default",
        "clients": "1,2",
        "duration_s": "3",
        "repeats": "1",
        "warmup_s": "0",
        "order": "ascending",
        "between_points": "checkpoint",
        "execution": "rounds",
        "seed": "",
    }
    return {**data, **overrides}


def field_errors(page: str, field: str) -> str:
    """The text of the field's own block, which must be marked as having an error."""
    start = page.find(f'<div class="field has-error" id="field-{field}">')
    assert start >= 0, f"no error next to {field}"
    end = page.find('<div class="field', start + 1)
    block = page[start : end if end > 0 else None]
    assert '<ul class="errorlist"' in block
    return block


def test_start_queues_one_run_per_cell_and_opens_the_experiment(signed_in, catalogue, lab_redis):
    response = signed_in.post(reverse("schedule"), form_data(catalogue, start="1"))
    experiment = Experiment.objects.get()
    assert response["Location"] == reverse("experiment-detail", args=[experiment.pk])
    assert list(experiment.runs.values_list("status", flat=True)) == [Run.Status.QUEUED]


def test_review_first_creates_a_draft_with_the_estimate(signed_in, catalogue):
    response = signed_in.post(reverse("schedule"), form_data(catalogue, review="1"), follow=True)
    page = response.content.decode()
    assert not Run.objects.exists()
    assert "Ready to start" in page
    assert re.search(r"<strong>1</strong> run\b", page)
    assert "<strong>2</strong> measured points" in page


def test_bad_client_list_is_shown_next_to_the_clients_field(signed_in, catalogue):
    page = signed_in.post(reverse("schedule"), form_data(catalogue, clients="1,x")).content.decode()
    assert "“x” is not a client count" in field_errors(page, "clients")
    assert not Experiment.objects.exists()


def test_duration_and_transactions_together_are_refused(signed_in, catalogue):
    data = form_data(catalogue, transactions="100")
    page = signed_in.post(reverse("schedule"), data).content.decode()
    assert "not both" in field_errors(page, "transactions")


def test_missing_choices_are_shown_next_to_their_fields(signed_in, catalogue):
    page = signed_in.post(reverse("schedule"), form_data(catalogue, hosts=[])).content.decode()
    assert "pick at least one host" in field_errors(page, "hosts")


def test_refused_setting_is_shown_next_to_the_config_profiles(signed_in, catalogue):
    catalogue["config_profiles"].settings = {"archive_command": "cp %p /tmp/%f"}
    catalogue["config_profiles"].save()
    page = signed_in.post(reverse("schedule"), form_data(catalogue)).content.decode()
    assert "archive_command" in field_errors(page, "config_profiles")
    assert not Experiment.objects.exists()


def test_unknown_storage_target_of_a_host_is_shown_next_to_storage(signed_in, catalogue):
    catalogue["hosts"].storage_targets.create(name="nvme", path="/mnt/nvme")
    page = signed_in.post(reverse("schedule"), form_data(catalogue)).content.decode()
    assert "has no storage target “default” (it has: nvme)" in field_errors(page, "storage")


def test_form_asks_the_server_for_its_live_estimate(signed_in, catalogue):
    page = signed_in.get(reverse("schedule")).content.decode()
    assert f'data-estimate-url="{reverse("schedule-estimate")}"' in page
    assert "schedule.js" in page


def test_the_live_estimate_is_the_estimate_of_the_experiment_the_form_schedules(
    signed_in, catalogue
):
    second = ConfigProfileFactory()
    data = form_data(catalogue, repeats="3", warmup_s="5", clients="1,2,4", name="")
    data["config_profiles"] = [second.pk, catalogue["config_profiles"].pk]

    live = signed_in.get(reverse("schedule-estimate"), data)
    signed_in.post(reverse("schedule"), {**data, "name": "sweep", "review": "1"})

    assert live.status_code == 200
    assert live.json() == services.experiment_estimate(Experiment.objects.get())
    assert live.json()["runs"] == 6 and live.json()["estimated_seconds"] > 0
    assert not Experiment.objects.exclude(name="sweep").exists(), "estimating saves nothing"


def test_a_sweep_by_transactions_is_estimated_by_the_form_and_review_alike_said_a_guess(
    signed_in, catalogue
):
    """The host has measured no rate yet: the form's live answer and Review give the same
    time from the guessed tps and both say it is a guess."""
    data = form_data(catalogue, duration_s="", transactions="2000", clients="1,4")

    live = signed_in.get(reverse("schedule-estimate"), data)
    review = signed_in.post(reverse("schedule"), {**data, "review": "1"}, follow=True)

    estimate = services.experiment_estimate(Experiment.objects.get())
    assert live.json() == estimate
    assert estimate["transaction_rates"] == "guessed" and estimate["estimated_seconds"] > 0
    page = review.content.decode()
    assert "points by transactions at a guessed 1,000 tps" in page
    assert "depends on the transaction rate" not in page


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"hosts": ["999999"]}, "hosts"),
        ({"workloads": ["not-a-pk"]}, "workloads"),
        ({"clients": "1,two"}, "clients"),
        ({"repeats": "-1"}, "repeats"),
        ({"repeats": "99999999999999999999"}, "repeats"),
        ({"duration_s": "ten"}, "duration_s"),
        ({"execution": "sideways"}, "execution"),
        ({"repeats": "1000"}, "repeats"),
        ({"adaptive": "on", "repeats": "3", "max_rounds": "100000000"}, "max_rounds"),
        ({"adaptive": "on", "repeats": "3", "max_rounds": "6", "margin_pct": "-5"}, "margin_pct"),
        ({"adaptive": "on", "execution": "blocks"}, "execution"),
    ],
)
def test_the_live_estimate_of_values_that_make_no_experiment_names_the_field(
    signed_in, catalogue, overrides, field
):
    two_configs = [catalogue["config_profiles"].pk, ConfigProfileFactory().pk]
    data = form_data(catalogue, config_profiles=two_configs, **overrides)

    answer = signed_in.get(reverse("schedule-estimate"), data)

    assert answer.status_code == 400
    assert list(answer.json()["errors"]) == [field]


def test_the_live_estimate_is_for_signed_in_users_and_only_reads(client, signed_in, catalogue):
    assert client.get(reverse("schedule-estimate"), form_data(catalogue)).status_code == 302
    assert signed_in.post(reverse("schedule-estimate"), form_data(catalogue)).status_code == 405


def test_rounds_queue_every_repeat_as_a_run_in_the_order_drawn_from_the_given_seed(
    signed_in, catalogue, lab_redis
):
    second = ConfigProfileFactory()
    data = form_data(catalogue, start="1", repeats="3", seed="99")
    data["config_profiles"] = [catalogue["config_profiles"].pk, second.pk]

    signed_in.post(reverse("schedule"), data)

    experiment = Experiment.objects.get()
    assert (experiment.execution, experiment.seed) == ("rounds", 99)
    recorded = list(experiment.runs.order_by("position").values_list("cell", "round"))
    assert recorded == [(s.cell, s.round) for s in execution_plan(2, 3, "rounds", 99)]


def test_without_a_seed_one_is_drawn_and_recorded(signed_in, catalogue):
    signed_in.post(reverse("schedule"), form_data(catalogue, review="1"))
    assert Experiment.objects.get().seed is not None


def test_blocks_keep_all_repeats_of_a_cell_in_one_run(signed_in, catalogue, lab_redis):
    data = form_data(catalogue, start="1", repeats="3", execution="blocks")
    signed_in.post(reverse("schedule"), data)
    (run,) = Experiment.objects.get().runs.all()
    assert (run.round, run.spec["sweep"]["repeats"]) == (None, 3)


def test_random_client_order_is_offered_and_reaches_the_spec_with_a_seed(
    signed_in, catalogue, lab_redis
):
    page = signed_in.get(reverse("schedule")).content.decode()
    assert '<option value="random">' in page
    signed_in.post(reverse("schedule"), form_data(catalogue, start="1", order="random"))
    sweep = Run.objects.get().spec["sweep"]
    assert sweep["order"] == "random" and isinstance(sweep["seed"], int)


def test_a_negative_seed_is_shown_next_to_the_seed_field(signed_in, catalogue):
    page = signed_in.post(reverse("schedule"), form_data(catalogue, seed="-1")).content.decode()
    assert "greater than or equal to 0" in field_errors(page, "seed")
    assert not Experiment.objects.exists()


def test_review_first_in_rounds_counts_a_cluster_setup_per_repeat(signed_in, catalogue):
    data = form_data(catalogue, review="1", repeats="3")
    page = signed_in.post(reverse("schedule"), data, follow=True).content.decode()
    assert re.search(r"<strong>3</strong> runs \(one cluster setup each\)", page)
    assert "in cluster setups" in page


def test_what_the_check_could_not_cover_is_said_after_scheduling(signed_in, catalogue):
    response = signed_in.post(reverse("schedule"), form_data(catalogue, review="1"), follow=True)
    assert "the agent validates the rest" in response.content.decode()


@pytest.mark.parametrize("path", ["/schedule/", "/experiments/new"])
def test_the_schedule_form_answers_at_its_name_and_at_its_first_address(signed_in, path):
    page = signed_in.get(f"{path}?preset=smoke").content.decode()
    assert 'id="schedule-form"' in page and 'name="clients"' in page
    assert re.search(r'<a href="/schedule/" class="active" aria-current="page">Schedule</a>', page)
    assert reverse("schedule") == "/schedule/"
