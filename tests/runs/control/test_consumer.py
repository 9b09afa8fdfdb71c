"""The control worker's consumer against real Redis and the real lab database."""

import json
import logging
import threading

import pytest
from django.db import OperationalError, connection

from runs.control.consumer import EventConsumer
from runs.models import HostSample, Run, RunEvent
from tests.runs import events
from tests.runs.factories import RunFactory
from tests.waiting import wait_for


def publish(lab_redis, stream: str, event) -> str:
    """Append an event the way agents do: XADD <stream> * event <json>."""
    text = event if isinstance(event, str) else json.dumps(event)
    return lab_redis.xadd(stream, {"event": text})


def pending_count(lab_redis, consumer: EventConsumer) -> int:
    return lab_redis.xpending(consumer.stream, consumer.group)["pending"]


@pytest.fixture
def consumer(lab_redis, events_stream):
    consumer = EventConsumer(client=lab_redis, consumer="test-consumer", block_ms=100)
    consumer.ensure_group()
    return consumer


@pytest.mark.django_db
def test_events_are_stored_then_acknowledged_and_deleted(consumer, lab_redis, events_stream):
    run = RunFactory()
    publish(lab_redis, events_stream, events.run_event(run, 1, "status", {"state": "initdb"}))
    publish(lab_redis, events_stream, events.run_event(run, 2, "progress", {"point": 0, "t": 1.0}))

    assert consumer.run_round() == 2

    assert RunEvent.objects.filter(run=run).count() == 2
    assert lab_redis.xlen(events_stream) == 0
    assert pending_count(lab_redis, consumer) == 0


@pytest.mark.django_db
def test_a_redelivered_event_is_stored_once(consumer, lab_redis, events_stream):
    run = RunFactory()
    event = events.run_event(run, 1, "progress", {"point": 0, "t": 1.0, "tps": 5.0})
    publish(lab_redis, events_stream, event)
    publish(lab_redis, events_stream, event)

    consumer.run_round()

    assert RunEvent.objects.filter(run=run).count() == 1
    assert run.progress.count() == 1
    assert lab_redis.xlen(events_stream) == 0


@pytest.mark.django_db
def test_a_bad_event_is_logged_and_kept_with_its_reason_then_acknowledged(
    consumer, lab_redis, events_stream, caplog
):
    publish(lab_redis, events_stream, "{not json")
    publish(lab_redis, events_stream, {"version": 1, "type": "progress", "seq": 1, "data": {}})

    with caplog.at_level(logging.ERROR, logger="runs.control.consumer"):
        assert consumer.run_round() == 2

    reasons = [r.getMessage() for r in caplog.records if "not a valid event" in r.getMessage()]
    assert len(reasons) == 2
    assert "needs a run_id" in reasons[1]
    assert lab_redis.xlen(events_stream) == 0
    dead = lab_redis.xrange(consumer.dead_letter_stream)
    lab_redis.delete(consumer.dead_letter_stream)
    assert [fields["event"] for _, fields in dead][0] == "{not json"
    assert all("invalid event" in fields["error"] for _, fields in dead)


@pytest.mark.django_db
def test_an_event_with_a_wrong_token_is_dropped_and_acknowledged(
    consumer, lab_redis, events_stream
):
    run = RunFactory()
    forged = events.run_event(run, 1, "status", {"state": "running"}, token="forged")
    publish(lab_redis, events_stream, forged)

    consumer.run_round()

    assert not RunEvent.objects.exists()
    assert lab_redis.xlen(events_stream) == 0


@pytest.mark.django_db
def test_entries_a_dead_consumer_left_pending_are_reclaimed(lab_redis, events_stream):
    run = RunFactory()
    publish(lab_redis, events_stream, events.run_event(run, 1, "status", {"state": "initdb"}))
    dead = EventConsumer(client=lab_redis, consumer="dead-consumer")
    dead.ensure_group()
    lab_redis.xreadgroup(dead.group, dead.consumer, {events_stream: ">"})
    survivor = EventConsumer(client=lab_redis, consumer="survivor", claim_idle_ms=0, block_ms=100)

    assert survivor.run_round() == 1

    assert RunEvent.objects.filter(run=run).count() == 1
    assert pending_count(lab_redis, survivor) == 0


