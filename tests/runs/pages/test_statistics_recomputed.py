"""The numbers a comparison shows, recomputed from the raw repeats with scipy directly:
the page, the API and both exports must say what a careful engineer would compute."""

import csv
import io
import math
import re

import numpy as np
import pytest
from django.urls import reverse
from scipy import stats as scipy_stats

from runs.models import Comparison, Run
from tests.runs.factories import ConfigProfileFactory, ExperimentFactory, HostFactory, RunFactory
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.django_db

# clients -> (tps repeats, latency repeats): base with 4 repeats, tuned with 3.
BASE = {
    4: ([1000.0, 1031.0, 987.0, 1012.0], [4.00, 3.90, 4.10, 3.95]),
    8: ([1900.0, 1950.0, 1880.0, 1930.0], [4.20, 4.10, 4.25, 4.15]),
}
TUNED = {
    4: ([1085.0, 1120.0, 1062.0], [3.70, 3.75, 3.60]),
    8: ([1910.0, 1940.0, 1905.0], [4.18, 4.16, 4.22]),
}
MIN_EFFECT_PCT = 2.0
MARGIN_PCT = 5.0
HIGHER_IS_BETTER = {"tps": True, "latency_avg_ms": False}


def points(repeats: dict[int, tuple[list[float], list[float]]]) -> list[tuple]:
    return [
        (clients, repeat, tps, latency)
        for clients, (tps_values, latencies) in repeats.items()
        for repeat, (tps, latency) in enumerate(zip(tps_values, latencies, strict=True), start=1)
    ]


def raw(repeats: dict, clients: int, metric: str) -> np.ndarray:
    return np.array(repeats[clients][0 if metric == "tps" else 1])


def expected_summary(values: np.ndarray) -> dict[str, float]:
    """The geometric mean and the t interval of the mean of the logs, taken back."""
    logs = np.log(values)
    low, high = scipy_stats.t.interval(
        0.95, values.size - 1, loc=logs.mean(), scale=scipy_stats.sem(logs)
    )
    return {
        "mean": scipy_stats.gmean(values),
        "sd": values.std(ddof=1),
        "ci_low": np.exp(low),
        "ci_high": np.exp(high),
    }


def expected_comparisons() -> dict[tuple[int, str], dict]:
    """(clients, metric) -> Welch's t-test on logs, its interval as a ratio, BH q, verdict."""
    found = {}
    for clients in TUNED:
        for metric in HIGHER_IS_BETTER:
            a, b = raw(TUNED, clients, metric), raw(BASE, clients, metric)
            test = scipy_stats.ttest_ind(np.log(a), np.log(b), equal_var=False)
            low, high = test.confidence_interval(0.95)
            same_low, same_high = test.confidence_interval(0.90)
            ratio = scipy_stats.gmean(a) / scipy_stats.gmean(b)
            found[(clients, metric)] = {
                "diff_pct": (ratio - 1) * 100,
                "diff_ci_low_pct": math.expm1(low) * 100,
                "diff_ci_high_pct": math.expm1(high) * 100,
                "p": test.pvalue,
                "same": -math.log1p(MARGIN_PCT / 100) <= same_low
                and same_high <= math.log1p(MARGIN_PCT / 100),
            }
    keys = list(found)
    q_values = scipy_stats.false_discovery_control([found[k]["p"] for k in keys], method="bh")
    for key, q in zip(keys, q_values, strict=True):
        found[key]["q"] = q
        found[key]["verdict"] = verdict_word(found[key], q, key[1])
    return found


def verdict_word(found: dict, q: float, metric: str) -> str:
    pct = found["diff_pct"]
    if q > 0.05 or abs(pct) < MIN_EFFECT_PCT:
        return "same" if found["same"] else "undecided"
    if HIGHER_IS_BETTER[metric]:
        return "faster" if pct > 0 else "slower"
    return "better" if pct < 0 else "worse"


@pytest.fixture
def comparison() -> Comparison:
    base = finished_run(points(BASE))
    tuned = finished_run(points(TUNED), experiment=base.experiment)
    saved = Comparison.objects.create(name="recomputed", baseline=base)
    saved.runs.set([base, tuned])
    return saved


def tuned_of(comparison: Comparison) -> int:
    return comparison.runs.exclude(pk=comparison.baseline_id).get().pk


def test_the_chosen_numbers_give_both_a_difference_and_no_difference():
    verdicts = {found["verdict"] for found in expected_comparisons().values()}
    assert {"faster", "better"} <= verdicts and verdicts & {"same", "undecided"}


