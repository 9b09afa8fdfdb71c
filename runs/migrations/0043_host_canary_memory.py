from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0042_alert_confirmation"),
    ]

    operations = [
        migrations.AddField(
            model_name="hostcanary",
            name="memory_gbps",
            field=models.FloatField(blank=True, null=True),
        ),
    ]
