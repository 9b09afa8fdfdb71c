"""Who may see what: share links and API tokens (kept as digests, docs/decisions.md, "API tokens").

A share link is a read-only link to one run, experiment or comparison. A share
link's token and an API token are each shown once, when created
(runs.services.access); the lab keeps their SHA-256 digest and first characters,
to tell them apart, and finds a presented token by its digest.
"""

import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from runs.models.catalogue import owner_field
from runs.models.experiments import Comparison, Experiment, Run

TOKEN_PREFIX_LENGTH = 6


def new_share_token() -> str:
    """An unguessable token for a share link (256 random bits)."""
    return secrets.token_urlsafe(32)


class ShareLink(models.Model):
    """A read-only link to one run, experiment or comparison; exactly one is set.

    Its token (in the link, `/s/<token>/`) is known to the lab by its digest only.
    """

    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token, hex")
    prefix = models.CharField(
        max_length=TOKEN_PREFIX_LENGTH, help_text="the token's first characters"
    )
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.CASCADE, related_name="share_links"
    )
    experiment = models.ForeignKey(
        Experiment, null=True, blank=True, on_delete=models.CASCADE, related_name="share_links"
    )
    comparison = models.ForeignKey(
        Comparison, null=True, blank=True, on_delete=models.CASCADE, related_name="share_links"
    )
    created_by = owner_field("share_links")
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(run__isnull=False, experiment__isnull=True, comparison__isnull=True)
                    | Q(run__isnull=True, experiment__isnull=False, comparison__isnull=True)
                    | Q(run__isnull=True, experiment__isnull=True, comparison__isnull=False)
                ),
                name="share_link_exactly_one_target",
            )
        ]

    def __str__(self) -> str:
        return f"share link to {self.target}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def target(self) -> "Run | Experiment | Comparison":
        """The shared object."""
        target = self.run or self.experiment or self.comparison
        if target is None:
            raise ValueError(f"share link {self.pk} has no target")
        return target

    @property
    def target_kind(self) -> str:
        """`run`, `experiment` or `comparison`."""
        if self.run_id:
            return "run"
        return "experiment" if self.experiment_id else "comparison"


class ApiToken(models.Model):
    """A token that signs its user in to the API (`Authorization: Token <token>`)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token, hex")
    prefix = models.CharField(max_length=TOKEN_PREFIX_LENGTH, help_text="its first characters")
    name = models.CharField(max_length=100, blank=True, help_text="what the token is for")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["user", "created_at"]

    def __str__(self) -> str:
        label = f" ({self.name})" if self.name else ""
        return f"{self.prefix}… of {self.user}{label}"
