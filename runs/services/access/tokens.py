"""API tokens: created and shown once, then known to the lab by their digest only.

A token is 40 random hex digits (160 bits, the length DRF's tokens had, so
tokens made before digests keep working once digested by the migration
0015). Its SHA-256 is what the database holds: with that much randomness a
plain digest cannot be reversed, and it can be looked up by an index.
"""

import hashlib
import logging
import secrets

from django.contrib.auth.models import User

from runs.models import ApiToken
from runs.models.security import TOKEN_PREFIX_LENGTH

logger = logging.getLogger(__name__)

TOKEN_BYTES = 20


def token_digest(token: str) -> str:
    """The SHA-256 (hex) the database keeps of `token`."""
    return hashlib.sha256(token.encode()).hexdigest()


def api_token_create(user: User, name: str = "") -> tuple[ApiToken, str]:
    """A new token for `user`: its row and the token itself, which nothing keeps."""
    token = secrets.token_hex(TOKEN_BYTES)
    row = ApiToken.objects.create(
        user=user, digest=token_digest(token), prefix=token[:TOKEN_PREFIX_LENGTH], name=name
    )
    logger.info("API token %s… created for %s", row.prefix, user)
    return row, token


def api_token_find(token: str) -> ApiToken | None:
    """The token row whose digest `token` has, with its user; None when there is none."""
    return ApiToken.objects.select_related("user").filter(digest=token_digest(token)).first()
