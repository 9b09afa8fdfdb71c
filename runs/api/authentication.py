"""API authentication: `Authorization: Token <token>`, checked against the tokens' digests.

DRF's TokenAuthentication reads the header; the token is looked up by its
digest (runs.services.access.tokens) instead of DRF's plain-text table. A
valid token always signs in. A wrong one counts against the client's address
and the token's first characters (benchlab.throttle): past the limit, wrong
tokens answer 429 instead of 401 until the window ends.
"""

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request

from benchlab import throttle
from runs.models import ApiToken
from runs.models.security import TOKEN_PREFIX_LENGTH
from runs.services.access.tokens import api_token_find


class HashedTokenAuthentication(TokenAuthentication):
    """Token authentication against digests; failed attempts are throttled, never a valid one."""

    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, ApiToken] | None:
        words = get_authorization_header(request).split()
        if not words or words[0].lower() != b"token":
            return None
        try:
            return super().authenticate(request)
        except AuthenticationFailed as failure:
            presented = words[1].decode(errors="replace") if len(words) > 1 else ""
            credential = "token:" + presented[:TOKEN_PREFIX_LENGTH]
            if throttle.record_failure(throttle.client_address(request), credential):
                raise Throttled(
                    wait=settings.AUTH_FAILURE_WINDOW_S,
                    detail="Too many failed token attempts from your address.",
                ) from failure
            raise

    def authenticate_credentials(self, key: str) -> tuple[Any, ApiToken]:
        token = api_token_find(key)
        if token is None:
            raise AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        return token.user, token
