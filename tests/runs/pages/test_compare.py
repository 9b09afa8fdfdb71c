"""Comparisons: statistics against the baseline, verdicts, warnings, and what differs."""

import json
import re

import pytest
from django.urls import reverse

from runs.analysis.compare import differences, setting_text, stats_table
from runs.inference.stats import relative_difference
from runs.models import Comparison, ServerSample
from runs.selectors import results_by_run
from tests.runs.factories import ConfigProfileFactory, ServerSampleFactory
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.django_db

BASE = [(1, 1, 1000.0, 1.0), (1, 2, 1100.0, 1.1), (4, 1, 3000.0, 1.3), (4, 2, 3100.0, 1.4)]
TUNED = [(1, 1, 1050.0, 0.9), (1, 2, 1080.0, 0.95), (4, 1, 4000.0, 1.0), (4, 2, 4200.0, 0.98)]


@pytest.fixture
def two_runs():
    base = finished_run(BASE, settings={"shared_buffers": "128MB"})
    tuned = finished_run(
        TUNED,
        settings={"shared_buffers": "1GB"},
        config_profile=ConfigProfileFactory(name="big buffers"),
    )
    return base, tuned


def three_repeats(tps: float, latency: float, spread: float = 0.01) -> list[tuple]:
    """Points at 4 clients, three repeats within +-`spread` of the given values."""
    factors = (1 - spread, 1.0, 1 + spread)
    return [(4, r, tps * f, latency / f) for r, f in enumerate(factors, start=1)]


def figure(page: str, element_id: str) -> dict:
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', page)
    return json.loads(match.group(1))


def table_of(runs, baseline, min_effect=1.0):
    return stats_table(runs, baseline, results_by_run(runs), {}, min_effect)


def test_difference_is_the_ratio_of_geometric_means_with_its_interval(two_runs):
    base, tuned = two_runs
    table = table_of([base, tuned], base)
    tuned_at_4 = next(r for r in table.rows if r.run == tuned and r.clients == 4)
    assert tuned_at_4.tps.summary.mean == pytest.approx((4000 * 4200) ** 0.5)
    expected = relative_difference([4000.0, 4200.0], [3000.0, 3100.0])
    assert tuned_at_4.tps.difference == expected
    assert expected.pct == pytest.approx(((4000 * 4200) ** 0.5 / (3000 * 3100) ** 0.5 - 1) * 100)
    assert expected.ci_low_pct < expected.pct < expected.ci_high_pct


def test_two_repeats_are_too_few_for_a_verdict_and_say_how_many_are_needed(two_runs):
    base, tuned = two_runs
    row = next(r for r in table_of([base, tuned], base).rows if r.run == tuned and r.clients == 4)
    assert row.tps.verdict == "too few repeats"
    assert "repeats per run" in row.tps.judgement.explanation
    assert "too_few_repeats" in row.warning_codes


def test_three_clearly_faster_repeats_get_the_verdict_faster_and_better_latency():
    base = finished_run(three_repeats(1000.0, 4.0))
    faster = finished_run(three_repeats(1200.0, 3.3), experiment=base.experiment)
    row = next(r for r in table_of([base, faster], base).rows if r.run == faster)
    assert (row.tps.verdict, row.latency.verdict) == ("faster", "better")
    assert row.tps.judgement.q < 0.05
    assert row.tps.mde_pct is not None and row.tps.mde_pct < 20


def test_a_difference_below_the_minimum_effect_is_the_same_within_the_margin():
    base = finished_run(three_repeats(1000.0, 4.0, spread=0.001))
    near = finished_run(three_repeats(1020.0, 3.95, spread=0.001), experiment=base.experiment)
    assert (
        next(r for r in table_of([base, near], base).rows if r.run == near).tps.verdict == "faster"
    )
    row = next(r for r in table_of([base, near], base, 5.0).rows if r.run == near)
    assert row.tps.verdict == "same"
    assert row.tps.judgement.sentence == "same within ±5 %"


def test_repeats_that_disagree_are_a_warning_of_the_cell():
    run = finished_run([(1, 1, 1214.0, 1.0), (1, 2, 2010.0, 1.0), (1, 3, 1500.0, 1.0)])
    (row,) = table_of([run], None).rows
    assert "repeats_disagree" in row.warning_codes


def test_the_table_counts_only_comparisons_with_enough_repeats(two_runs):
    base, tuned = two_runs
    assert table_of([base, tuned], base).comparisons == 0
    base3 = finished_run(three_repeats(1000.0, 4.0))
    other = finished_run(three_repeats(1010.0, 4.0), experiment=base3.experiment)
    assert table_of([base3, other], base3).comparisons == 2  # tps and latency at 4 clients


