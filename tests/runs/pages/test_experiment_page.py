"""The experiment page: its runs and a metric against clients."""

import json
import re

import numpy as np
import pytest
from django.urls import reverse
from scipy import stats

from tests.runs.factories import ExperimentFactory
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.django_db


def figure(page: str, element_id: str) -> dict:
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', page)
    return json.loads(match.group(1))


def test_chart_has_one_line_per_run_with_the_mean_and_confidence_intervals(signed_in):
    experiment = ExperimentFactory()
    finished_run(
        [(1, 1, 100.0, 1.0), (1, 2, 120.0, 1.0), (4, 1, 300.0, 1.0)], experiment=experiment
    )
    finished_run([(1, 1, 200.0, 1.0), (4, 1, 500.0, 1.0)], experiment=experiment)
    page = signed_in.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    data = figure(page, "fig-experiment")["data"]
    assert len(data) == 2
    assert data[0]["type"] == "scatter" and data[0]["x"] == [1, 4]
    geometric = stats.gmean([100.0, 120.0])
    assert data[0]["y"] == [pytest.approx(geometric), 300.0]
    # t(0.975, 1) x sd / sqrt(2) of the logs: the 95 % interval of two repeats, not their range.
    half = stats.t.ppf(0.975, 1) * stats.sem(np.log([100.0, 120.0]))
    high, low = geometric * np.exp(half) - geometric, geometric - geometric * np.exp(-half)
    assert data[0]["error_y"]["array"] == [pytest.approx(high), 0.0]
    assert data[0]["error_y"]["arrayminus"] == [pytest.approx(low), 0.0]


def test_the_summary_names_each_chosen_sweep_field_by_its_declared_label(signed_in):
    experiment = ExperimentFactory(order="interleaved", between_points="vacuum")
    page = signed_in.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    assert "client order: interleaved · between points: vacuum" in page


def test_statistics_table_lists_each_point_with_its_interval_and_mde(signed_in):
    experiment = ExperimentFactory()
    run = finished_run(
        [(4, 1, 1000.0, 1.0), (4, 2, 1020.0, 1.0), (4, 3, 1010.0, 1.0)], experiment=experiment
    )
    page = signed_in.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    row = re.search(rf'<tr data-run="{run.pk}" data-clients="4"[^>]*>(.*?)</tr>', page, re.S).group(
        1
    )
    logs = np.log([1000.0, 1020.0, 1010.0])
    log_low, log_high = stats.t.interval(0.95, 2, loc=logs.mean(), scale=stats.sem(logs))
    low, high = np.exp(log_low), np.exp(log_high)
    assert '<td class="num" data-col="n">3</td>' in row
    assert f"{low:,.1f} – {high:,.1f}" in row
    assert re.search(r'data-col="mde">±\d+\.\d %', row)


def test_a_point_with_a_warning_is_marked_in_the_chart_and_the_table(signed_in):
    experiment = ExperimentFactory()
    run = finished_run(
        [(4, 1, 1000.0, 1.0), (4, 2, 1020.0, 1.0), (4, 3, 1010.0, 1.0)],
        experiment=experiment,
        effective_settings=[{"name": "fsync", "setting": "off", "unit": None}],
    )
    page = signed_in.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    (trace,) = figure(page, "fig-experiment")["data"]
    assert trace["type"] == "bar" and trace["marker"]["pattern"]["shape"] == ["x"]
    assert "unsafe settings: fsync=off" in trace["hovertext"][0]
    row = re.search(
        rf'<tr data-run="{run.pk}" data-clients="4" class="warned">(.*?)</tr>', page, re.S
    )
    assert 'data-warning="unsafe_settings"' in row.group(1)
    assert "a crash can corrupt the cluster" in page  # the legend says why it matters


def test_the_peak_is_annotated_and_listed(signed_in):
    experiment = ExperimentFactory()
    run = finished_run(
        [(1, 1, 500.0, 1.0), (8, 1, 2500.0, 3.0), (32, 1, 2100.0, 9.0)], experiment=experiment
    )
    page = signed_in.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    (annotation,) = figure(page, "fig-experiment")["layout"]["annotations"]
    assert (annotation["x"], annotation["y"], annotation["text"]) == (8, 2500.0, "peak 2,500.0 @ 8")
    peaks = re.search(
        rf'<tr data-run="{run.pk}">(.*?)</tr>', page.split('id="peaks-table"')[1], re.S
    )
    assert 'data-col="peak-tps">peak 2,500.0</td>' in peaks.group(1)


def test_past_four_runs_the_peaks_leave_the_chart_for_a_table_under_it(signed_in):
    experiment = ExperimentFactory()
    for n in range(5):
        points = [(1, 1, 500.0 + n, 1.0), (8, 1, 2500.0 + n, 3.0)]
        finished_run(points, experiment=experiment, cell=n)
    page = signed_in.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()
    chart = figure(page, "fig-experiment")
    assert chart["layout"]["annotations"] == []
    assert page.count('id="peaks-table"') == 1
    assert page.index('data-figure="fig-experiment"') < page.index('id="peaks-table"')
    assert page.index('id="peaks-table"') < page.index('id="experiment-stats"')
    assert "each run's peak is listed under the chart" in page


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
