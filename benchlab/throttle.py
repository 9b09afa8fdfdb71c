"""Failed sign-ins and token attempts, counted per credential and per client address.

A failure (a wrong password on the sign-in or admin page, a wrong API token)
counts, for AUTH_FAILURE_WINDOW_S from the window's first failure, against
the address it came from and against the pair (address, credential), the
credential being the user name tried or the token's first characters.

- A valid credential presented correctly works: a token is always checked
  (160 random bits: guessing one is hopeless, and a lookup is cheap); a wrong
  one past AUTH_FAILURE_LIMIT (of its pair or its address) answers 429 with
  Retry-After instead of 401.
- Passwords can be guessed, so their checks are bounded: a pair past
  AUTH_FAILURE_LIMIT (one address trying one user name) and an address past
  AUTH_ADDRESS_FAILURE_LIMIT (one address trying many names) are refused
  (429) before any check until the window ends. Failures with other user
  names below that bound, or from other addresses, never refuse a correct
  password.

The address is REMOTE_ADDR; X-Forwarded-For counts only when REMOTE_ADDR is
one of BENCHLAB_TRUSTED_PROXIES (none by default), and then the client is the
nearest address in it that is not a trusted proxy. Counts live in Django's
cache (the local-memory cache of the web process; the lab runs one).
"""

import hashlib
import ipaddress
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.core.cache import cache
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse

KEY_PREFIX = "benchlab:auth-failures:"
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def client_address(request: HttpRequest) -> str:
    """The client's address: the peer's, or what trusted proxies say they forwarded."""
    peer = str(request.META.get("REMOTE_ADDR") or "unknown")
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR") or ""
    proxies: list[Network] = settings.BENCHLAB_TRUSTED_PROXIES
    if not forwarded or not _is_trusted(peer, proxies):
        return peer
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _is_trusted(hop, proxies):
            return hop
    return hops[0] if hops else peer


def _is_trusted(address: str, proxies: Iterable[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in proxies)


def _key(*parts: str) -> str:
    """A cache key for these parts (hashed: an address or a user name may be anything)."""
    return KEY_PREFIX + hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _pair_key(address: str, credential: str) -> str:
    return _key("pair", address, credential)


def _address_key(address: str) -> str:
    return _key("address", address)


def _count(key: str) -> int:
    """Add one failure to `key`'s window (which starts with its first) and return the count."""
    cache.add(key, 0, timeout=settings.AUTH_FAILURE_WINDOW_S)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr: this failure starts a new window
        cache.set(key, 1, timeout=settings.AUTH_FAILURE_WINDOW_S)
        return 1


def record_failure(address: str, credential: str) -> bool:
    """Count a failed attempt of `credential` from `address`; True once it is past the limit
    (of the pair or of the address): the failure is then answered 429."""
    pair = _count(_pair_key(address, credential))
    from_address = _count(_address_key(address))
    return max(pair, from_address) > settings.AUTH_FAILURE_LIMIT


def password_checks_refused(address: str, username: str) -> bool:
    """Whether a password for `username` from `address` is refused unchecked this window."""
    pair = cache.get(_pair_key(address, username), 0)
    from_address = cache.get(_address_key(address), 0)
    return (
        pair >= settings.AUTH_FAILURE_LIMIT or from_address >= settings.AUTH_ADDRESS_FAILURE_LIMIT
    )


@receiver(user_login_failed)
def _count_failed_sign_in(
    sender: object, credentials: dict[str, Any], request: HttpRequest | None = None, **_: Any
) -> None:
    if request is not None:
        username = str(credentials.get("username") or "")
        record_failure(client_address(request), "user:" + username)


class SignInThrottle:
    """Refuse (429) a sign-in attempt whose password the bounds above leave unchecked.

    The sign-in form and the admin's take passwords; `user_login_failed`
    (above) counts their failures.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.paths = {settings.LOGIN_URL, "/admin/login/"}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path in self.paths:
            username = "user:" + request.POST.get("username", "")
            if password_checks_refused(client_address(request), username):
                return too_many_failures("sign-ins")
        return self.get_response(request)


def too_many_failures(what: str) -> HttpResponse:
    """The 429 answer of a refused sign-in, saying how long to wait."""
    wait = settings.AUTH_FAILURE_WINDOW_S
    response = HttpResponse(
        f"Too many failed {what} from your address: try again in {wait // 60 or 1} minutes.",
        status=429,
        content_type="text/plain",
    )
    response["Retry-After"] = str(wait)
    return response
