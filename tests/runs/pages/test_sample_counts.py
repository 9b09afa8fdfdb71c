"""What each second of a timeline rests on (the logged transactions of a sampled log):
in the chart's hover, its zoom, its live stream, the API and the exports."""

import csv
import io

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from runs.models import ProgressSample, Result, Run
from runs.sse import _messages
from runs.timelines.downsample import Timeline
from runs.timelines.live import LiveCheckpoints
from tests.runs.pages.conftest import finished_run

RATE = 0.25


def sampled_at(t: int) -> int:
    """Logged lines in second t: about 250 (1,000 tps at a 25 % sample), varying."""
    return 240 + t % 20


def run_with_seconds(seconds: int = 3000) -> Run:
    """A finished run of one point whose timeline was read from a 25 % sample."""
    run = finished_run([(2, 1, 1000.0, 2.0)])
    run.progress.all().delete()  # finished_run's two seconds, from -P
    ProgressSample.objects.bulk_create(
        ProgressSample(
            run=run,
            point=0,
            t=float(t),
            tps=sampled_at(t) / RATE,
            latency_ms=2.0,
            sampled=sampled_at(t),
            sampling_rate=RATE,
        )
        for t in range(1, seconds + 1)
    )
    return run


def test_a_reduced_timeline_keeps_each_kept_samples_count() -> None:
    xs = [float(t) for t in range(1, 5001)]
    timeline = Timeline(
        xs,
        [sampled_at(t) / RATE for t in range(1, 5001)],
        [2500],
        1,
        2500.0,
        [sampled_at(t) for t in range(1, 5001)],
    )
    reduced = timeline.reduced(500)
    assert reduced.counts is not None and len(reduced.counts) == len(reduced.x) <= 500
    for x, y, count in zip(reduced.x, reduced.y, reduced.counts, strict=True):
        assert count == sampled_at(int(x)) and y == count / RATE
    gapped = reduced.gapped_counts()
    assert gapped is not None and len(gapped) == len(reduced.gapped()[0])
    assert Timeline.from_json(reduced.as_json()) == reduced


@pytest.mark.django_db
def test_the_tps_hover_says_how_many_logged_transactions_each_second_rests_on(
    signed_in: Client,
) -> None:
    run = run_with_seconds()
    figures = signed_in.get(reverse("run-detail", args=[run.pk])).context["figures"]
    for name in ("tps", "latency"):
        trace = figures[name]["data"][0]
        assert "logged transactions" in trace["hovertemplate"]
        assert len(trace["customdata"]) == len(trace["x"])
        for x, count in zip(trace["x"], trace["customdata"], strict=True):
            assert count == sampled_at(int(x))


@pytest.mark.django_db
def test_a_timeline_from_p_has_no_count_to_show(signed_in: Client) -> None:
    run = finished_run([(2, 1, 1000.0, 2.0)])
    ProgressSample.objects.create(run=run, point=0, t=1.0, tps=1000.0, latency_ms=2.0)
    trace = signed_in.get(reverse("run-detail", args=[run.pk])).context["figures"]["tps"]
    assert "customdata" not in trace["data"][0]


@pytest.mark.django_db
def test_zoom_and_live_stream_carry_the_counts(signed_in: Client) -> None:
    run = run_with_seconds()
    query = {"run": run.pk, "trace": "tps", "x0": 100, "x1": 110}
    found = signed_in.get(reverse("run-timeline"), query).json()
    assert found["counts"] == [sampled_at(t) for t in range(100, 111)]
    rows = list(run.progress.order_by("pk")[:2])
    batch = {"run": None, "progress": rows, "host": [], "results": []}
    batch |= {"client_host": [], "server": []}
    cursor = {"p": 0, "h": 0, "r": 0, "c": 0}
    messages = _messages(batch, cursor, LiveCheckpoints([]))  # type: ignore[arg-type]
    assert '"sampled":241' in messages[0]


@pytest.mark.django_db
def test_api_results_give_each_seconds_count_and_rate(api_client: APIClient) -> None:
    run = run_with_seconds(3)
    body = api_client.get(f"/api/runs/{run.pk}/results/").json()
    assert [(p["sampled"], p["sampling_rate"]) for p in body["progress"]] == [
        (sampled_at(t), RATE) for t in (1, 2, 3)
    ]


@pytest.mark.django_db
def test_exports_give_each_seconds_count_and_each_points_sample(signed_in: Client) -> None:
    run = run_with_seconds(3)
    Result.objects.filter(run=run).update(
        percentiles={"p99": 3.0, "sampled_transactions": 741, "sampling_rate": RATE}
    )
    url = reverse("run-export", args=[run.pk, "csv"])
    response = signed_in.get(url, {"rows": "seconds"})
    assert f"run-{run.pk}-seconds.csv" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(int(r["sampled"]), float(r["sampling_rate"])) for r in rows] == [
        (sampled_at(t), RATE) for t in (1, 2, 3)
    ]
    assert {r["run_id"] for r in rows} == {str(run.pk)}
    (point,) = csv.DictReader(io.StringIO(signed_in.get(url).content.decode()))
    assert (point["latency_sampled_transactions"], point["latency_sampling_rate"]) == (
        "741",
        "0.25",
    )
    body = signed_in.get(reverse("run-export", args=[run.pk, "json"])).json()
    (json_point,) = body["runs"][0]["points"]
    assert [s["sampled"] for s in json_point["seconds"]] == [sampled_at(t) for t in (1, 2, 3)]
    assert json_point["latency_sampled_transactions"] == 741
