"""CSV and JSON exports carry the stored numbers exactly."""

import csv
import io

import pytest
from django.urls import reverse

from runs.models import Result
from tests.runs.factories import ExperimentFactory
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.django_db


def test_run_csv_has_one_row_per_point_with_the_stored_numbers(signed_in, run_with_results):
    response = signed_in.get(reverse("run-export", args=[run_with_results.pk, "csv"]))
    assert response["Content-Type"].startswith("text/csv")
    assert f"run-{run_with_results.pk}.csv" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    stored = Result.objects.filter(run=run_with_results).order_by("index")
    assert len(rows) == stored.count() == 2
    for row, result in zip(rows, stored, strict=True):
        assert float(row["tps"]) == result.tps
        assert float(row["latency_avg_ms"]) == result.latency_avg_ms
        assert float(row["latency_p95_ms"]) == result.percentiles["p95"]
        assert int(row["clients"]) == result.clients
        assert int(row["transactions"]) == result.transactions


def test_run_json_has_the_run_and_its_points(signed_in, run_with_results):
    body = signed_in.get(reverse("run-export", args=[run_with_results.pk, "json"])).json()
    (run,) = body["runs"]
    assert run["run_id"] == run_with_results.pk
    assert [p["tps"] for p in run["points"]] == [1234.5678, 2345.25]
    assert [p["latency_avg_ms"] for p in run["points"]] == [0.8101, 0.8529]


def test_experiment_export_has_every_run(signed_in):
    experiment = ExperimentFactory()
    one = finished_run([(1, 1, 100.0, 1.0)], experiment=experiment)
    two = finished_run([(1, 1, 200.0, 0.5)], experiment=experiment)
    body = signed_in.get(reverse("experiment-export", args=[experiment.pk, "json"])).json()
    assert {r["run_id"] for r in body["runs"]} == {one.pk, two.pk}


def test_unknown_export_format_is_404(signed_in, run_with_results):
    url = f"/runs/{run_with_results.pk}/results.xml"
    assert signed_in.get(url).status_code == 404
