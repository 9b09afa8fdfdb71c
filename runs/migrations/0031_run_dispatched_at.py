import django.utils.timezone
from django.db import migrations, models


def dispatched_when_queued(apps, schema_editor):
    """Existing runs: their last dispatch is their queued_at (a re-send moved it there)."""
    Run = apps.get_model("runs", "Run")
    Run.objects.update(dispatched_at=models.F("queued_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0030_result_skipped_and_late"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="dispatched_at",
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.RunPython(dispatched_when_queued, migrations.RunPython.noop),
    ]
