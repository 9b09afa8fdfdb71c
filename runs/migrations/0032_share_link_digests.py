"""Share links known by their token's digest: each existing token is digested (the link
it is in keeps working), then the plain tokens are dropped.

Undone, a digest cannot give its token back: each link gets a new random token and is
revoked, so a link sent before answers 410 instead of opening something else.
"""

import hashlib
import secrets

from django.db import migrations, models
from django.utils import timezone

PREFIX_LENGTH = 6


def digest_share_tokens(apps, schema_editor):
    """Keep each link's token as its SHA-256 digest and first characters."""
    ShareLink = apps.get_model("runs", "ShareLink")
    for link in ShareLink.objects.only("pk", "token").iterator():
        ShareLink.objects.filter(pk=link.pk).update(
            digest=hashlib.sha256(link.token.encode()).hexdigest(),
            prefix=link.token[:PREFIX_LENGTH],
        )


def reissue_revoked_tokens(apps, schema_editor):
    """Going back: a fresh unique token per link, each link revoked (its old token is lost)."""
    ShareLink = apps.get_model("runs", "ShareLink")
    for link in ShareLink.objects.only("pk").iterator():
        ShareLink.objects.filter(pk=link.pk).update(
            token=secrets.token_urlsafe(32), revoked_at=timezone.now()
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
        # Not unique while it goes (and, going back, until each link has a new token).
        migrations.AlterField(
            model_name="sharelink",
            name="token",
            field=models.CharField(default="", max_length=64),
        ),
        migrations.RunPython(digest_share_tokens, reverse_code=reissue_revoked_tokens),
        migrations.AlterField(
            model_name="sharelink",
            name="digest",
            field=models.CharField(
                help_text="SHA-256 of the token, hex", max_length=64, unique=True
            ),
        ),
        migrations.RemoveField(model_name="sharelink", name="token"),
    ]
