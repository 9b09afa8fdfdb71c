"""A run with a client host, on the lab's side: both halves dispatched, the estimate, the
checks, and what the server half reports (client host samples, the network path)."""

import pytest
from django.test import Client
from django.urls import reverse

from agents.contract.errors import JobError
from agents.contract.signing import unsigned, verify
from runs import services
from runs.analysis.validity import result_warnings
from runs.estimates import RUN_OVERHEAD_S
from runs.models import Host, HostSample, Run, Series
from runs.services.history.series import series_fire, series_save
from runs.services.jobs.events import run_record_event
from runs.timelines import store
from tests.runs.factories import (
    ConfigProfileFactory,
    ExperimentFactory,
    HostFactory,
    ResultFactory,
    RunFactory,
)
from tests.runs.services.test_experiment_start import expected_estimate, queued_jobs

pytestmark = pytest.mark.django_db


def test_each_run_sends_its_server_half_and_its_client_half_with_one_token(
    lab_redis, django_capture_on_commit_callbacks
):
    server, client = HostFactory(), HostFactory()
    experiment = ExperimentFactory(hosts=[server], client_host=client)

    with django_capture_on_commit_callbacks(execute=True):
        (run,) = services.experiment_start(experiment)

    assert run.client_host == client
    (server_job,) = queued_jobs(lab_redis, server.name)
    (client_job,) = queued_jobs(lab_redis, client.name)
    assert verify("job", server_job["args"][0], server.secret)
    assert verify("job", client_job["args"][0], client.secret)
    server_spec, client_spec = unsigned(server_job["args"][0]), unsigned(client_job["args"][0])
    assert server_spec["network"]["role"] == "server"
    assert server_spec["network"]["peer"] == client.name
    assert client_spec["network"]["role"] == "client"
    assert client_spec["network"]["peer"] == server.name
    assert server_spec["token"] == client_spec["token"] == run.token
    assert {k: v for k, v in client_spec.items() if k != "network"} == {
        k: v for k, v in server_spec.items() if k != "network"
    }


def test_the_client_host_cannot_be_a_server_host_of_the_same_experiment(lab_redis):
    host = HostFactory()
    experiment = ExperimentFactory(hosts=[host], client_host=host)

    with pytest.raises(JobError) as raised:
        services.experiment_start(experiment)

    assert raised.value.field == "client_host"


def test_an_unapproved_client_host_is_refused_naming_the_field(lab_redis):
    pending = HostFactory(enrollment=Host.Enrollment.PENDING)
    experiment = ExperimentFactory(client_host=pending)

    with pytest.raises(JobError) as raised:
        services.experiment_start(experiment)

    assert (raised.value.code, raised.value.field) == ("host_not_approved", "client_host")


def test_the_experiment_page_names_the_client_host(user):
    experiment = ExperimentFactory(client_host=HostFactory(name="client-c"))
    signed_in = Client()
    signed_in.force_login(user)

    page = signed_in.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()

    assert "pgbench on client host <strong>client-c</strong>" in page


def test_the_estimate_counts_the_client_host_busy_for_every_server_hosts_runs():
    experiment = ExperimentFactory(
        hosts=[HostFactory(), HostFactory()],
        config_profiles=[ConfigProfileFactory(), ConfigProfileFactory()],
        client_host=HostFactory(),
        clients=[1, 2],
        repeats=3,
        duration_s=10,
        warmup_s=5,
        execution="blocks",
    )

    estimate = services.experiment_estimate(experiment)

    setup = RUN_OVERHEAD_S + 0.5
    assert estimate == expected_estimate("blocks", 4, busiest_runs=4, points_per_run=6, setup=setup)


def test_the_api_answers_400_naming_client_host_when_it_is_a_server_host(
    api_client, lab_redis, experiment_payload
):
    payload = experiment_payload()
    payload["client_host"] = payload["hosts"][0]

    answer = api_client.post("/api/experiments/", payload, format="json")

    assert answer.status_code == 400
    assert "client_host" in answer.json()["error"]["fields"]


def test_the_api_takes_a_client_host_and_shows_it_on_the_runs(
    api_client, lab_redis, experiment_payload
):
    client = HostFactory()
    payload = {**experiment_payload(), "client_host": client.pk, "start": True}

    created = api_client.post("/api/experiments/", payload, format="json")

    assert created.status_code == 201, created.json()
    assert created.json()["client_host"] == client.pk
    runs = api_client.get("/api/runs/").json()["results"]
    assert [run["client_host"] for run in runs] == [client.name]


def event(run, seq, event_type, data):
    return {
        "version": 1,
        "run_id": str(run.pk),
        "token": run.token,
        "agent": run.host.name,
        "seq": seq,
        "ts": "2026-01-01T00:00:00Z",
        "type": event_type,
        "data": data,
    }


def test_client_host_samples_and_the_network_path_are_stored(user):
    signed_in = Client()
    signed_in.force_login(user)
    run = RunFactory(client_host=HostFactory())
    sample = {"t": 1.0, "cpu_user": 97.0, "cpu_system": 2.0}
    run_record_event(event(run, 1, "sample", {"point": 0, "client_host": sample}))
    network = {
        "client_address": "127.0.0.1",
        "server_address": "127.0.0.1",
        "port": 5999,
        "transport": "tcp",
        "select1_ms": 0.05,
        "select1_samples": 20,
    }
    result = {
        "version": 1,
        "run_id": str(run.pk),
        "status": "succeeded",
        "error": None,
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:00:10Z",
        "spec": {},
        "install": None,
        "facts": None,
        "storage": {},
        "settings": {"requested": {}, "effective": [], "warnings": []},
        "steps": [],
        "dataset": {},
        "points": [],
        "server_log_tail": "",
        "network": network,
    }
    run_record_event(event(run, 2, "result", result))

    run.refresh_from_db()
    assert run.network == network
    assert [s.data["cpu_user"] for s in run.host_samples.filter(role=HostSample.Role.CLIENT)] == [
        97.0
    ]
    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert f"pgbench on client host <strong>{run.client_host.name}</strong>" in page
    assert "0.05 ms" in page
    assert "client host CPU user %" in page


def test_a_busy_client_host_flags_the_load_generator_not_the_server_host(lab_redis):
    run = RunFactory(client_host=HostFactory(), status=Run.Status.SUCCEEDED)
    result = ResultFactory(run=run, index=0, threads=1, pgbench_cpus=1, pgbench_cpu_s=8.0)
    for t in (1.0, 2.0, 3.0):
        HostSample.objects.create(run=run, point=0, t=t, data={"t": t, "cpu_idle": 1.0})
        HostSample.objects.create(
            run=run, role=HostSample.Role.CLIENT, point=0, t=t, data={"t": t, "cpu_idle": 2.0}
        )

    found = store.digests([run])[run.pk].warnings[0]
    (warning,) = result_warnings(result, found)

    assert warning.code == "load_generator_saturated"
    assert warning.detail.startswith("client host CPU idle 2.0 %")


def test_an_occurrence_of_a_series_keeps_the_client_host_of_its_template(
    lab_redis, user, django_capture_on_commit_callbacks
):
    server, client = HostFactory(), HostFactory()
    template = ExperimentFactory(hosts=[server], client_host=client)
    series = series_save(Series(name="s", template=template, schedule="0 3 * * *", created_by=user))

    with django_capture_on_commit_callbacks(execute=True):
        occurrence = series_fire(series)

    assert occurrence.experiment.client_host == client
    (run,) = occurrence.experiment.runs.all()
    assert run.client_host == client
    assert len(queued_jobs(lab_redis, client.name)) == 1
