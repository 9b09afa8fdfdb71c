"""The run list and the run page."""

import pytest
from django.urls import reverse

from runs.models import Run
from tests.runs.factories import HostFactory, RunFactory

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


def test_run_page_of_a_running_run_is_live_with_a_cancel_button(signed_in):
    run = RunFactory(status=Run.Status.RUNNING, step="pgbench_init 40%")
    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "data-live" in page and f'data-events-url="/runs/{run.pk}/events"' in page
    assert ">Cancel<" in page
    assert "Step: pgbench_init 40%" in page


def test_run_page_hides_the_dispatch_token(signed_in):
    run = RunFactory(spec={"run_id": "1", "token": "secret-dispatch-token"})
    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "secret-dispatch-token" not in page


def test_cancel_of_a_queued_run_cancels_it(signed_in, lab_redis):
    run = RunFactory()
    response = signed_in.post(reverse("run-cancel", args=[run.pk]))
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED


def test_cancel_of_a_finished_run_says_why_it_cannot(signed_in, run_with_results):
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
