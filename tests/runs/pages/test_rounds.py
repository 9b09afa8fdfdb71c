"""Runs in rounds are the repeats of their cell in the experiment page and the compare page."""

import json
import re

import pytest
from django.urls import reverse
from scipy.stats import gmean

from runs import services
from runs.analysis.cells import cell_runs, results_by_cell
from runs.models import Comparison
from tests.runs.factories import ConfigProfileFactory, ExperimentFactory
from tests.runs.pages.conftest import add_point, finished_run

pytestmark = pytest.mark.django_db

TPS = {0: [1000.0, 1100.0, 1200.0], 1: [2000.0, 2100.0, 2200.0]}


@pytest.fixture
def rounds():
    """Two cells x three rounds, run in a shuffled order; each run holds its round's point."""
    experiment = ExperimentFactory(execution="rounds", repeats=3, seed=5)
    profiles = {0: ConfigProfileFactory(name="small"), 1: ConfigProfileFactory(name="large")}
    order = [(1, 1), (0, 1), (0, 2), (1, 2), (1, 3), (0, 3)]
    return [
        finished_run(
            [(4, round_number, TPS[cell][round_number - 1], 1.0)],
            experiment=experiment,
            config_profile=profiles[cell],
            cell=cell,
            round=round_number,
            position=position,
        )
        for position, (cell, round_number) in enumerate(order)
    ]


def figure(page: str, element_id: str) -> dict:
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', page)
    return json.loads(match.group(1))


def test_a_cells_rounds_are_one_series_whose_repeats_are_the_rounds(rounds):
    cells = cell_runs(rounds)
    results = results_by_cell(cells)

    assert [(run.cell, run.round) for run in cells] == [(1, 1), (0, 1)]
    for run in cells:
        assert [r.repeat for r in results[run.pk]] == [1, 2, 3]
        assert [r.tps for r in results[run.pk]] == TPS[run.cell]


def test_a_rerun_of_a_round_replaces_that_round_in_its_cell(lab_redis):
    runs = services.experiment_start(ExperimentFactory(execution="rounds", repeats=2))
    for run in runs:
        add_point(run, 0, 4, run.round, 1000.0 * run.round, 1.0)
    second_round = next(run for run in runs if run.round == 2)

    rerun = services.run_rerun(second_round, None)
    add_point(rerun, 0, 4, 2, 2500.0, 1.0)

    (cell,) = cell_runs(runs)
    assert (rerun.cell, rerun.round) == (second_round.cell, 2)
    assert [(r.run_id, r.tps) for r in results_by_cell([cell])[cell.pk]] == [
        (runs[0].pk, 1000.0),
        (rerun.pk, 2500.0),
    ]


def test_runs_in_blocks_stay_series_of_their_own(db):
    experiment = ExperimentFactory(execution="blocks")
    runs = [
        finished_run([(1, 1, 10.0, 1.0), (1, 2, 12.0, 1.0)], experiment=experiment, cell=cell)
        for cell in (0, 1)
    ]

    assert cell_runs(runs) == runs
    assert [len(results) for results in results_by_cell(runs).values()] == [2, 2]


def test_experiment_page_draws_one_line_per_cell_and_lists_the_recorded_order(signed_in, rounds):
    experiment = rounds[0].experiment
    page = signed_in.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()

    traces = figure(page, "fig-experiment")["data"]
    expected = [pytest.approx(gmean(TPS[0])), pytest.approx(gmean(TPS[1]))]
    assert sorted(trace["y"][0] for trace in traces) == expected
    assert "seed <code data-seed>5</code>" in page
    rows = re.findall(r'<tr data-position="(\d+)" data-cell="(\d+)" data-round="(\d+)">', page)
    assert [(int(p), int(c), int(r)) for p, c, r in rows] == [
        (run.position, run.cell, run.round) for run in rounds
    ]


def test_compare_page_compares_cells_with_their_rounds_as_repeats(signed_in, rounds):
    response = signed_in.post(
        reverse("comparison-create"), {"runs": [run.pk for run in rounds], "name": "rounds"}
    )
    comparison = Comparison.objects.get()
    assert response["Location"] == reverse("comparison-detail", args=[comparison.pk])

    page = signed_in.get(response["Location"]).content.decode()

    traces = figure(page, "fig-cmp-tps")["data"]
    # One client count: the cells as bars, each named by what differs (the profile among it).
    (bars,) = traces
    assert bars["y"] == [pytest.approx(gmean(TPS[0])), pytest.approx(gmean(TPS[1]))]
    assert len(re.findall(r'<tr class="[^"]*" data-run="\d+" data-clients="4"', page)) == 2
    labels = bars["x"]
    assert [label.split(" · ")[1] for label in labels] == ["small", "large"]
    timeline = figure(page, "fig-cmp-tps-time")["data"]
    # Every round's timeline, in its cell's colour, one legend entry per cell.
    assert sorted(trace["meta"]["run"] for trace in timeline) == sorted(r.pk for r in rounds)
    assert sorted(trace["name"] for trace in timeline if trace["showlegend"]) == sorted(labels)