def test_compare_page_shows_the_interval_the_verdict_and_the_number_of_comparisons(signed_in):
    base = finished_run(three_repeats(1000.0, 4.0))
    faster = finished_run(three_repeats(1200.0, 3.3), experiment=base.experiment)
    signed_in.post(reverse("comparison-create"), {"runs": [base.pk, faster.pk]})
    page = signed_in.get(reverse("comparison-detail", args=[Comparison.objects.get().pk]))
    html = page.content.decode()
    assert re.search(r'<span class="verdict verdict-faster">faster by 20\.0 % \[\+\d', html)
    assert re.search(r'class="num diff-ci"[^>]*>\+20\.0 % \[\+\d+\.\d, \+\d+\.\d\]', html)
    assert '<strong id="comparison-count">2</strong> comparisons' in html
    assert "Benjamini–Hochberg at q = 0.05" in html
    assert "Beyond spread" not in html


def test_every_interval_on_the_compare_page_and_in_the_api_carries_its_level(signed_in):
    base = finished_run(three_repeats(1000.0, 4.0))
    faster = finished_run(three_repeats(1200.0, 3.3), experiment=base.experiment)
    signed_in.post(reverse("comparison-create"), {"runs": [base.pk, faster.pk]})
    comparison = Comparison.objects.get()
    html = signed_in.get(reverse("comparison-detail", args=[comparison.pk])).content.decode()
    assert re.search(r"faster by 20\.0 % \[\+[\d.]+, \+[\d.]+\] \(95 % interval\)<", html)
    assert "mean, 95 % CI" in html and "Δ [95 % CI]" in html
    body = signed_in.get(f"/api/comparisons/{comparison.pk}/statistics/").json()
    row = next(r for r in body["rows"] if r["run_id"] == faster.pk and r["metric"] == "tps")
    assert row["ci_level"] == 95.0 and row["same_ci_level"] == pytest.approx(90.0)


def test_minimum_effect_is_set_on_the_page_and_a_bad_one_is_explained(signed_in):
    base = finished_run(three_repeats(1000.0, 4.0, spread=0.001))
    near = finished_run(three_repeats(1020.0, 3.95, spread=0.001), experiment=base.experiment)
    signed_in.post(reverse("comparison-create"), {"runs": [base.pk, near.pk]})
    url = reverse("comparison-detail", args=[Comparison.objects.get().pk])
    assert ">faster by 2.0 % [" in signed_in.get(url).content.decode()
    assert ">same within ±5 %</span>" in signed_in.get(url, {"min_effect": "5"}).content.decode()
    narrow = signed_in.get(url, {"min_effect": "5", "margin": "1"}).content.decode()
    # +2 % measured precisely: beyond a ±1 % margin, below a 5 % minimum effect.
    assert (
        ">undecided: between the margin and the minimum effect; more rounds would not decide it<"
        in narrow
    )
    assert 'id="margin"' in narrow
    refused = signed_in.get(url, {"min_effect": "lots", "margin": "0"})
    assert refused.status_code == 200
    assert "min_effect must be a number of percent" in refused.content.decode()
    assert "margin must be between 0.1 and 50 (percent)" in refused.content.decode()


def test_compare_charts_draw_confidence_intervals_and_mark_warned_points(signed_in, two_runs):
    base, tuned = two_runs
    signed_in.post(reverse("comparison-create"), {"runs": [base.pk, tuned.pk]})
    page = signed_in.get(reverse("comparison-detail", args=[Comparison.objects.get().pk]))
    html = page.content.decode()
    tps = figure(html, "fig-cmp-tps")
    summary = table_of([base, tuned], base).rows[0].tps.summary  # base at 1 client
    assert tps["data"][0]["error_y"]["array"][0] == pytest.approx(summary.ci_high - summary.mean)
    assert tps["data"][0]["marker"]["symbol"] == ["diamond-open", "diamond-open"]  # too few repeats
    assert "too few repeats" in tps["data"][0]["hovertext"][0]
    # The runs differ in build, shared_buffers (their profiles' only difference), workload
    # and host (each run its own factory build, host and workload) all together: one
    # dimension, a line per run named by all four.
    names = [
        f"{run.build.name} · {buffers} · {run.workload.name} · {run.host.name}"
        for run, buffers in zip(two_runs, ["128MB", "1GB"], strict=True)
    ]
    assert [trace["name"] for trace in tps["data"]] == names
    assert tps["layout"]["legend"]["title"]["text"] == "version · shared_buffers · workload · host"
    assert tps["layout"]["annotations"] == []


def test_compare_page_overlays_buffers_written_and_checkpoints_per_run(signed_in, two_runs):
    base, tuned = two_runs
    ServerSampleFactory(run=base, point=0, t=1.0)
    data = {"checkpoints_timed": 2, "checkpoints_req": 2, "buffers_checkpoint_per_s": 300.0}
    ServerSampleFactory(run=base, point=0, t=2.0, data={"t": 2.0, **data})
    signed_in.post(reverse("comparison-create"), {"runs": [base.pk, tuned.pk]})
    page = signed_in.get(reverse("comparison-detail", args=[Comparison.objects.get().pk]))
    server = figure(page.content.decode(), "fig-cmp-server-time")["data"]
    assert server[0]["y"] == [0.0, 300.0]
    assert server[1]["x"] == [2.0] and server[1]["text"] == ["timed checkpoint start"]
    assert ServerSample.objects.count() == 2


