"""API tokens, kept as digests (docs/decisions.md, "API tokens").

Loaded by `runs.models` (its last lines), so Django registers the model in
the `runs` app. A token is shown once, when it is created
(runs.services.tokens); the lab keeps its SHA-256 digest and its first
characters, to tell tokens apart, and finds a presented token by its digest.
"""

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX_LENGTH = 6


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
