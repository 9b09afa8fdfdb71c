"""The run list and the run page."""

import json
import re

import pytest
from django.urls import reverse

from runs.models import Run
from tests.runs.factories import HostFactory, ResultFactory, RunFactory, ServerSampleFactory
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.django_db


def test_run_list_shows_runs_with_best_tps_and_compare_checkboxes(signed_in, run_with_results):
    page = signed_in.get(reverse("run-list")).content.decode()
    assert f'href="/runs/{run_with_results.pk}/"' in page
    assert "2,345.2" in page
    assert f'name="runs" value="{run_with_results.pk}"' in page


def test_run_list_without_hosts_says_how_to_start_an_agent(signed_in):
    page = signed_in.get(reverse("run-list")).content.decode()
    assert "python -m agents worker --name NAME" in page


def test_run_list_with_hosts_but_no_runs_points_to_the_schedule_form(signed_in):
    HostFactory()
    page = signed_in.get(reverse("run-list")).content.decode()
    assert "No runs yet" in page and reverse("schedule") in page


def test_run_list_filters_by_status(signed_in, run_with_results):
    queued = RunFactory()
    page = signed_in.get(reverse("run-list"), {"status": "queued"}).content.decode()
    assert f"/runs/{queued.pk}/" in page
    assert f"/runs/{run_with_results.pk}/" not in page


def test_run_page_shows_points_with_units_and_the_commands(signed_in, run_with_results):
    page = signed_in.get(reverse("run-detail", args=[run_with_results.pk])).content.decode()
    assert "1,234.6" in page  # tps, thousands separated, one decimal
    assert "0.810" in page  # latency in ms, three decimals
    assert "/usr/bin/pgbench -c 2 -T 2" in page
    assert 'data-figure="fig-tps"' in page and 'id="fig-tps"' in page
    assert "data-live" not in page  # a finished run has no live part
    assert "Re-run" in page and ">Cancel<" not in page


@pytest.mark.parametrize("duet", [False, True])
def test_a_point_s_cpu_says_when_the_agent_s_share_covers_both_sides_of_a_duet(
    signed_in, duet: bool
):
    result = ResultFactory(pgbench_cpu_s=4.0, agent_cpu_s=0.03)
    result.run.experiment.duet = duet
    result.run.experiment.save(update_fields=["duet"])
    page = signed_in.get(reverse("run-detail", args=[result.run.pk])).content.decode()
    assert "the agent used 0.03 CPU s" in page
    assert ("both sides of the duet" in page) is duet


def test_run_page_of_a_running_run_is_live_with_a_cancel_button(signed_in, user):
    run = RunFactory(status=Run.Status.RUNNING, step="pgbench_init 40%", created_by=user)
    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "data-live" in page and f'data-events-url="/runs/{run.pk}/events"' in page
    assert ">Cancel<" in page
    assert "Step: pgbench_init 40%" in page


def test_run_page_hides_the_dispatch_token(signed_in):
    run = RunFactory(spec={"run_id": "1", "token": "secret-dispatch-token"})
    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "secret-dispatch-token" not in page


def test_cancel_of_a_queued_run_cancels_it(signed_in, user, lab_redis):
    run = RunFactory(created_by=user)
    response = signed_in.post(reverse("run-cancel", args=[run.pk]))
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED


def test_cancel_of_a_finished_run_says_why_it_cannot(signed_in, user, run_with_results):
    Run.objects.filter(pk=run_with_results.pk).update(created_by=user)
    response = signed_in.post(reverse("run-cancel", args=[run_with_results.pk]), follow=True)
    assert "already succeeded" in response.content.decode()


def test_rerun_queues_a_new_run_linked_to_the_original(signed_in, lab_redis):
    run = RunFactory(status=Run.Status.SUCCEEDED)
    run.spec = {
        "version": 1,
        "postgres": {"version": "16", "source": "auto"},
        "sweep": {"clients": [1], "duration_s": 2},
    }
    run.save()
    response = signed_in.post(reverse("run-rerun", args=[run.pk]))
    rerun = Run.objects.get(rerun_of=run)
    assert response["Location"] == reverse("run-detail", args=[rerun.pk])
    assert rerun.status == Run.Status.QUEUED


def test_unknown_run_is_404(signed_in):
    assert signed_in.get(reverse("run-detail", args=[999999])).status_code == 404


def figure(page: str, element_id: str) -> dict:
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', page)
    return json.loads(match.group(1))


def server_sample(run: Run, point: int, t: float, timed: int, written: float, waits: dict):
    data = {"checkpoints_timed": timed, "checkpoints_req": 1, "buffers_checkpoint_per_s": written}
    return ServerSampleFactory(
        run=run, point=point, t=t, data={"t": t, **data, "wait_events": waits}
    )


@pytest.fixture
def run_with_a_checkpoint(db) -> Run:
    """Two points of two seconds; a timed checkpoint starts at t=2 of the second point."""
    run = finished_run([(1, 1, 1000.0, 1.0), (1, 2, 1010.0, 1.0)])
    server_sample(run, 0, 1.0, 4, 0.0, {"CPU": 1})
    server_sample(run, 0, 2.0, 4, 0.0, {"CPU": 1})
    server_sample(run, 1, 1.0, 4, 0.0, {"LWLock:BufferMapping": 2, "CPU": 1})
    server_sample(run, 1, 2.0, 5, 250.0, {"LWLock:WALWrite": 1, "IO:DataFileWrite": 2})
    return run


def traced(traces: list[dict], name: str) -> dict:
    """The trace a figure addresses by `meta.trace` (as the live page does)."""
    (found,) = [trace for trace in traces if trace.get("meta", {}).get("trace") == name]
    return found