def test_differences_list_only_what_differs(two_runs):
    base, tuned = two_runs
    keys = dict(differences([base, tuned]))
    assert keys["settings.shared_buffers"] == ["128MB", "1GB"]
    assert keys["config"] == [base.config_profile.name, "big buffers"]
    assert "sweep.clients" not in keys
    assert "storage.data" not in keys


def test_comparing_ticked_runs_saves_a_comparison_and_shows_deltas(signed_in, two_runs):
    base, tuned = two_runs
    response = signed_in.post(reverse("comparison-create"), {"runs": [tuned.pk, base.pk]})
    comparison = Comparison.objects.get()
    assert response["Location"] == reverse("comparison-detail", args=[comparison.pk])
    assert comparison.baseline == base  # the lowest id unless a baseline is picked
    page = signed_in.get(response["Location"]).content.decode()
    assert "+34.4 % [" in page  # tps at 4 clients: 4100 against 3050, with its interval
    assert "settings.shared_buffers" in page and "1GB" in page
    assert 'id="diff-table"' in page


def test_comparing_one_run_is_refused_with_a_message(signed_in, two_runs):
    response = signed_in.post(reverse("comparison-create"), {"runs": [two_runs[0].pk]}, follow=True)
    assert "tick at least two runs" in response.content.decode()
    assert not Comparison.objects.exists()


def test_the_baseline_changes_in_place_by_a_query_parameter(signed_in, two_runs):
    base, tuned = two_runs
    signed_in.post(reverse("comparison-create"), {"runs": [base.pk, tuned.pk]})
    comparison = Comparison.objects.get()
    url = reverse("comparison-detail", args=[comparison.pk])
    page = signed_in.get(url, {"baseline": tuned.pk}).content.decode()
    assert Comparison.objects.count() == 1
    assert f'<option value="{tuned.pk}" selected>' in page
    assert "-25.6 % [" in page  # 3050 against 4100 at 4 clients, now from the other side
    refused = signed_in.get(url, {"baseline": "nope"})
    assert refused.status_code == 200
    assert "baseline: &#x27;nope&#x27; is not one of the compared runs" in refused.content.decode()


def test_settings_are_compared_with_their_units_applied():
    assert setting_text("16384", "8kB") == "128MB"
    assert setting_text("4096", "kB") == "4MB"
    assert setting_text("200", "ms") == "200 ms"
    assert setting_text("-1", "kB") == "-1 kB"
    assert setting_text("on", None) == "on"


def test_free_space_and_cluster_paths_are_not_differences(two_runs):
    base, tuned = two_runs
    for run, free, directory in ((base, 100, "/a"), (tuned, 200, "/b")):
        run.storage_facts = {"data": {"free_bytes": free, "filesystem": "ext4"}}
        run.effective_settings = [
            {"name": "data_directory", "setting": directory, "unit": None},
            {"name": "shared_buffers", "setting": "16384", "unit": "8kB"},
        ]
        run.save()
    keys = dict(differences([base, tuned]))
    assert not any("free_bytes" in key or "data_directory" in key for key in keys)
    assert "settings.shared_buffers" not in keys


def test_api_answers_the_statistics_of_a_comparison(api_client):
    base = finished_run(three_repeats(1000.0, 4.0))
    faster = finished_run(three_repeats(1200.0, 3.3), experiment=base.experiment)
    comparison = Comparison.objects.create(name="c", baseline=base)
    comparison.runs.set([base, faster])
    response = api_client.get(f"/api/comparisons/{comparison.pk}/statistics/", {"min_effect": 2})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["baseline_run_id"], body["min_effect_pct"], body["comparisons"]) == (
        base.pk,
        2.0,
        2,
    )
    rows = {(r["run_id"], r["metric"]): r for r in body["rows"]}
    tps = rows[(faster.pk, "tps")]
    assert tps["verdict"] == "faster" and tps["n"] == 3
    assert tps["diff_ci_low_pct"] < tps["diff_pct"] < tps["diff_ci_high_pct"]
    assert tps["q"] >= tps["p"]
    assert {w["code"] for w in tps["warnings"]} == {"window_shorter_than_checkpoint_timeout"}
    assert tps["warnings"][0]["why"]


def test_api_refuses_a_bad_minimum_effect_naming_the_field(api_client, two_runs):
    base, tuned = two_runs
    comparison = Comparison.objects.create(name="c", baseline=base)
    comparison.runs.set([base, tuned])
    response = api_client.get(f"/api/comparisons/{comparison.pk}/statistics/", {"min_effect": 90})
    assert response.status_code == 400
    assert "min_effect" in response.json()["error"]["fields"]