def assert_records_match_scipy(records: list[dict], comparison: Comparison) -> None:
    tuned = tuned_of(comparison)
    by_key = {(int(r["run_id"]), int(r["clients"]), r["metric"]): r for r in records}
    for (clients, metric), expected in expected_comparisons().items():
        record = by_key[(tuned, clients, metric)]
        for name in ("diff_pct", "diff_ci_low_pct", "diff_ci_high_pct", "p", "q"):
            assert float(record[name]) == pytest.approx(expected[name], rel=1e-9), name
        assert record["verdict"] == expected["verdict"]
    for run_id, repeats in ((comparison.baseline_id, BASE), (tuned, TUNED)):
        for clients in repeats:
            for metric in HIGHER_IS_BETTER:
                record = by_key[(run_id, clients, metric)]
                values = raw(repeats, clients, metric)
                assert int(record["n"]) == values.size
                for name, value in expected_summary(values).items():
                    assert float(record[name]) == pytest.approx(value, rel=1e-9), name


def test_api_statistics_equal_scipy_on_the_raw_repeats(api_client, comparison):
    url = f"/api/comparisons/{comparison.pk}/statistics/"
    body = api_client.get(url, {"min_effect": MIN_EFFECT_PCT}).json()
    assert body["comparisons"] == len(expected_comparisons())
    assert_records_match_scipy(body["rows"], comparison)


def test_json_and_csv_exports_equal_scipy_on_the_raw_repeats(signed_in, comparison):
    query = {"min_effect": str(MIN_EFFECT_PCT)}
    url = reverse("comparison-export", args=[comparison.pk, "json"])
    assert_records_match_scipy(signed_in.get(url, query).json()["statistics"]["rows"], comparison)
    url = reverse("comparison-export", args=[comparison.pk, "csv"])
    text = signed_in.get(url, {**query, "rows": "stats"}).content.decode()
    assert_records_match_scipy(list(csv.DictReader(io.StringIO(text))), comparison)


def page_row(html: str, run_id: int, clients: int) -> str:
    match = re.search(
        rf'<tr[^>]*data-run="{run_id}" data-clients="{clients}">(.*?)</tr>', html, re.S
    )
    assert match, f"no row for run {run_id} at {clients} clients"
    return match.group(1)


def page_cell(row: str, column: str) -> str:
    match = re.search(rf'data-col="{column}"[^>]*>(.*?)</td>', row, re.S)
    assert match, column
    return re.sub(r"<[^>]+>", " ", match.group(1))


def test_compare_page_shows_scipy_numbers_rounded(signed_in, comparison):
    url = reverse("comparison-detail", args=[comparison.pk])
    html = signed_in.get(url, {"min_effect": MIN_EFFECT_PCT}).content.decode()
    tuned = tuned_of(comparison)
    for (clients, metric), expected in expected_comparisons().items():
        row = page_row(html, tuned, clients)
        shown = (
            f"{expected['diff_pct']:+.1f} % [{expected['diff_ci_low_pct']:+.1f}, "
            f"{expected['diff_ci_high_pct']:+.1f}]"
        )
        assert shown in page_cell(row, f"{metric}-diff")
        q = expected["q"]
        assert ("<0.001" if q < 0.001 else f"{q:.3f}") in page_cell(row, f"{metric}-q")
        assert expected["verdict"] in page_cell(row, f"{metric}-verdict")
    for clients in TUNED:
        summary = expected_summary(raw(TUNED, clients, "tps"))
        shown = f"{summary['ci_low']:,.1f} – {summary['ci_high']:,.1f}"
        assert page_cell(page_row(html, tuned, clients), "tps-ci").strip() == shown


# Two cells of one experiment in 8 rounds on one host, which slows mid-experiment: the
# tuned cell about 5 % faster in every round, its round 3 failed; its latency's ratio in
# round 6 an outlier (so that metric is answered from signed ranks).
ROUND_BASE_TPS = [21000.0, 30000.0, 39000.0, 25000.0, 11000.0, 19000.0, 15000.0, 13000.0]
ROUND_RATIOS = [1.052, 1.047, None, 1.061, 1.043, 1.058, 1.049, 1.055]
LATENCY_RATIOS = [0.951, 0.955, None, 0.946, 0.958, 1.300, 0.953, 0.949]
COMPLETE = [0, 1, 3, 4, 5, 6, 7]


def round_points(tps: float, latency_ms: float) -> list[tuple]:
    return [(2, 1, tps, latency_ms)]


