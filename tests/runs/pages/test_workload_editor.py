"""The workload editor does what the API does: several scripts with weights, -v, processes."""

import json

import pytest
from django.urls import reverse

from runs.models import Workload

pytestmark = pytest.mark.django_db

BASE = {"scale": "1", "init_steps": "dtgvp", "query_mode": "simple", "latency_log": "sampled"}


def test_builtin_and_custom_scripts_are_saved_with_their_weights(signed_in):
    signed_in.post(
        reverse("workload-new"),
        {
            **BASE,
            "name": "mix",
            "weight_tpcb_like": "3",
            "builtins": ["select-only"],
            "script_name": "reads",
            "script_text": "SELECT 1;\r\n",
            "script_weight": "5",
            "script_name_1": "writes",
            "script_text_1": "SELECT 2;\n",
            "script_weight_1": "2",
            "vacuum_all": "on",
            "defines_text": "rows=10",
        },
    )

    workload = Workload.objects.get(name="mix")
    assert workload.scripts == [
        {"builtin": "tpcb-like", "weight": 3},
        {"builtin": "select-only", "weight": 1},
        {"name": "reads", "text": "SELECT 1;\n", "weight": 5},
        {"name": "writes", "text": "SELECT 2;\n", "weight": 2},
    ]
    assert workload.vacuum_all is True
    page = signed_in.get(reverse("workload-detail", args=[workload.pk])).content.decode()
    assert 'name="script_text_2"' in page, "an empty slot to add a third custom script"
    assert 'name="weight_tpcb_like" value="3"' in page


def test_processes_are_saved_and_a_bad_one_is_refused_next_to_the_field(signed_in):
    processes = [{"scripts": [{"name": "t1", "text": "SELECT 1;\n", "weight": 1}], "clients": 1}]
    signed_in.post(
        reverse("workload-new"),
        {
            **BASE,
            "name": "split",
            "builtins": ["tpcb-like"],
            "processes_text": json.dumps(processes),
        },
    )
    assert (
        Workload.objects.get(name="split").processes == [{**processes[0], "threads": None}]
        or Workload.objects.get(name="split").processes == processes
    )

    page = signed_in.post(
        reverse("workload-new"),
        {**BASE, "name": "bad", "builtins": ["tpcb-like"], "processes_text": '[{"clients": 1}]'},
    ).content.decode()
    assert '<div class="field has-error" id="field-processes_text">' in page
    assert not Workload.objects.filter(name="bad").exists()


def test_vacuum_all_with_no_vacuum_is_refused(signed_in):
    page = signed_in.post(
        reverse("workload-new"),
        {**BASE, "name": "both", "builtins": ["tpcb-like"], "vacuum_all": "on", "no_vacuum": "on"},
    ).content.decode()
    assert "-v and -n exclude each other" in page
    assert not Workload.objects.filter(name="both").exists()
