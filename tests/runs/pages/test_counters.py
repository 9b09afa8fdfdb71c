"""Counters in the lab: a point's counters and its seconds' latency percentiles are stored,
answered by the API, exported, in the manifest and on the run page; the compare page and
its API name the counters that moved most beside each verdict."""

import csv
import io

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape
from rest_framework.test import APIClient

from agents.contract.reports.counter_catalogue import COUNTERS as COUNTER_CATALOGUE
from runs.models import Comparison, ProgressSample, Result, Run
from runs.services.jobs.events import store_point
from runs.sse import _messages
from runs.timelines.live import LiveCheckpoints
from tests.runs.counters.test_movers import STEADY
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.django_db

COUNTERS = {
    "transactions": 2000,
    "server_version_num": 160015,
    "deltas": {"wal.fpi": 4000, "db.blks_hit": 46000},
    "per_transaction": {"wal.fpi": 2.0, "db.blks_hit": 23.0},
}


def stored_point(run: Run) -> Result:
    """A point with counters and a second with its percentiles, stored as events store it."""
    point = {
        "index": 0,
        "clients": 2,
        "repeat": 1,
        "tps": 1000.0,
        "transactions": 2000,
        "counters": COUNTERS,
        "progress": [
            {
                "t": 1.0,
                "tps": 1000.0,
                "latency_ms": 2.0,
                "stddev_ms": 0.5,
                "sampled": 250,
                "sampling_rate": 0.25,
                "p50_ms": 1.8,
                "p95_ms": 3.1,
                "p99_ms": 4.7,
            }
        ],
    }
    return store_point(run, point)  # type: ignore[arg-type]


def test_a_points_counters_and_seconds_percentiles_are_stored_and_answered(
    signed_in: Client, api_client: APIClient
) -> None:
    run = finished_run([])
    stored_point(run)
    assert Result.objects.get(run=run).counters == COUNTERS
    second = ProgressSample.objects.get(run=run)
    assert (second.p50_ms, second.p95_ms, second.p99_ms, second.sampled) == (1.8, 3.1, 4.7, 250)

    body = api_client.get(f"/api/runs/{run.pk}/results/").json()
    assert body["results"][0]["counters"]["per_transaction"]["wal.fpi"] == 2.0
    assert body["progress"][0]["p99_ms"] == 4.7

    points = signed_in.get(reverse("run-export", args=[run.pk, "csv"])).content.decode()
    [row] = csv.DictReader(io.StringIO(points))
    assert (row["per_transaction.wal.fpi"], row["per_transaction.io.hits"]) == ("2.0", "")
    seconds = signed_in.get(reverse("run-export", args=[run.pk, "csv"]), {"rows": "seconds"})
    [second_row] = csv.DictReader(io.StringIO(seconds.content.decode()))
    assert (second_row["p95_ms"], second_row["sampled"]) == ("3.1", "250")
    exported = signed_in.get(reverse("run-export", args=[run.pk, "json"])).json()
    assert exported["runs"][0]["points"][0]["counters"] == COUNTERS

    manifest = signed_in.get(reverse("run-manifest", args=[run.pk])).json()
    assert manifest["points"][0]["counters"] == COUNTERS["per_transaction"]


def test_the_run_page_shows_counters_per_transaction_and_draws_percentiles(
    signed_in: Client,
) -> None:
    run = finished_run([])
    stored_point(run)
    response = signed_in.get(reverse("run-detail", args=[run.pk]))
    page = response.content.decode()
    assert "Counters per transaction" in page
    # Hovering a counter says what it counts, where it is read and its trap.
    fpi = COUNTER_CATALOGUE["wal.fpi"]
    assert f'title="{escape(fpi.explained)}"' in page and "full-page images" in page
    assert "pg_stat_wal.wal_fpi" in fpi.explained and "Trap: per checkpoint cycle" in fpi.explained
    assert '<td class="num">23</td>' in page
    latency = response.context["figures"]["latency"]["data"]
    assert [trace["name"] for trace in latency] == ["average", "p50", "p95", "p99"]
    assert latency[3]["y"] == [4.7] and latency[3]["customdata"] == [250]


def test_a_running_runs_latency_chart_has_percentile_lines_the_live_stream_extends(
    signed_in: Client,
) -> None:
    run = finished_run([])
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    figures = signed_in.get(reverse("run-detail", args=[run.pk])).context["figures"]
    assert [trace["name"] for trace in figures["latency"]["data"]] == [
        "average",
        "p50",
        "p95",
        "p99",
    ]
    stored_point(run)
    batch = {"run": None, "progress": list(run.progress.all()), "host": [], "results": []}
    rows = {**batch, "client_host": [], "server": []}
    cursor = {"p": 0, "h": 0, "r": 0, "c": 0}
    [message] = _messages(rows, cursor, LiveCheckpoints([]))  # type: ignore[arg-type]
    assert '"p50_ms":1.8,"p95_ms":3.1,"p99_ms":4.7' in message


STATEMENT = {
    "query": "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
    "calls": 2000,
    "calls_per_transaction": 1.0,
    "total_ms": 30.0,
    "mean_ms": 0.015,
    "rows": 2000,
    "shared_blks_hit": 8000,
    "shared_blks_read": 20,
    "shared_blks_dirtied": 0,
    "shared_blks_written": 0,
    "temp_blks_written": 0,
}


