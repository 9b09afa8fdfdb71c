"""Jobs and events authenticated with each agent's own secret (docs/decisions.md).

An agent creates a random 32-byte secret once (its identity, kept in its state
directory) and sends it with its registrations until an administrator has
approved the host, comparing the fingerprint the agent logs with the one the
hosts page shows. From then on every event the agent sends and every job spec
the lab sends it carry `sig`: HMAC-SHA256 with that secret over a label and the
document's canonical JSON (keys sorted, no spaces, ASCII), `sig` itself left
out. The label differs per kind of document, so a signed event can never pass
for a job or the other way round.
"""

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from typing import Any, Literal

SECRET_BYTES = 32
SIGNATURE_FIELD = "sig"

Kind = Literal["job", "event"]
LABELS: dict[str, bytes] = {"job": b"benchlab-job-v1\n", "event": b"benchlab-event-v1\n"}
FINGERPRINT_LABEL = b"benchlab-agent-fingerprint-v1\n"


def new_secret() -> str:
    """A fresh agent secret, as 64 hex digits."""
    return secrets.token_hex(SECRET_BYTES)


def is_secret(value: object) -> bool:
    """Whether `value` has the shape of an agent secret (64 hex digits)."""
    if not isinstance(value, str) or len(value) != 2 * SECRET_BYTES:
        return False
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True


def canonical_json(document: Mapping[str, object]) -> bytes:
    """The bytes both sides sign: keys sorted, no whitespace, ASCII only.

    A document parsed from the JSON the other side sent and dumped again gives
    the same bytes (Python's floats round-trip exactly).
    """
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def signature(kind: Kind, document: Mapping[str, object], secret: str) -> str:
    """HMAC-SHA256 (hex) of `document` without its `sig` field."""
    unsigned = {key: value for key, value in document.items() if key != SIGNATURE_FIELD}
    message = LABELS[kind] + canonical_json(unsigned)
    return hmac.new(bytes.fromhex(secret), message, hashlib.sha256).hexdigest()


def sign(kind: Kind, document: Mapping[str, object], secret: str) -> dict[str, Any]:
    """A copy of `document` with its `sig`."""
    return {**document, SIGNATURE_FIELD: signature(kind, document, secret)}


def verify(kind: Kind, document: Mapping[str, object], secret: str) -> bool:
    """Whether `document` carries a valid `sig` made with `secret` (constant-time compare)."""
    given = document.get(SIGNATURE_FIELD)
    if not isinstance(given, str) or not is_secret(secret):
        return False
    return hmac.compare_digest(given, signature(kind, document, secret))


def unsigned(document: Mapping[str, object]) -> dict[str, Any]:
    """A copy of `document` without its `sig` field."""
    return {key: value for key, value in document.items() if key != SIGNATURE_FIELD}


def fingerprint(secret: str) -> str:
    """What an administrator compares before approving: 8 groups of 4 hex digits.

    A one-way digest of the secret: showing it reveals nothing usable.
    """
    digest = hashlib.sha256(FINGERPRINT_LABEL + bytes.fromhex(secret)).hexdigest()[:32]
    return " ".join(digest[i : i + 4] for i in range(0, len(digest), 4))