@pytest.mark.django_db(transaction=True)
def test_while_the_database_is_down_the_entry_stays_pending_and_is_retried(
    consumer, lab_redis, events_stream
):
    run = RunFactory()
    publish(lab_redis, events_stream, events.run_event(run, 1, "status", {"state": "initdb"}))
    real_port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = "1"
    try:
        with pytest.raises(OperationalError):
            consumer.run_round()
        assert pending_count(lab_redis, consumer) == 1
    finally:
        connection.close()
        connection.settings_dict["PORT"] = real_port

    assert consumer.run_round() == 1
    assert RunEvent.objects.filter(run=run).count() == 1
    assert pending_count(lab_redis, consumer) == 0


@pytest.mark.django_db(transaction=True)
def test_the_loop_stores_events_until_it_is_stopped(consumer, lab_redis, events_stream):
    run = RunFactory()
    stop = threading.Event()
    loop = threading.Thread(target=consumer.run_forever, args=(stop,))
    loop.start()
    try:
        publish(lab_redis, events_stream, events.run_event(run, 1, "status", {"state": "initdb"}))
        wait_for(RunEvent.objects.filter(run=run).exists, what="the event to be stored")
    finally:
        stop.set()
        loop.join(timeout=10)

    assert not loop.is_alive()
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


@pytest.mark.django_db
def test_a_batch_of_live_events_of_many_runs_is_stored_once_in_stream_order(
    consumer, lab_redis, events_stream
):
    running = [RunFactory(status=Run.Status.RUNNING) for _ in range(3)]
    queued = RunFactory()
    for seq, t in enumerate((1.0, 2.0, 2.0), start=1):  # t=2.0 twice: one row
        for run in running:
            data = {"point": 0, "t": t, "tps": 100.0 + seq}
            publish(lab_redis, events_stream, events.run_event(run, seq, "progress", data))
    sample = {
        "point": 0,
        "host": {"t": 1.0, "cpu_user": 10.0},
        "server": {"t": 1.0},
        "client_host": {"t": 1.0, "cpu_user": 90.0},
    }
    publish(lab_redis, events_stream, events.run_event(running[0], 4, "sample", sample))
    publish(lab_redis, events_stream, events.run_event(running[0], 4, "sample", sample))
    publish(lab_redis, events_stream, events.run_event(queued, 1, "progress", {"point": 0, "t": 1}))
    publish(lab_redis, events_stream, events.run_event(running[1], 9, "status", {"state": "x"}))
    forged = events.run_event(running[2], 5, "progress", {"point": 0, "t": 3.0})
    publish(lab_redis, events_stream, {**forged, "agent": "someone-else"})
    host = running[2].host
    beat = {"running": str(running[2].pk)}
    publish(
        lab_redis, events_stream, events.agent_event(host.name, 1, "heartbeat", beat, host.secret)
    )

    assert consumer.run_round() == 15

    for run in running:
        assert list(run.progress.values_list("t", "tps")) == [(1.0, 101.0), (2.0, 102.0)]
        stored = RunEvent.objects.filter(run=run, type="progress")
        assert stored.count() == 3 and not any(stored.values_list("payload", flat=True))
    hosts = running[0].host_samples
    assert hosts.filter(role=HostSample.Role.SERVER).count() == 1
    assert running[0].server_samples.count() == 1
    client = hosts.filter(role=HostSample.Role.CLIENT)
    assert list(client.values_list("data__cpu_user", flat=True)) == [90.0]
    assert RunEvent.objects.filter(run=running[0], type="sample").count() == 1
    queued.refresh_from_db()
    assert queued.status == Run.Status.RUNNING and queued.progress.count() == 1
    assert RunEvent.objects.get(run=running[1], seq=9).payload == {"state": "x"}
    seen_before = host.last_seen
    host.refresh_from_db()
    assert host.current_run == running[2] and host.last_seen > seen_before
    dead = lab_redis.xrange(consumer.dead_letter_stream)
    lab_redis.delete(consumer.dead_letter_stream)
    assert len(dead) == 1 and "not on agent 'someone-else'" in dead[0][1]["error"]
    assert lab_redis.xlen(events_stream) == 0 and pending_count(lab_redis, consumer) == 0
