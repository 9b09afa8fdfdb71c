"""Free space: stored from registrations and heartbeats, checked when an experiment is
scheduled or started (runs/services/hosts/space.py, agents/contract/spec/space.py)."""

import pytest

from agents.contract.errors import JobError
from runs import services
from runs.models import Experiment, Host
from runs.services.jobs.ingest import record_heartbeats
from tests.runs import events
from tests.runs.factories import (
    ConfigProfileFactory,
    ExperimentFactory,
    HostFactory,
    PgBuildFactory,
    WorkloadFactory,
)

pytestmark = pytest.mark.django_db

MB = 1024**2


def host_with_space(**free_mb: int) -> Host:
    host = HostFactory()
    for name, free in free_mb.items():
        host.storage_targets.create(name=name, path=f"/mnt/{name}")
        host.storage_space[name] = {
            "total_bytes": 10_000 * MB,
            "free_bytes": free * MB,
            "at": "2026-11-25T12:00:00+00:00",
        }
    host.save()
    return host


def test_a_dataset_larger_than_the_free_space_answers_400_naming_target_needed_and_free(
    api_client, experiment_payload
):
    host = host_with_space(default=500)
    workload = WorkloadFactory(scale=100)
    body = experiment_payload(hosts=[host.pk], workloads=[workload.pk], start=True)

    response = api_client.post("/api/experiments/", body, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "insufficient_space"
    [message] = error["fields"]["storage.data"]
    assert f"storage target “default” on host {host.name} has 500 MB free" in message
    # (8 + 100 x 15.2 MB of data + 32 + 1024 MB of WAL) x 1.2
    assert "the dataset and its WAL at scale 100 needs about 3,101 MB" in message
    assert not Experiment.objects.exists()


def test_wal_apart_is_checked_on_its_own_target(api_client, experiment_payload):
    host = host_with_space(nvme=100_000, walssd=100)
    workload = WorkloadFactory(scale=50)
    layouts = [{"data": "nvme", "wal": "walssd"}]
    body = experiment_payload(
        hosts=[host.pk], workloads=[workload.pk], storage_layouts=layouts, start=True
    )

    response = api_client.post("/api/experiments/", body, format="json")

    assert response.status_code == 400
    [message] = response.json()["error"]["fields"]["storage.wal"]
    assert "“walssd”" in message and "has 100 MB free" in message
    assert "its WAL at scale 50 needs about 788 MB" in message


def test_a_lower_fillfactor_needs_more_room():
    host = host_with_space(default=500)
    roomy = ExperimentFactory(hosts=[host], workloads=[WorkloadFactory(scale=10)])
    services.experiment_start(roomy)

    sparse = WorkloadFactory(scale=10, fillfactor=50)
    refused = ExperimentFactory(hosts=[host], workloads=[sparse])
    with pytest.raises(JobError) as raised:
        services.experiment_start(refused)
    assert (raised.value.code, raised.value.field) == ("insufficient_space", "storage.data")
    assert "at scale 10, fillfactor 50 needs about 536 MB" in raised.value.message
    assert not refused.runs.exists()


def test_without_a_reported_figure_nothing_is_refused_and_a_note_says_so(lab_redis):
    host = HostFactory()
    data = {
        "name": "big",
        "hosts": [host],
        "builds": [PgBuildFactory()],
        "config_profiles": [ConfigProfileFactory()],
        "workloads": [WorkloadFactory(scale=10_000)],
        "clients": [1],
        "duration_s": 2,
    }

    scheduled = services.experiment_schedule(None, data, start=True)

    assert len(scheduled.runs) == 1
    assert (
        f"host {host.name} has reported no free space for storage target “default” yet: "
        "whether the dataset fits was not checked"
    ) in scheduled.notes


def test_registration_and_heartbeats_keep_each_targets_latest_free_space():
    host = HostFactory()
    facts = {"storage": {"nvme": {"path": "/mnt/nvme", "total_bytes": 900, "free_bytes": 800}}}
    register = {"facts": facts, "installs": [], "storage": {}, "catalogues": {}}
    services.agent_record_event(events.agent_event(host.name, 1, "agent_register", register))
    host.refresh_from_db()
    assert host.storage_space["nvme"]["free_bytes"] == 800

    space = {"nvme": {"total_bytes": 900, "free_bytes": 300}}
    beat = events.agent_event(
        host.name, 2, "heartbeat", {"running": None, "space": space}, secret=host.secret
    )
    quiet = events.agent_event(host.name, 3, "heartbeat", {"running": None}, secret=host.secret)
    assert record_heartbeats([beat, quiet]) == [None, None]
    host.refresh_from_db()
    assert host.storage_space["nvme"]["free_bytes"] == 300
    assert host.storage_space["nvme"]["at"]
