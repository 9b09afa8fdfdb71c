"""Dead letters keep no secret and cannot grow without bound (real Redis, real lab database).

A pending agent's registration carries its secret; refused, it goes to the
dead-letter stream, which anyone who can read Redis reads.
"""

import json
import logging

import pytest

from agents.contract.signing import new_secret
from runs.control.consumer import EventConsumer
from runs.models import Host
from tests.runs import events

pytestmark = pytest.mark.django_db


@pytest.fixture
def consumer(lab_redis, events_stream):
    consumer = EventConsumer(client=lab_redis, consumer="test-consumer", block_ms=100)
    consumer.ensure_group()
    yield consumer
    lab_redis.delete(consumer.dead_letter_stream)


def registration(name: str, secret: str, seq: int = 10**13) -> dict:
    data = {"facts": {}, "installs": [], "storage": {}, "catalogues": {}, "secret": secret}
    return events.agent_event(name, seq, "agent_register", data, secret=secret)


def every_stream_text(lab_redis, *streams: str) -> str:
    return "\n".join(json.dumps(lab_redis.xrange(stream)) for stream in streams)


def test_a_pending_registration_is_dead_lettered_without_its_secret_or_signature(
    consumer, lab_redis, events_stream, caplog
):
    secret = new_secret()
    event = registration("pending-agent", secret)
    lab_redis.xadd(events_stream, {"event": json.dumps(event)})

    with caplog.at_level(logging.DEBUG):
        consumer.run_round()

    assert Host.objects.get(name="pending-agent").enrollment == Host.Enrollment.PENDING
    ((_id, fields),) = lab_redis.xrange(consumer.dead_letter_stream)
    kept = json.loads(fields["event"])
    assert "secret" not in kept["data"] and "sig" not in kept
    assert "pending approval" in fields["error"]
    for text in (every_stream_text(lab_redis, events_stream, consumer.dead_letter_stream),
                 caplog.text):  # fmt: skip
        assert secret not in text and event["sig"] not in text


def test_an_invalid_event_with_a_secret_is_kept_without_it(consumer, lab_redis, events_stream):
    secret = new_secret()
    torn = '{"type": "agent_register", "data": {"secret": "' + secret + '"'
    broken = registration("broken-agent", secret) | {"seq": "not a number"}
    for text in (torn, json.dumps(broken)):
        lab_redis.xadd(events_stream, {"event": text})

    consumer.run_round()

    dead = lab_redis.xrange(consumer.dead_letter_stream)
    assert len(dead) == 2
    assert secret not in json.dumps(dead)


def test_many_refused_events_leave_a_bounded_dead_letter_stream_and_few_log_lines(
    consumer, lab_redis, events_stream, caplog
):
    consumer.dead_letter_maxlen = 50
    secret = new_secret()
    for seq in range(400):
        lab_redis.xadd(events_stream, {"event": json.dumps(registration("noisy", secret, seq))})

    with caplog.at_level(logging.WARNING, logger="runs.control.consumer"):
        while consumer.run_round():
            pass

    # XADD MAXLEN ~ trims whole nodes of the stream (100 entries by default).
    assert lab_redis.xlen(consumer.dead_letter_stream) <= 50 + 100
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1
    assert Host.objects.filter(name="noisy").count() == 1


def test_dead_letters_older_than_their_max_age_expire(consumer, lab_redis):
    seconds, _micro = lab_redis.time()
    now_ms = seconds * 1000
    dead = consumer.dead_letter_stream
    lab_redis.xadd(dead, {"event": "{}", "error": "old"}, id=f"{now_ms - 3_600_000}-0")
    lab_redis.xadd(dead, {"event": "{}", "error": "recent"}, id=f"{now_ms - 60_000}-0")
    consumer.dead_letter_max_age_s = 600

    assert consumer.expire_dead_letters() == 1

    assert [fields["error"] for _id, fields in lab_redis.xrange(dead)] == ["recent"]
