"""The client host's samples become host samples of the client role, then their table goes.

Rows are copied with the ORM a batch at a time in id order (the order the API and the
live page read rows of the same second in), so it runs on SQLite and PostgreSQL alike;
going back moves them the other way.
"""

from django.db import migrations

BATCH = 2000


def _copy(rows, target, **values):
    """Copy `rows` into the model `target` in id order, with `values` set on each."""
    last = 0
    while batch := list(rows.filter(pk__gt=last).order_by("pk")[:BATCH]):
        target.objects.using(rows.db).bulk_create(
            target(run_id=row.run_id, point=row.point, t=row.t, data=row.data, **values)
            for row in batch
        )
        last = batch[-1].pk


def client_samples_into_host_samples(apps, schema_editor):
    client_samples = apps.get_model("runs", "ClientHostSample")
    rows = client_samples.objects.using(schema_editor.connection.alias).all()
    _copy(rows, apps.get_model("runs", "HostSample"), role="client")


def host_samples_of_clients_back(apps, schema_editor):
    host_samples = apps.get_model("runs", "HostSample")
    rows = host_samples.objects.using(schema_editor.connection.alias).filter(role="client")
    _copy(rows, apps.get_model("runs", "ClientHostSample"))
    rows.delete()


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0021_host_sample_role"),
    ]

    operations = [
        migrations.RunPython(client_samples_into_host_samples, host_samples_of_clients_back),
        migrations.DeleteModel(
            name="ClientHostSample",
        ),
    ]
