"""agents.contract.redaction: no secret in a kept event or a log line."""

import json
import logging

from agents.contract.redaction import MASK, RedactingFilter, redact_text, redacted_event
from agents.contract.signing import new_secret, sign

SECRET = new_secret()


def registration() -> dict:
    event = {"type": "agent_register", "agent": "a", "data": {"facts": {}, "secret": SECRET}}
    return sign("event", event, SECRET)


def test_a_kept_registration_has_neither_the_secret_nor_the_signature():
    kept = redacted_event(registration())

    assert kept == {"type": "agent_register", "agent": "a", "data": {"facts": {}}}
    assert "secret" in registration()["data"], "the original is left as it was"


def test_named_secrets_url_passwords_and_token_headers_are_masked_in_text():
    text = (
        f"payload {json.dumps(registration())} redis://:hunter2@redis:6379/0 "
        f"postgres://lab:pw@db/lab password=letmein Authorization: Token {'a' * 40}"
    )

    redacted = redact_text(text)

    for secret in (SECRET, "hunter2", ":pw@", "letmein", "a" * 40):
        assert secret not in redacted
    assert f'"secret": "{MASK}"' in redacted
    assert "redis://:[redacted]@redis:6379/0" in redacted


def test_a_log_record_and_its_traceback_are_masked(caplog):
    logger = logging.getLogger("tests.redaction")
    caplog.handler.addFilter(RedactingFilter())
    try:
        raise ValueError(f"cannot store {json.dumps(registration())}")
    except ValueError:
        logger.exception("event %s", {"secret": SECRET})

    (record,) = caplog.records
    assert SECRET not in caplog.text
    assert MASK in record.getMessage() and MASK in (record.exc_text or "")
