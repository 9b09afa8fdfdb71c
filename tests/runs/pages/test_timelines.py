"""Hour-long timelines: reduced on the server without losing peaks, kept per run, and
zoomed into at full resolution."""

import math

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from runs import services
from runs.models import HostSample, ProgressSample, Run, RunTimeline
from runs.sse import parse_cursor
from runs.timelines import store
from runs.timelines.downsample import CHART_SAMPLES
from tests.runs.factories import RunFactory

pytestmark = pytest.mark.django_db

SPIKE_T, SPIKE_TPS = 1800.0, 5000.0
DIP_T, DIP_TPS = 2700.0, 10.0


def tps_at(point: int, t: float) -> float:
    """About 1,000 tps with a little wobble, a one-second spike and a one-second dip."""
    if point == 0 and t == SPIKE_T:
        return SPIKE_TPS
    if point == 0 and t == DIP_T:
        return DIP_TPS
    return 1000.0 + 20.0 * math.sin(t / 7.0) + point


def long_run(seconds: tuple[int, ...] = (3600,)) -> Run:
    """A succeeded run whose points last `seconds` each, one progress and host sample a second."""
    run = RunFactory(status=Run.Status.SUCCEEDED, finished_at=timezone.now())
    for point, length in enumerate(seconds):
        ProgressSample.objects.bulk_create(
            ProgressSample(run=run, point=point, t=float(t), tps=tps_at(point, t), latency_ms=2.0)
            for t in range(1, length + 1)
        )
        HostSample.objects.bulk_create(
            HostSample(run=run, point=point, t=float(t), data={"cpu_user": 40.0, "cpu_idle": 50})
            for t in range(1, length + 1)
        )
    return run


def tps_trace(figure: dict) -> tuple[list, list]:
    trace = figure["data"][0]
    return trace["x"], trace["y"]


def test_a_one_second_spike_and_dip_survive_downsampling_of_an_hour(signed_in: Client):
    run = long_run()
    response = signed_in.get(reverse("run-detail", args=[run.pk]))
    xs, ys = tps_trace(response.context["figures"]["tps"])
    assert len(ys) <= CHART_SAMPLES
    assert ys[xs.index(SPIKE_T)] == SPIKE_TPS
    assert ys[xs.index(DIP_T)] == DIP_TPS
    assert len(response.context["figures"]["host"]["data"][0]["y"]) <= CHART_SAMPLES


def test_the_compare_page_keeps_the_spike_in_each_runs_share_of_the_chart(signed_in, user):
    runs = [long_run() for _ in range(3)]
    comparison = services.comparison_create(user, "three hours", runs, runs[0])
    response = signed_in.get(reverse("comparison-detail", args=[comparison.pk]))
    traces = response.context["figures"]["timelines"]["tps"]["data"]
    assert [trace["meta"]["run"] for trace in traces] == [run.pk for run in runs]
    for trace in traces:
        assert len(trace["y"]) < CHART_SAMPLES
        assert SPIKE_TPS in trace["y"] and DIP_TPS in trace["y"]


WRITES = ("INSERT", "UPDATE", "DELETE")


