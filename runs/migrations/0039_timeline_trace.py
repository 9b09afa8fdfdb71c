"""A run's reduced timelines are its traces: TimelineSeries is TimelineTrace, rows kept
("series" is the scheduled series only)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0038_experiment_duet"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="timelineseries",
            name="timeline_series_unique_name",
        ),
        migrations.RenameModel("TimelineSeries", "TimelineTrace"),
        migrations.AddConstraint(
            model_name="timelinetrace",
            constraint=models.UniqueConstraint(
                fields=("run", "name"), name="timeline_trace_unique_name"
            ),
        ),
    ]