@pytest.fixture
def paired_comparison() -> Comparison:
    experiment = ExperimentFactory(execution="rounds", repeats=8, clients=[2])
    host = HostFactory()
    profiles = {0: ConfigProfileFactory(name="base"), 1: ConfigProfileFactory(name="tuned")}
    firsts = {}
    for index, base_tps in enumerate(ROUND_BASE_TPS):
        round_number = index + 1
        for cell in (0, 1):
            fields = {"experiment": experiment, "host": host, "config_profile": profiles[cell]}
            fields |= {"cell": cell, "round": round_number, "position": 2 * index + cell}
            if cell == 1 and ROUND_RATIOS[index] is None:
                firsts.setdefault(cell, RunFactory(status=Run.Status.FAILED, **fields))
                continue
            tps = base_tps * (ROUND_RATIOS[index] if cell else 1.0)
            latency = 2000.0 / base_tps * (LATENCY_RATIOS[index] if cell else 1.0)
            run = finished_run(round_points(tps, latency), **fields)
            firsts.setdefault(cell, run)
    saved = Comparison.objects.create(name="paired", baseline=firsts[0])
    saved.runs.set(list(firsts.values()))
    return saved


def expected_paired() -> dict[str, dict]:
    """metric -> the paired t on the complete rounds' log ratios, the signed-rank answer
    for latency (Hodges-Lehmann of the ratios, Wilcoxon p), BH q and verdict."""
    base = np.asarray(ROUND_BASE_TPS)[COMPLETE]
    tuned = base * np.asarray([ROUND_RATIOS[i] for i in COMPLETE])
    base_latency = 2000.0 / base
    tuned_latency = base_latency * np.asarray([LATENCY_RATIOS[i] for i in COMPLETE])
    found = {}
    for metric, (a, b) in {
        "tps": (tuned, base),
        "latency_avg_ms": (tuned_latency, base_latency),
    }.items():
        test = scipy_stats.ttest_rel(np.log(a), np.log(b))
        low, high = test.confidence_interval(0.95)
        d = np.log(a) - np.log(b)
        found[metric] = {
            "diff_pct": math.expm1(d.mean()) * 100,
            "diff_ci_low_pct": math.expm1(low) * 100,
            "diff_ci_high_pct": math.expm1(high) * 100,
            "p": test.pvalue,
            "judged_p": test.pvalue,
        }
    d = np.log(tuned_latency) - np.log(base_latency)
    walsh = np.sort([(d[i] + d[j]) / 2 for i in range(d.size) for j in range(i, d.size)])
    found["latency_avg_ms"]["rank_diff_pct"] = math.expm1(np.median(walsh)) * 100
    found["latency_avg_ms"]["rank_p"] = scipy_stats.wilcoxon(d).pvalue
    found["latency_avg_ms"]["judged_p"] = found["latency_avg_ms"]["rank_p"]
    q_values = scipy_stats.false_discovery_control(
        [found[m]["judged_p"] for m in ("tps", "latency_avg_ms")], method="bh"
    )
    for metric, q in zip(("tps", "latency_avg_ms"), q_values, strict=True):
        found[metric]["q"] = q
    return found


def test_api_paired_statistics_equal_scipy_on_the_complete_rounds(api_client, paired_comparison):
    url = f"/api/comparisons/{paired_comparison.pk}/statistics/"
    body = api_client.get(url, {"min_effect": MIN_EFFECT_PCT}).json()
    tuned = tuned_of(paired_comparison)
    records = {r["metric"]: r for r in body["rows"] if r["run_id"] == tuned}
    for metric, expected in expected_paired().items():
        record = records[metric]
        for name in ("diff_pct", "diff_ci_low_pct", "diff_ci_high_pct", "p", "q"):
            assert record[name] == pytest.approx(expected[name], rel=1e-9), (metric, name)
        assert record["design"] == "paired"
        assert record["design_note"] == "paired over 7 of 8 rounds; round 3 incomplete"
    assert records["tps"]["verdict_method"] == "log-paired-t"
    assert records["tps"]["verdict"] == "faster"
    latency = records["latency_avg_ms"]
    assert latency["verdict_method"] == "signed-rank"
    assert latency["rank_p"] == pytest.approx(expected_paired()["latency_avg_ms"]["rank_p"])
    assert latency["rank_diff_pct"] == pytest.approx(
        expected_paired()["latency_avg_ms"]["rank_diff_pct"], rel=1e-9
    )


def test_compare_page_says_which_design_answered(signed_in, paired_comparison):
    url = reverse("comparison-detail", args=[paired_comparison.pk])
    html = signed_in.get(url, {"min_effect": MIN_EFFECT_PCT}).content.decode()
    row = page_row(html, tuned_of(paired_comparison), 2)
    assert "paired over 7 of 8 rounds; round 3 incomplete" in page_cell(row, "tps-verdict")
    tps = expected_paired()["tps"]
    shown = (
        f"{tps['diff_pct']:+.1f} % [{tps['diff_ci_low_pct']:+.1f}, {tps['diff_ci_high_pct']:+.1f}]"
    )
    assert shown in page_cell(row, "tps-diff")
