"""Keeping secrets out of what is kept or shown: dead letters, log lines, error pages.

Only one secret travels on the wire: an agent's, in the `secret` field of its
registrations until the lab has it (agents.contract.signing). `redacted_event`
is what the lab may keep of an event it refuses: no secret and no signature
(a kept `sig` with its document is an oracle for nothing, but nothing signing
related belongs in a dead letter). `redact_text` masks what looks like a
secret in free text (a payload in an exception message, a URL with a
password), and `RedactingFilter` applies it to every log record a handler
emits, traceback included, on both sides.
"""

import logging
import re
from collections.abc import Mapping
from typing import Any

from agents.contract.signing import SIGNATURE_FIELD

SECRET_FIELD = "secret"
MASK = "[redacted]"

# `"secret": "…"`, `'sig': '…'`, `password=…`: the value of a field that names a secret.
_NAMED_SECRET = re.compile(
    r"""(?P<name>["']?(?:secret|sig|password|passwd|api[_-]?key|token_key)["']?\s*[:=]\s*)"""
    r"""(?P<quote>["']?)(?P<value>[^"'\s,;&}]+)""",
    re.IGNORECASE,
)
# The password in a URL: scheme://user:password@host.
_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]*:)(?P<value>[^@\s/]+)@", re.I)
# An `Authorization: Token …` header value.
_AUTH_HEADER = re.compile(r"(?P<head>\b(?:Token|Bearer)\s+)(?P<value>[A-Za-z0-9._~+/=-]{16,})")


def redact_text(text: str) -> str:
    """`text` with the values of named secrets, URL passwords and tokens masked."""
    text = _NAMED_SECRET.sub(lambda m: f"{m['name']}{m['quote']}{MASK}", text)
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}@", text)
    return _AUTH_HEADER.sub(lambda m: f"{m['head']}{MASK}", text)


def redacted_event(document: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an event without its signature and without the secret in its data."""
    kept = {key: value for key, value in document.items() if key != SIGNATURE_FIELD}
    data = kept.get("data")
    if isinstance(data, Mapping) and SECRET_FIELD in data:
        kept["data"] = {key: value for key, value in data.items() if key != SECRET_FIELD}
    return kept


class RedactingFilter(logging.Filter):
    """A handler filter that masks secrets in the message and the traceback of each record.

    It formats the record's message and traceback itself (the formatter then
    reuses `exc_text`), so a secret in a logged payload or in an exception's
    message never reaches the handler's output.
    """

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True


def redact_handlers(logger: logging.Logger) -> None:
    """Put a RedactingFilter on each of `logger`'s handlers (once)."""
    for handler in logger.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


def redact_celery_logs(logger: logging.Logger, **_signal: object) -> None:
    """For Celery's `after_setup_logger` and `after_setup_task_logger` signals: Celery
    replaces the handlers of the loggers it sets up, so their filters go on then."""
    redact_handlers(logger)
