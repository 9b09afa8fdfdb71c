from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0043_bisection_step_cancelled"),
    ]

    operations = [
        migrations.AddField(
            model_name="hostcanary",
            name="memory_gbps",
            field=models.FloatField(blank=True, null=True),
        ),
    ]
