"""The experiment page: its runs and a metric against clients."""

import json
import re

import pytest
from django.urls import reverse

from tests.runs.factories import ExperimentFactory
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.django_db


def figure(page: str, element_id: str) -> dict:
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', page)
    return json.loads(match.group(1))


def test_chart_has_one_line_per_run_with_the_mean_and_error_bars(signed_in):
    experiment = ExperimentFactory()
    finished_run(
        [(1, 1, 100.0, 1.0), (1, 2, 120.0, 1.0), (4, 1, 300.0, 1.0)], experiment=experiment
    )
    finished_run([(1, 1, 200.0, 1.0), (4, 1, 500.0, 1.0)], experiment=experiment)
    page = signed_in.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    data = figure(page, "fig-experiment")["data"]
    assert len(data) == 2
    assert data[0]["type"] == "scatter" and data[0]["x"] == [1, 4]
    assert data[0]["y"] == [110.0, 300.0]
    assert data[0]["error_y"]["array"] == [10.0, 0.0]


def test_one_client_count_is_drawn_as_bars_and_latency_can_be_chosen(signed_in):
    experiment = ExperimentFactory()
    finished_run([(20, 1, 400.0, 50.0)], experiment=experiment)
    url = reverse("experiment-detail", args=[experiment.pk])
    page = signed_in.get(url, {"metric": "latency_avg_ms"}).content.decode()
    data = figure(page, "fig-experiment")["data"]
    assert data[0]["type"] == "bar" and data[0]["y"] == [50.0]


def test_experiment_list_links_each_experiment(signed_in):
    experiment = ExperimentFactory(name="versions")
    page = signed_in.get(reverse("experiment-list")).content.decode()
    assert "versions" in page and reverse("experiment-detail", args=[experiment.pk]) in page


def test_plotly_is_served_from_the_python_package(signed_in):
    response = signed_in.get(reverse("plotly-js"))
    assert response.status_code == 200
    assert b"plotly" in b"".join(response.streaming_content)[:2000].lower()
