import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0035_point_noise"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="host_noise",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.CreateModel(
            name="HostCanary",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("at", models.DateTimeField()),
                ("cpu_loop_ns", models.FloatField()),
                ("fsync_ms", models.FloatField()),
                ("fsync_max_ms", models.FloatField()),
                ("document", models.JSONField(blank=True, default=dict)),
                ("outside_usual", models.BooleanField(default=False)),
                ("detail", models.TextField(blank=True)),
                (
                    "host",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="canaries",
                        to="runs.host",
                    ),
                ),
                (
                    "run",
                    models.OneToOneField(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="canary",
                        to="runs.run",
                    ),
                ),
            ],
            options={
                "ordering": ["host", "at"],
                "indexes": [models.Index(fields=["host", "at"], name="canary_host_at")],
            },
        ),
    ]
