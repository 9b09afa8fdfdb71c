from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0034_experiment_cell_order"),
    ]

    operations = [
        migrations.AddField(
            model_name="result",
            name="cpu_steal_percent",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="result",
            name="foreign_cpu_percent",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="result",
            name="noise",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