def test_run_page_draws_checkpoints_buffers_and_wait_events_on_the_tps_time_axis(
    signed_in, run_with_a_checkpoint
):
    page = signed_in.get(reverse("run-detail", args=[run_with_a_checkpoint.pk])).content.decode()
    server = figure(page, "fig-server")["data"]
    buffers, checkpoints = server[0], traced(server, "checkpoints")
    assert buffers["x"] == figure(page, "fig-tps")["data"][0]["x"] == [1.0, 2.0, None, 3.0, 4.0]
    assert buffers["y"] == [0.0, 0.0, None, 0.0, 250.0]
    assert (checkpoints["x"], checkpoints["text"]) == ([4.0], ["timed checkpoint start"])
    stacked = [trace for trace in server if trace.get("stackgroup") == "waits"]
    waits = {trace["name"]: trace["y"] for trace in stacked}
    assert waits == {
        "CPU": [1, 1, None, 1, 0],
        "IO": [0, 0, None, 0, 2],
        "LWLock": [0, 0, None, 2, 1],
    }
    assert [trace["meta"]["trace"] for trace in stacked] == ["wait.CPU", "wait.IO", "wait.LWLock"]
    (line,) = figure(page, "fig-tps")["layout"]["shapes"]
    assert line["x0"] == 4.0  # the checkpoint start, drawn on the tps chart too


def test_run_page_lists_warnings_per_point_and_for_the_whole_run(signed_in, run_with_a_checkpoint):
    page = signed_in.get(reverse("run-detail", args=[run_with_a_checkpoint.pk])).content.decode()
    rows = dict(re.findall(r'<tr data-index="(\d+)"[^>]*>(.*?)</tr>', page, re.S))
    assert 'data-warning="checkpoint_in_window"' in rows["1"]
    assert "timed checkpoint started at 2 s" in rows["1"]
    assert "data-warning" not in rows["0"]
    notice = page.split('id="run-warnings"')[1].split("</div>")[0]
    assert "window shorter than checkpoint_timeout" in notice  # 2 s points, 300 s default
    tps_figure = figure(page, "fig-tps")
    marks = tps_figure["data"][1]
    assert marks["name"] == "validity warning" and marks["x"] == [3.0]
    assert tps_figure["layout"]["showlegend"] and marks["showlegend"]
    assert "validity warning" in marks["hovertemplate"]
    checkpoints = traced(figure(page, "fig-server")["data"], "checkpoints")
    assert marks["marker"]["symbol"] not in checkpoints["marker"]["symbol"]
    assert marks["marker"]["color"] not in checkpoints["marker"]["color"]


def test_run_page_shows_the_messages_pgbench_printed_that_the_parser_does_not_know(signed_in):
    run = RunFactory(status=Run.Status.SUCCEEDED)
    run.results.create(
        index=0, clients=8, tps=512.0, messages=["\tThis probably means the server terminated"]
    )
    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "does not know, point 0" in page
    assert "This probably means the server terminated" in page


def test_per_statement_latencies_are_shown_only_for_points_that_have_them(signed_in):
    run = finished_run([(1, 1, 1000.0, 1.0), (2, 1, 1900.0, 1.05)])
    measured_with_r = run.results.get(index=1)
    measured_with_r.statements = [
        {"latency_ms": 0.002, "command": "\\set aid random(1, 100000 * :scale)"},
        {"latency_ms": 0.871, "command": "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;"},
    ]
    measured_with_r.save()

    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()

    commands = page.split('id="commands"')[1].split("</details>")[0]
    point_0, point_1 = commands.split("<h3>Point 1:")
    assert "Statement</th>" not in point_0
    assert "Statement</th>" in point_1
    assert "0.871" in point_1 and "SELECT abalance FROM pgbench_accounts" in point_1


def test_per_statement_table_splits_scripts_and_shows_failures_and_retries_when_printed(
    signed_in,
):
    run = finished_run([(8, 1, 1736.2, 0.78)])
    point = run.results.get()
    point.statements = [
        {"latency_ms": 0.079, "command": "BEGIN;", "failures": 0, "retries": 0, "script": 1},
        {
            "latency_ms": 0.165,
            "command": "UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = :tid;",
            "failures": 2182,
            "retries": 4980,
            "script": 1,
        },
        {"latency_ms": 0.119, "command": "SELECT 1;", "failures": 0, "retries": 0, "script": 2},
    ]
    point.save()

    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()

    table = page.split('<table class="statements">')[1].split("</table>")[0]
    headers = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", table)
    assert headers == ["Script", "Latency (ms)", "Failures", "Retries", "Statement"]
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table)]
    assert [row[:4] for row in rows[1:]] == [
        ["1", "0.079", "0", "0"],
        ["1", "0.165", "2,182", "4,980"],
        ["2", "0.119", "0", "0"],
    ]


@pytest.mark.parametrize(
    ("workload", "title"),
    [
        (
            {"latency_log": "sampled", "progress": False},
            "tps over time (estimated from the sampled transaction log)",
        ),
        (
            {"latency_log": "aggregate", "progress": False},
            "tps over time (from the aggregate log, drawn as each point ends)",
        ),
        ({"latency_log": "sampled", "progress": True}, "tps over time"),
    ],
)
def test_run_page_says_where_its_timeline_comes_from(signed_in, workload: dict, title: str):
    run = finished_run([(1, 1, 1000.0, 1.0)])
    run.spec = {**run.spec, "workload": {**run.spec.get("workload", {}), **workload}}
    run.save(update_fields=["spec"])

    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert figure(page, "fig-tps")["layout"]["title"]["text"] == title
