"""CSV and JSON exports carry the stored numbers exactly."""

import csv
import io

import pytest
from django.urls import reverse
from scipy.stats import gmean

from runs.inference.stats import relative_difference
from runs.models import Comparison, Result
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


def test_point_rows_carry_when_pgbench_was_launched_and_reaped(signed_in, run_with_results):
    # A duet's two sides are matched by these: how long they ran together.
    Result.objects.filter(run=run_with_results, index=0).update(
        started_epoch=1_790_000_000.125, ended_epoch=1_790_000_005.5
    )
    url = reverse("run-export", args=[run_with_results.pk, "json"])
    (run,) = signed_in.get(url).json()["runs"]
    spans = [(p["started_epoch"], p["ended_epoch"]) for p in run["points"]]
    assert spans == [(1_790_000_000.125, 1_790_000_005.5), (None, None)]
    csv_url = reverse("run-export", args=[run_with_results.pk, "csv"])
    rows = list(csv.DictReader(io.StringIO(signed_in.get(csv_url).content.decode())))
    assert [row["started_epoch"] for row in rows] == ["1790000000.125", ""]


def test_experiment_export_has_every_run(signed_in):
    experiment = ExperimentFactory()
    one = finished_run([(1, 1, 100.0, 1.0)], experiment=experiment)
    two = finished_run([(1, 1, 200.0, 0.5)], experiment=experiment)
    body = signed_in.get(reverse("experiment-export", args=[experiment.pk, "json"])).json()
    assert {r["run_id"] for r in body["runs"]} == {one.pk, two.pk}


def test_unknown_export_format_is_404(signed_in, run_with_results):
    url = f"/runs/{run_with_results.pk}/results.xml"
    assert signed_in.get(url).status_code == 404


def three_repeats(tps: float, latency: float = 4.0) -> list[tuple]:
    return [
        (4, repeat, tps * factor, latency / factor)
        for repeat, factor in ((1, 0.99), (2, 1.0), (3, 1.01))
    ]


def test_point_rows_carry_the_codes_of_their_warnings(signed_in):
    run = finished_run([(1, 1, 100.0, 1.0)])
    Result.objects.filter(run=run).update(failed=3)
    response = signed_in.get(reverse("run-export", args=[run.pk, "csv"]))
    (row,) = csv.DictReader(io.StringIO(response.content.decode()))
    # Its own warning and its run's; "too few repeats" is the cell's (the stats rows').
    assert row["warnings"].split() == [
        "failed_transactions",
        "window_shorter_than_checkpoint_timeout",
    ]


def test_a_point_row_carries_its_own_warnings_not_its_sibling_repeats(signed_in):
    run = finished_run(three_repeats(1000.0))
    Result.objects.filter(run=run, repeat=2).update(failed=3)
    url = reverse("run-export", args=[run.pk, "csv"])
    rows = list(csv.DictReader(io.StringIO(signed_in.get(url).content.decode())))
    codes = {int(r["repeat"]): r["warnings"].split() for r in rows}
    assert "failed_transactions" in codes[2]
    assert "failed_transactions" not in codes[1] + codes[3]
    body = signed_in.get(reverse("run-export", args=[run.pk, "json"])).json()
    by_repeat = {p["repeat"]: p["warnings"] for p in body["runs"][0]["points"]}
    assert by_repeat == codes
    stats = signed_in.get(url, {"rows": "stats"}).content.decode()
    (tps,) = [r for r in csv.DictReader(io.StringIO(stats)) if r["metric"] == "tps"]
    assert "failed_transactions" in tps["warnings"].split() and tps["ci_level"] == "95.0"


def test_statistics_csv_has_the_interval_difference_q_and_verdict_per_cell(signed_in):
    base = finished_run(three_repeats(1000.0))
    faster = finished_run(three_repeats(1200.0, 3.3), experiment=base.experiment)
    comparison = Comparison.objects.create(name="c", baseline=base)
    comparison.runs.set([base, faster])
    url = reverse("comparison-export", args=[comparison.pk, "csv"])
    response = signed_in.get(url, {"rows": "stats", "min_effect": "2"})
    assert f"comparison-{comparison.pk}-stats.csv" in response["Content-Disposition"]
    rows = {
        (int(r["run_id"]), r["metric"]): r
        for r in csv.DictReader(io.StringIO(response.content.decode()))
    }
    tps = rows[(faster.pk, "tps")]
    difference = relative_difference([990.0 * 1.2, 1200.0, 1010.0 * 1.2], [990.0, 1000.0, 1010.0])
    values = [990.0 * 1.2, 1200.0, 1010.0 * 1.2]
    assert int(tps["n"]) == 3 and float(tps["mean"]) == pytest.approx(gmean(values))
    assert tps["mean_method"] == "geometric"
    assert float(tps["arithmetic_mean"]) == pytest.approx(1200.0)
    assert float(tps["ci_low"]) < 1200.0 < float(tps["ci_high"])
    assert float(tps["diff_pct"]) == pytest.approx(difference.pct)
    assert float(tps["diff_ci_low_pct"]) == pytest.approx(difference.ci_low_pct)
    assert float(tps["p"]) == pytest.approx(difference.p)
    assert float(tps["q"]) >= float(tps["p"])
    assert tps["verdict"] == "faster" and rows[(faster.pk, "latency_avg_ms")]["verdict"] == "better"
    assert rows[(base.pk, "tps")]["verdict"] == "" and float(rows[(base.pk, "tps")]["mde_pct"]) > 0


def test_json_export_has_the_statistics_and_what_each_warning_code_means(signed_in):
    base = finished_run(three_repeats(1000.0))
    other = finished_run(three_repeats(1005.0), experiment=base.experiment)
    comparison = Comparison.objects.create(name="c", baseline=base)
    comparison.runs.set([base, other])
    body = signed_in.get(reverse("comparison-export", args=[comparison.pk, "json"])).json()
    statistics = body["statistics"]
    assert statistics["baseline_run_id"] == base.pk
    assert statistics["comparisons"] == 2
    assert statistics["false_discovery_control"] == "Benjamini-Hochberg, q=0.05"
    verdicts = {(r["run_id"], r["metric"]): r["verdict"] for r in statistics["rows"]}
    assert verdicts[(other.pk, "tps")] == "same"
    assert statistics["margin_pct"] == 5.0
    assert body["runs"][0]["points"][0]["warnings"] == ["window_shorter_than_checkpoint_timeout"]
    assert (
        "checkpoint_timeout"
        in body["warning_codes"]["window_shorter_than_checkpoint_timeout"]["title"]
    )


@pytest.mark.parametrize(
    ("query", "message"),
    [({"rows": "cells"}, "rows must be one of"), ({"min_effect": "x"}, "min_effect")],
)
def test_a_bad_export_option_is_refused_naming_it(signed_in, run_with_results, query, message):
    response = signed_in.get(reverse("run-export", args=[run_with_results.pk, "csv"]), query)
    assert response.status_code == 400
    assert message in response.json()["error"]
