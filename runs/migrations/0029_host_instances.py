from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0028_occurrence_slot"),
    ]

    operations = [
        migrations.AddField(
            model_name="host",
            name="instance",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="host",
            name="previous_instance",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="host",
            name="twin_seen_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