def test_a_run_that_tracked_statements_shows_and_records_them(signed_in: Client) -> None:
    run = finished_run([])
    point = stored_point(run)
    point.counters = {**COUNTERS, "statements": [STATEMENT]}
    point.save()

    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "Statements (pg_stat_statements)" in page
    assert "SELECT abalance FROM pgbench_accounts WHERE aid = $1" in page
    # mean ms, rows per call, blocks hit per call, blocks read per call
    assert '<td class="num">0.015</td><td class="num">1</td><td class="num">4</td>' in page
    assert '<td class="num">0.01</td>' in page
    manifest = signed_in.get(reverse("run-manifest", args=[run.pk])).json()
    assert manifest["points"][0]["statements"] == [STATEMENT]


def test_a_run_without_counters_has_no_counter_table(signed_in: Client) -> None:
    run = finished_run([(2, 1, 1000.0, 2.0)])
    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "Counters per transaction" not in page
    assert "Statements (pg_stat_statements)" not in page


def with_counters(
    run: Run, per_transaction: dict[str, list[float]], server_version_num: int | None = None
) -> Run:
    """Give each of the run's points (one per repeat) its counters per transaction."""
    for result in run.results.order_by("repeat"):
        values = {key: found[result.repeat - 1] for key, found in per_transaction.items()}
        result.counters = {"transactions": 2000, "per_transaction": values}
        if server_version_num is not None:
            result.counters["server_version_num"] = server_version_num
        result.save()
    return run


def three_repeats() -> list[tuple[int, int, float, float]]:
    return [(4, repeat, 1000.0 + repeat, 2.0) for repeat in (1, 2, 3)]


def test_the_compare_page_and_api_name_the_top_movers_beside_each_verdict(
    signed_in: Client, api_client: APIClient
) -> None:
    base = with_counters(
        finished_run(three_repeats()),
        {"wal.fpi": [0.0, 0.0, 0.0], "wal.bytes": [100.0, 101.0, 99.0], "db.blks_hit": STEADY},
    )
    other = with_counters(
        finished_run(three_repeats(), experiment=base.experiment),
        {"wal.fpi": [2.0, 2.1, 1.9], "wal.bytes": [400.0, 404.0, 396.0], "db.blks_hit": STEADY},
    )
    comparison = Comparison.objects.create(name="c", baseline=base)
    comparison.runs.set([base, other])

    page = signed_in.get(reverse("comparison-detail", args=[comparison.pk])).content.decode()
    assert "Top movers per transaction" in page
    assert "full-page images per transaction 0 → 2 (appear, at least ×" in page
    assert "WAL bytes per transaction 100 → 400 (+300 % [" in page
    assert f'title="{escape(COUNTER_CATALOGUE["wal.fpi"].explained)}; exact Poisson' in page

    body = api_client.get(f"/api/comparisons/{comparison.pk}/statistics/").json()
    [cell] = body["top_movers"]
    assert (cell["run_id"], cell["clients"]) == (other.pk, 4)
    assert [m["counter"] for m in cell["movers"]] == ["wal.fpi", "wal.bytes"]
    assert cell["movers"][1]["diff_ci_low_pct"] < 300 < cell["movers"][1]["diff_ci_high_pct"]
    assert cell["collected"] and cell["near"] == []


def test_a_cell_whose_counters_did_not_move_says_so_and_one_without_says_not_collected(
    signed_in: Client, api_client: APIClient
) -> None:
    steady = {"wal.bytes": [100.0, 101.0, 99.0]}
    base = with_counters(finished_run(three_repeats()), steady, 150019)
    quiet = with_counters(finished_run(three_repeats(), experiment=base.experiment), steady)
    bare = finished_run(three_repeats(), experiment=base.experiment)
    comparison = Comparison.objects.create(name="c", baseline=base)
    comparison.runs.set([base, quiet, bare])

    page = signed_in.get(reverse("comparison-detail", args=[comparison.pk])).content.decode()
    assert "no counter moved beyond noise" in page
    assert "counters not collected" in page
    # The baseline ran on 15: what that version could not collect is said under the movers.
    assert "not collected on this version and configuration: " in page
    assert "pg_stat_io (from 16)" in page
    body = api_client.get(f"/api/comparisons/{comparison.pk}/statistics/").json()
    collected = {cell["run_id"]: (cell["collected"], cell["movers"]) for cell in body["top_movers"]}
    assert collected == {quiet.pk: (True, []), bare.pk: (False, [])}
    [quiet_cell] = [cell for cell in body["top_movers"] if cell["run_id"] == quiet.pk]
    assert "block read time (track_io_timing off)" in quiet_cell["not_collected"]


def test_a_comparison_without_counters_has_no_movers_column(signed_in: Client) -> None:
    base, other = finished_run(three_repeats()), finished_run(three_repeats())
    comparison = Comparison.objects.create(name="c", baseline=base)
    comparison.runs.set([base, other])
    page = signed_in.get(reverse("comparison-detail", args=[comparison.pk])).content.decode()
    assert "Top movers per transaction" not in page
