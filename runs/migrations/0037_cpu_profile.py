"""The perf profile is the CPU profile: the model, its related name and constraint, the
experiment's switch, the spec key stored with each run and the event type stored with
each event row take the new names; the rows are kept."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

FORMER, CURRENT = "profile", "cpu_profile"


def rename_spec_key_and_event_type(
    apps: StateApps, schema_editor: BaseDatabaseSchemaEditor, old: str = FORMER, new: str = CURRENT
) -> None:
    Run = apps.get_model("runs", "Run")
    RunEvent = apps.get_model("runs", "RunEvent")
    for run in Run.objects.filter(spec__sweep__has_key=old).only("pk", "spec").iterator():
        sweep = run.spec["sweep"]
        sweep[new] = sweep.pop(old)
        run.save(update_fields=["spec"])
    RunEvent.objects.filter(type=old).update(type=new)


def restore_spec_key_and_event_type(
    apps: StateApps, schema_editor: BaseDatabaseSchemaEditor
) -> None:
    rename_spec_key_and_event_type(apps, schema_editor, old=CURRENT, new=FORMER)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0036_host_canary"),
    ]

    operations = [
        migrations.RenameField(
            model_name="experiment",
            old_name="profile",
            new_name="cpu_profile",
        ),
        migrations.RemoveConstraint(
            model_name="profile",
            name="profile_unique_point",
        ),
        migrations.RenameModel("Profile", "CpuProfile"),
        migrations.AlterField(
            model_name="cpuprofile",
            name="run",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="cpu_profiles",
                to="runs.run",
            ),
        ),
        migrations.AddConstraint(
            model_name="cpuprofile",
            constraint=models.UniqueConstraint(
                fields=("run", "index"), name="cpu_profile_unique_point"
            ),
        ),
        migrations.RunPython(rename_spec_key_and_event_type, restore_spec_key_and_event_type),
    ]
