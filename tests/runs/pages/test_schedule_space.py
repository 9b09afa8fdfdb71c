"""The schedule form refuses a dataset a host's storage target has no room for."""

import pytest
from django.urls import reverse

from runs.models import Experiment
from tests.runs.factories import ConfigProfileFactory, PgBuildFactory, WorkloadFactory
from tests.runs.pages.test_schedule import field_errors, form_data
from tests.runs.services.test_space_check import host_with_space

pytestmark = pytest.mark.django_db


def test_the_schedule_form_shows_the_refusal_next_to_storage(signed_in):
    catalogue = {
        "hosts": host_with_space(default=50),
        "builds": PgBuildFactory(),
        "config_profiles": ConfigProfileFactory(),
        "workloads": WorkloadFactory(scale=20),
    }
    page = signed_in.post(reverse("schedule"), form_data(catalogue, start="1")).content.decode()
    assert "has 50 MB free" in field_errors(page, "storage")
    assert not Experiment.objects.exists()