def writes_of(client: Client, url: str) -> tuple[list[str], dict]:
    """The write statements one view of `url` makes, and its figures."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    sql = [query["sql"] for query in captured.captured_queries]
    return [q for q in sql if q.lstrip().upper().startswith(WRITES)], response.context["figures"]


def test_a_finished_runs_page_reads_the_digest_the_control_worker_built(signed_in: Client):
    run = long_run()
    store.digest_refresh(run.pk)
    built = RunTimeline.objects.get(run=run)
    writes, figures = writes_of(signed_in, reverse("run-detail", args=[run.pk]))
    assert writes == []
    xs, ys = tps_trace(figures["tps"])
    assert ys[xs.index(SPIKE_T)] == SPIKE_TPS
    assert RunTimeline.objects.get(run=run).built_at == built.built_at


def test_a_finished_run_without_a_current_digest_is_drawn_without_writing(signed_in, user):
    """Before the control worker has built it (a late event, or a run older than it)."""
    runs = [long_run() for _ in range(2)]
    store.digest_refresh(runs[0].pk)
    ProgressSample.objects.create(run=runs[0], point=1, t=1.0, tps=7777.0, latency_ms=1.0)
    Run.objects.filter(pk=runs[0].pk).update(last_event_at=timezone.now())
    comparison = services.comparison_create(user, "two hours", runs, runs[0])

    writes, figures = writes_of(signed_in, reverse("run-detail", args=[runs[0].pk]))
    assert writes == []
    xs, ys = tps_trace(figures["tps"])
    assert ys[-1] == 7777.0 and xs[-1] == 3601.0
    writes, figures = writes_of(signed_in, reverse("comparison-detail", args=[comparison.pk]))
    assert writes == []
    for trace in figures["timelines"]["tps"]["data"]:
        assert SPIKE_TPS in trace["y"]
    assert list(RunTimeline.objects.values_list("run", flat=True)) == [runs[0].pk]


def zoom(client: Client, url: str, **query) -> dict:
    response = client.get(url, query)
    assert response.status_code == 200, response.content
    return response.json()


def test_zoom_returns_every_sample_of_the_range_across_points(signed_in: Client):
    run = long_run((3600, 600))
    signed_in.get(reverse("run-detail", args=[run.pk]))  # the reduced page first
    url = reverse("run-timeline")
    found = zoom(signed_in, url, run=run.pk, trace="tps", x0=1000, x1=1100)
    assert found["x"] == [float(t) for t in range(1000, 1101)]
    assert found["y"] == [tps_at(0, t) for t in range(1000, 1101)]
    assert (found["samples"], found["reduced"]) == (101, False)
    across = zoom(signed_in, url, run=run.pk, trace="tps", x0=3590, x1=3610)
    assert across["x"] == [*map(float, range(3590, 3601)), None, *map(float, range(3601, 3611))]
    assert across["y"][-1] == tps_at(1, 10.0)
    host = zoom(signed_in, url, run=run.pk, trace="host.cpu_user", x0=10, x1=19)
    assert host["y"] == [40.0] * 10


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"trace": "tps", "x0": 1, "x1": 2}, "run"),
        ({"run": "{run}", "trace": "tps", "x0": "soon", "x1": 2}, "x0"),
        ({"run": "{run}", "trace": "tps", "x0": 5, "x1": 2}, "x1"),
        ({"run": "{run}", "trace": "host.nothing", "x0": 1, "x1": 2}, "trace"),
    ],
)
def test_zoom_names_the_field_to_fix(signed_in: Client, query: dict, field: str):
    run = long_run((10,))
    query = {key: str(value).format(run=run.pk) for key, value in query.items()}
    response = signed_in.get(reverse("run-timeline"), query)
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_a_page_loaded_before_traces_had_their_name_still_zooms(signed_in: Client):
    run = long_run((100,))
    url = reverse("run-timeline")

    former = zoom(signed_in, url, run=run.pk, series="tps", x0=1, x1=5)

    assert former == zoom(signed_in, url, run=run.pk, trace="tps", x0=1, x1=5)
    assert former["trace"] == "tps" and former["x"] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_a_shared_link_zooms_into_its_own_runs_only(user):
    shared, other = long_run((100,)), long_run((100,))
    link, token = services.share_link_create(user, shared)
    url = reverse("shared-timeline", args=[token])
    anonymous = Client()
    found = zoom(anonymous, url, run=shared.pk, trace="tps", x0=1, x1=5)
    assert found["x"] == [1.0, 2.0, 3.0, 4.0, 5.0]
    query = {"run": other.pk, "trace": "tps", "x0": 1, "x1": 5}
    assert anonymous.get(url, query).status_code == 404
    assert anonymous.get(reverse("run-timeline"), query).status_code == 302
    services.share_link_revoke(link, user)
    assert anonymous.get(url, {**query, "run": shared.pk}).status_code == 404


def test_a_running_runs_page_writes_nothing_and_streams_after_what_the_worker_stored(signed_in):
    run = long_run((100,))
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, finished_at=None, last_event_at=timezone.now()
    )
    url = reverse("run-detail", args=[run.pk])
    writes, _figures = writes_of(signed_in, url)
    assert writes == [] and not RunTimeline.objects.exists(), "built for the view only"

    store.digest_refresh(run.pk)  # the control worker's reaper pass
    stored = RunTimeline.objects.get(run=run)
    newer = ProgressSample.objects.create(run=run, point=0, t=101.0, tps=1.0, latency_ms=1.0)
    page = signed_in.get(url)
    xs, _ys = tps_trace(page.context["figures"]["tps"])
    assert xs[-1] == 100.0
    assert parse_cursor(page.context["cursor"])["p"] == newer.pk - 1
    assert RunTimeline.objects.get(run=run).built_at == stored.built_at
