"""Migrations 0021 and 0022: the client host's samples become host samples of the client
role and go back again, run against the test database as `migrate` runs them."""

import importlib

from django.apps.registry import Apps
from django.db import connection

from runs.models import HostSample
from tests.runs.factories import HostFactory, RunFactory
from tests.runs.migrations.migrating import migrate

BEFORE = [("runs", "0020_imported_latency_derived_and_output_hash")]
AFTER = [("runs", "0022_client_host_samples_as_host_samples")]
MOVE = importlib.import_module("runs.migrations.0022_client_host_samples_as_host_samples")


def old_rows(apps: Apps, run_pk: int) -> None:
    """Server and client host samples as 0020 stored them, their ids interleaved."""
    old_host = apps.get_model("runs", "HostSample")
    old_client = apps.get_model("runs", "ClientHostSample")
    for t in (1.0, 2.0, 3.0):
        old_host.objects.create(run_id=run_pk, point=0, t=t, data={"t": t, "cpu_user": 10 * t})
        old_client.objects.create(run_id=run_pk, point=0, t=t, data={"t": t, "cpu_user": 90 + t})
    old_client.objects.create(run_id=run_pk, point=1, t=None, data={"cpu_user": 50.0})


def test_client_host_samples_move_into_host_samples_and_back(at_latest, monkeypatch):
    monkeypatch.setattr(MOVE, "BATCH", 3)  # several batches of the copy
    run = RunFactory(client_host=HostFactory())
    old = migrate(BEFORE)
    old_rows(old, run.pk)
    servers_before = list(
        old.get_model("runs", "HostSample").objects.order_by("pk").values_list("pk", "t", "data")
    )

    migrate(AFTER)

    servers = HostSample.objects.filter(run=run, role=HostSample.Role.SERVER).order_by("pk")
    assert list(servers.values_list("pk", "t", "data")) == servers_before
    clients = HostSample.objects.filter(run=run, role=HostSample.Role.CLIENT).order_by("pk")
    assert list(clients.values_list("point", "t", "data")) == [
        (0, 1.0, {"t": 1.0, "cpu_user": 91.0}),
        (0, 2.0, {"t": 2.0, "cpu_user": 92.0}),
        (0, 3.0, {"t": 3.0, "cpu_user": 93.0}),
        (1, None, {"cpu_user": 50.0}),
    ]
    assert "runs_clienthostsample" not in connection.introspection.table_names()

    back = migrate(BEFORE)

    moved_back = back.get_model("runs", "ClientHostSample").objects.order_by("pk")
    assert [row["data"]["cpu_user"] for row in moved_back.values("data")] == [91, 92, 93, 50]
    assert set(moved_back.values_list("run_id", flat=True)) == {run.pk}
    hosts = back.get_model("runs", "HostSample").objects.order_by("pk")
    assert list(hosts.values_list("pk", "t", "data")) == servers_before
