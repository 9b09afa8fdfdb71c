"""Host samples get a role (server host or client host); 0022 moves the client host's
samples into them. Two migrations, each one transaction on PostgreSQL: this table's schema
changes before rows are written to it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0020_imported_latency_derived_and_output_hash"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="hostsample",
            name="host_sample_run_point_t",
        ),
        migrations.AddField(
            model_name="hostsample",
            name="role",
            field=models.CharField(
                choices=[("server", "server host"), ("client", "client host")],
                default="server",
                max_length=10,
            ),
        ),
        migrations.AddIndex(
            model_name="hostsample",
            index=models.Index(
                fields=["run", "role", "point", "t"], name="host_sample_run_role_point_t"
            ),
        ),
    ]
