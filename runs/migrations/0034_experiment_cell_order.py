from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0033_host_capabilities"),
    ]

    operations = [
        migrations.AddField(
            model_name="experiment",
            name="cell_order",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
