"""Failed sign-ins and token attempts, counted per client address.

Each failure (a wrong password on the sign-in or admin page, a wrong API
token) counts against the address it came from for AUTH_FAILURE_WINDOW_S;
once AUTH_FAILURE_LIMIT failures are counted, that address is refused (429)
until the window ends. Counts live in Django's cache (the local-memory cache
of the web process; the lab runs one). The address is the one uvicorn reports,
which takes X-Forwarded-For from a proxy on the same host only.
"""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.core.cache import cache
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse

KEY_PREFIX = "benchlab:auth-failures:"


def client_address(request: HttpRequest) -> str:
    return str(request.META.get("REMOTE_ADDR") or "unknown")


def record_failure(address: str) -> None:
    """Count one failed attempt from `address` (the window starts with the first)."""
    key = KEY_PREFIX + address
    cache.add(key, 0, timeout=settings.AUTH_FAILURE_WINDOW_S)
    try:
        cache.incr(key)
    except ValueError:  # expired between add and incr: this failure starts a new window
        cache.set(key, 1, timeout=settings.AUTH_FAILURE_WINDOW_S)


def locked_for(address: str) -> int:
    """Seconds `address` still has to wait (the window's length), or 0 when it may try."""
    failures = cache.get(KEY_PREFIX + address, 0)
    return settings.AUTH_FAILURE_WINDOW_S if failures >= settings.AUTH_FAILURE_LIMIT else 0


@receiver(user_login_failed)
def _count_failed_sign_in(sender: object, request: HttpRequest | None = None, **_: Any) -> None:
    if request is not None:
        record_failure(client_address(request))


class SignInThrottle:
    """Refuse (429) a sign-in attempt from an address with too many failures.

    The sign-in form and the admin's take passwords; `user_login_failed`
    (above) counts their failures.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.paths = {settings.LOGIN_URL, "/admin/login/"}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path in self.paths:
            wait = locked_for(client_address(request))
            if wait:
                response = HttpResponse(
                    f"Too many failed sign-ins from your address: try again in {wait // 60 or 1}"
                    " minutes.",
                    status=429,
                    content_type="text/plain",
                )
                response["Retry-After"] = str(wait)
                return response
        return self.get_response(request)
