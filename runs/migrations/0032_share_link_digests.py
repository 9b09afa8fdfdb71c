"""Share links known by their token's digest: each existing token is digested (the link
it is in keeps working), then the plain tokens are dropped."""

import hashlib

from django.db import migrations, models

PREFIX_LENGTH = 6


def digest_share_tokens(apps, schema_editor):
    """Keep each link's token as its SHA-256 digest and first characters."""
    ShareLink = apps.get_model("runs", "ShareLink")
    for link in ShareLink.objects.only("pk", "token").iterator():
        ShareLink.objects.filter(pk=link.pk).update(
            digest=hashlib.sha256(link.token.encode()).hexdigest(),
            prefix=link.token[:PREFIX_LENGTH],
        )


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0031_run_dispatched_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="sharelink",
            name="digest",
            field=models.CharField(default="", max_length=64),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="sharelink",
            name="prefix",
            field=models.CharField(
                default="", help_text="the token's first characters", max_length=6
            ),
            preserve_default=False,
        ),
        # Irreversible: a digest does not give its token back.
        migrations.RunPython(digest_share_tokens),
        migrations.AlterField(
            model_name="sharelink",
            name="digest",
            field=models.CharField(
                help_text="SHA-256 of the token, hex", max_length=64, unique=True
            ),
        ),
        migrations.RemoveField(model_name="sharelink", name="token"),
    ]
