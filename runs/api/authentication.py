"""API authentication: `Authorization: Token <token>`, checked against the tokens' digests.

DRF's TokenAuthentication reads the header; the token is looked up by its
digest (runs.services.access.tokens) instead of DRF's plain-text table. Failed
attempts count against the client's address (benchlab.throttle): past the
limit, further token attempts from it answer 429 until the window ends.
"""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request

from benchlab import throttle
from runs.models import ApiToken
from runs.services.access.tokens import api_token_find


class HashedTokenAuthentication(TokenAuthentication):
    """Token authentication against digests, with failed attempts throttled per address."""

    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, ApiToken] | None:
        if not _offers_token(request):
            return None
        address = throttle.client_address(request)
        wait = throttle.locked_for(address)
        if wait:
            raise Throttled(wait=wait, detail="Too many failed token attempts from your address.")
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            throttle.record_failure(address)
            raise

    def authenticate_credentials(self, key: str) -> tuple[Any, ApiToken]:
        token = api_token_find(key)
        if token is None:
            raise AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        return token.user, token


def _offers_token(request: Request) -> bool:
    words = get_authorization_header(request).split()
    return bool(words) and words[0].lower() == b"token"
