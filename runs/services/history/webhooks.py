"""Webhooks: which addresses the lab POSTs alerts to, and posting there.

A webhook is a request the lab makes on a user's behalf from inside its own
network, so only public addresses are allowed: loopback, link-local (cloud
metadata at 169.254.169.254), private, shared, multicast, reserved and
unspecified addresses are refused, unless a network in
`BENCHLAB_WEBHOOK_ALLOWED_NETWORKS` holds them. A URL is checked when a
series is saved (`webhook_check`: the API and form answer 400 on the
`webhook_url` field) and again at every send (`webhook_post`).

At send time the host name is resolved once and every address it gives
must be allowed; the request then connects to that address, sending the
name in the Host header and, for https, as the TLS server name with the
certificate checked against it. A name that changes what it resolves to
between the check and the connection (DNS rebinding) cannot move the
request. Redirects are not followed: a 3xx is recorded as the answer.
"""

import ipaddress
import json
import logging
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import urllib3
from django.conf import settings

logger = logging.getLogger(__name__)

WEBHOOK_TIMEOUT_S = 10
SCHEMES = {"http": 80, "https": 443}
SETTING = "BENCHLAB_WEBHOOK_ALLOWED_NETWORKS"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class WebhookRefused(ValueError):
    """The URL may not be posted to; the message says why and what to change."""


@dataclass(frozen=True)
class Target:
    """Where one POST goes: the URL's parts and the one address it connects to."""

    scheme: str
    host: str
    port: int
    path: str
    address: Address

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == SCHEMES[self.scheme] else f"{host}:{self.port}"


def webhook_check(url: str) -> None:
    """Raise WebhookRefused unless `url` is http(s) and its host resolves to allowed addresses."""
    webhook_target(url)


def webhook_target(url: str) -> Target:
    """The URL's parts and the first of its host's addresses; WebhookRefused says why not."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise WebhookRefused(f"{url} is not an http:// or https:// address with a host")
    try:
        port = parts.port or SCHEMES[parts.scheme]
    except ValueError as error:
        raise WebhookRefused(f"{url}: {error}") from error
    addresses = resolve(parts.hostname, port)
    refused = [address for address in addresses if not address_allowed(address)]
    if refused:
        raise WebhookRefused(
            f"{parts.hostname} is {', '.join(map(str, refused))}: a loopback, private, "
            "link-local, multicast, reserved or unspecified address; webhooks go to public "
            f"addresses only, unless an administrator lists its network in {SETTING}"
        )
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname, port, path, addresses[0])


def resolve(host: str, port: int) -> list[Address]:
    """Every address `host` resolves to (an IP address resolves to itself), in resolver order."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise WebhookRefused(f"the host name {host} does not resolve: {error}") from error
    addresses: list[Address] = []
    for *_, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def address_allowed(address: Address) -> bool:
    """A public address, or one in a network BENCHLAB_WEBHOOK_ALLOWED_NETWORKS lists."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address in network for network in settings.BENCHLAB_WEBHOOK_ALLOWED_NETWORKS):
        return True
    special = (
        address.is_loopback
        or address.is_link_local
        or address.is_private
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )
    return address.is_global and not special


def webhook_post(url: str, document: dict[str, object]) -> str:
    """POST `document` as JSON to `url`; what happened, in words, for the alert's record."""
    try:
        target = webhook_target(url)
    except WebhookRefused as error:
        logger.warning("webhook %s refused: %s", url, error)
        return f"webhook refused: {error}"
    try:
        status = _post(target, json.dumps(document).encode())
    except (urllib3.exceptions.HTTPError, OSError) as error:
        logger.warning("webhook %s failed: %s", url, error)
        return f"webhook failed: {error}"
    if 300 <= status < 400:
        return f"webhook answered {status} (redirects are not followed)"
    return f"webhook answered {status}"


def _post(target: Target, body: bytes) -> int:
    """One POST to the target's address, named by its host; the answer's status."""
    pool = _pool(target)
    try:
        response = pool.urlopen(
            "POST",
            target.path,
            body=body,
            headers={"Host": target.host_header, "Content-Type": "application/json"},
            redirect=False,
            retries=False,
            assert_same_host=False,
            preload_content=True,
        )
        return response.status
    finally:
        pool.close()


def _pool(target: Target) -> urllib3.HTTPConnectionPool:
    timeout = urllib3.Timeout(total=WEBHOOK_TIMEOUT_S)
    if target.scheme == "http":
        return urllib3.HTTPConnectionPool(str(target.address), target.port, timeout=timeout)
    return urllib3.HTTPSConnectionPool(
        str(target.address),
        target.port,
        timeout=timeout,
        cert_reqs="CERT_REQUIRED",
        server_hostname=target.host,
        assert_hostname=target.host,
    )
