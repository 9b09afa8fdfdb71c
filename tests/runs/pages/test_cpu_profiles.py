"""A real job's CPU-profile pass in the lab: the agent's events (perf on a real PostgreSQL
16, real pgbench) go through the lab's event handling; the folded stacks are stored apart
from the measured results and reach the API, the JSON export, the folded-stacks link and
the run page, while the results, the statistics and the CSV export hold measured points
only."""

import csv
import io
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from agents.config import AgentConfig
from agents.contract.reports.cpu_profiles import parse_folded
from agents.contract.reports.events import validate_event
from agents.events import EventEmitter
from agents.job import run_job
from runs.flamegraphs.store import cpu_profile_store
from runs.models import CpuProfile, Result, Run
from runs.services.jobs.events import run_record_event
from tests.agents.conftest import config, storage_root  # noqa: F401 (fixtures)
from tests.agents.jobs import Recorder, small_spec
from tests.runs.factories import RunFactory

pytestmark = pytest.mark.django_db


def measured_by_the_agent(spec: dict[str, Any], agent_config: AgentConfig) -> Run:
    """A lab run whose real job's events were recorded as the control worker records them."""
    run = RunFactory(status=Run.Status.RUNNING, spec=spec)
    recorder = Recorder()
    emitter = EventEmitter([recorder], run_id=str(run.pk), token=run.token)
    document = run_job({**spec, "run_id": str(run.pk)}, agent_config, emitter)
    assert document["status"] == "succeeded", document["error"]
    for event in recorder.events:  # one transaction each, as the consumer stores them
        with transaction.atomic():
            run_record_event(validate_event(event))  # type: ignore[arg-type]
    run.refresh_from_db()
    return run


def test_a_real_cpu_profile_pass_reaches_the_lab_apart_from_the_measured_points(
    config: AgentConfig,  # noqa: F811
    user: Any,
    api_client: APIClient,
) -> None:
    spec = small_spec(
        workload={"scripts": [{"builtin": "select-only", "weight": 1}]},
        sweep={"clients": [2], "duration_s": 2, "repeats": 2, "cpu_profile": True},
    )
    run = measured_by_the_agent(spec, config)

    assert run.status == Run.Status.SUCCEEDED
    assert Result.objects.filter(run=run).count() == 2
    [cpu_profile] = CpuProfile.objects.filter(run=run)
    assert cpu_profile.clients == 2 and cpu_profile.error == ""
    assert (
        "PostgresMain" in cpu_profile.folded and sum(parse_folded(cpu_profile.folded).values()) > 0
    )

    answered = api_client.get(f"/api/runs/{run.pk}/cpu-profiles/").json()
    assert [(p["clients"], p["folded"]) for p in answered] == [(2, cpu_profile.folded)]
    assert len(api_client.get(f"/api/runs/{run.pk}/results/").json()["results"]) == 2

    client = Client()
    client.force_login(user)
    exported = client.get(reverse("run-export", args=[run.pk, "json"])).json()
    [exported_run] = exported["runs"]
    assert len(exported_run["points"]) == 2
    assert exported_run["cpu_profiles"][0]["measured"] is False
    assert exported_run["cpu_profiles"][0]["folded"] == cpu_profile.folded
    rows = list(
        csv.DictReader(
            io.StringIO(client.get(reverse("run-export", args=[run.pk, "csv"])).content.decode())
        )
    )
    assert len(rows) == 2
    folded = client.get(reverse("run-cpu-profile-folded", args=[run.pk, cpu_profile.index]))
    assert (
        folded["Content-Type"].startswith("text/plain")
        and folded.content.decode() == cpu_profile.folded
    )

    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'id="cpu-profiles"' in page and "not a measured result" in page
    assert 'data-figure="fig-cpu-profile-0"' in page and '"type": "icicle"' in page


def test_a_run_whose_agent_may_not_record_a_cpu_profile_says_why_on_its_page(
    config: AgentConfig,  # noqa: F811
    user: Any,
) -> None:
    spec = small_spec(sweep={"clients": [1], "duration_s": 1, "cpu_profile": True})
    config.allow_cpu_profiling = False
    run = measured_by_the_agent(spec, config)

    [cpu_profile] = CpuProfile.objects.filter(run=run)
    assert cpu_profile.folded == "" and "allow_cpu_profiling" in cpu_profile.error
    client = Client()
    client.force_login(user)
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "No CPU profile:" in page and "allow_cpu_profiling" in page


def test_folded_stacks_the_lab_cannot_read_are_kept_out_and_said_so(user: Any) -> None:
    run = RunFactory(status=Run.Status.SUCCEEDED)
    cpu_profile_store(
        run,
        {
            "index": 0,
            "clients": 2,
            "tps": 100.0,
            "seconds": 2.0,
            "frequency_hz": 99,
            "event": "cpu-clock",
            "call_graph": "dwarf",
            "samples": 3,
            "kept_samples": 3,
            "folded": "main;exec 2\nmain;parse many\n",
            "argv": ["perf", "record"],
            "error": None,
        },
    )

    [cpu_profile] = CpuProfile.objects.filter(run=run)
    assert cpu_profile.folded == "" and "line 2" in cpu_profile.error
    client = Client()
    client.force_login(user)
    response = client.get(reverse("run-detail", args=[run.pk]))
    assert response.status_code == 200
    assert "No CPU profile at 2 clients: the agent sent folded stacks" in response.content.decode()
