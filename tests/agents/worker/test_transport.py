"""The agent's transport against real Redis servers: stream, spool, claim, cancel, heartbeats."""

import json
import os
import socket
import threading
import time

import pytest

from agents.contract.reports.events import validate_event
from agents.events import EventEmitter
from agents.transport import (
    AgentEventEmitter,
    CancelWatcher,
    Heartbeat,
    RedisStreamSink,
    claim_run,
    redis_client,
)
from tests.agents.worker.conftest import SHARED_REDIS_URL
from tests.waiting import wait_for

CLOSED_PORT_URL = "redis://127.0.0.1:1/0"


def stream_events(client, stream: str) -> list[dict]:
    return [json.loads(fields["event"]) for _, fields in client.xrange(stream)]


def seqs(events: list[dict]) -> list[int]:
    return [event["seq"] for event in events]


def emit_progress(emitter: EventEmitter, count: int) -> None:
    for second in range(count):
        emitter.emit("progress", {"point": 0, "t": float(second), "tps": 100.0})


@pytest.fixture
def open_sinks():
    """Sinks made by a test; closed afterwards so no flusher thread outlives it."""
    sinks: list[RedisStreamSink] = []
    yield sinks
    for sink in sinks:
        sink.close()


def test_events_arrive_in_the_stream_in_order(shared_redis, stream, tmp_path, open_sinks):
    sink = RedisStreamSink(SHARED_REDIS_URL, tmp_path, stream=stream)
    open_sinks.append(sink)
    emitter = EventEmitter([sink], run_id="r-1", token="tok", agent="a1")

    emit_progress(emitter, 5)

    events = stream_events(shared_redis, stream)
    assert seqs(events) == [1, 2, 3, 4, 5]
    assert all(validate_event(event)["token"] == "tok" for event in events)
    assert not sink.spool_path.exists()


def test_live_events_held_go_with_the_next_other_event_in_order(
    shared_redis, stream, tmp_path, open_sinks
):
    sink = RedisStreamSink(SHARED_REDIS_URL, tmp_path, stream=stream, hold_s=3600)
    open_sinks.append(sink)
    emitter = EventEmitter([sink], run_id="r-1")
    emit_progress(emitter, 2)
    emitter.emit("sample", {"point": 0, "clients": 1, "repeat": 0, "host": {"t": 1.0}})
    assert stream_events(shared_redis, stream) == []

    emitter.emit("step", {"name": "point", "percent": None, "message": "point 1 done"})

    events = stream_events(shared_redis, stream)
    assert [event["type"] for event in events] == ["progress", "progress", "sample", "step"]
    assert seqs(events) == [1, 2, 3, 4]


def test_live_events_are_held_no_longer_than_the_hold(shared_redis, stream, tmp_path, open_sinks):
    sink = RedisStreamSink(
        SHARED_REDIS_URL, tmp_path, stream=stream, hold_s=0.3, flush_interval=0.1
    )
    open_sinks.append(sink)
    emitter = EventEmitter([sink], run_id="r-1")
    emit_progress(emitter, 2)
    time.sleep(0.3)
    emit_progress(emitter, 1)  # the first held has waited its hold: all three go
    assert seqs(stream_events(shared_redis, stream)) == [1, 2, 3]

    emit_progress(emitter, 1)
    sink.start()  # with no event after it, the flusher sends it
    wait_for(lambda: seqs(stream_events(shared_redis, stream)) == [1, 2, 3, 4], timeout=5)


def test_held_live_events_are_spooled_in_order_while_redis_is_down(
    tmp_path, spare_redis, open_sinks, monkeypatch
):
    sink = RedisStreamSink(
        spare_redis.url, tmp_path, stream="events", retry_interval=0, hold_s=3600
    )
    open_sinks.append(sink)
    emitter = EventEmitter([sink], run_id="r-1")
    emit_progress(emitter, 2)
    spare_redis.stop()
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    emitter.emit("log", {"level": "info", "message": "Redis went away"})
    assert sink.spool_path.read_text().count("\n") == 3
    assert len(synced) == 2, "the three events in one fsync, then the new spool's directory"
    spare_redis.start()
    emitter.emit("log", {"level": "info", "message": "Redis is back"})

    assert seqs(stream_events(spare_redis.client(), "events")) == [1, 2, 3, 4]


def test_unreachable_redis_spools_events_without_holding_up_the_job(tmp_path, open_sinks):
    sink = RedisStreamSink(CLOSED_PORT_URL, tmp_path, stream="test:unreachable")
    open_sinks.append(sink)
    emitter = EventEmitter([sink], run_id="r-1")

    slowest = 0.0
    for second in range(20):
        started = time.monotonic()
        emitter.emit("progress", {"point": 0, "t": float(second)})
        slowest = max(slowest, time.monotonic() - started)

    assert slowest < 1.0
    spooled = [json.loads(line) for line in sink.spool_path.read_text().splitlines()]
    assert seqs(spooled) == list(range(1, 21))


def test_a_redis_that_never_answers_holds_the_job_up_about_a_second_per_retry(tmp_path, open_sinks):
    with socket.socket() as silent_server:
        silent_server.bind(("127.0.0.1", 0))
        silent_server.listen()
        port = silent_server.getsockname()[1]
        sink = RedisStreamSink(f"redis://127.0.0.1:{port}/0", tmp_path, stream="test:silent")
        open_sinks.append(sink)
        emitter = EventEmitter([sink], run_id="r-1")

        started = time.monotonic()
        emit_progress(emitter, 1)
        first = time.monotonic() - started
        started = time.monotonic()
        emit_progress(emitter, 10)
        next_ten = time.monotonic() - started

    assert first < 1.5
    assert next_ten < 0.5
    assert len(sink.spool_path.read_text().splitlines()) == 11


def test_spooled_events_are_sent_in_order_when_redis_comes_back(tmp_path, spare_redis, open_sinks):
    # Redis is tried again at every event, so the first event after it is back drains the
    # spool (the interval between tries has its own test above).
    sink = RedisStreamSink(spare_redis.url, tmp_path, stream="events", retry_interval=0)
    open_sinks.append(sink)
    emitter = EventEmitter([sink], run_id="r-1")
    emit_progress(emitter, 3)

    spare_redis.stop()
    emit_progress(emitter, 4)
    assert sink.spool_path.exists()
    spare_redis.start()
    emit_progress(emitter, 2)

    assert seqs(stream_events(spare_redis.client(), "events")) == list(range(1, 10))
    assert not sink.spool_path.exists()


def test_background_flusher_sends_the_spool_without_new_events(tmp_path, spare_redis, open_sinks):
    sink = RedisStreamSink(
        spare_redis.url, tmp_path, stream="events", retry_interval=0.2, flush_interval=0.2
    )
    open_sinks.append(sink)
    sink.start()
    spare_redis.stop()
    emit_progress(EventEmitter([sink], run_id="r-1"), 3)

    spare_redis.start()

    client = spare_redis.client()
    wait_for(lambda: len(stream_events(client, "events")) == 3, timeout=5)
    assert seqs(stream_events(client, "events")) == [1, 2, 3]
    # The flusher sends the spool's events, then removes the file: a moment apart.
    wait_for(lambda: not sink.spool_path.exists(), timeout=5, what="the sent spool removed")


def test_start_sends_events_a_previous_agent_process_left_in_the_spool(
    shared_redis, stream, tmp_path, open_sinks
):
    dead = RedisStreamSink(CLOSED_PORT_URL, tmp_path, stream=stream)
    emit_progress(EventEmitter([dead], run_id="r-1"), 3)
    dead.close()

    sink = RedisStreamSink(SHARED_REDIS_URL, tmp_path, stream=stream)
    open_sinks.append(sink)
    sink.start()

    assert seqs(stream_events(shared_redis, stream)) == [1, 2, 3]
    assert not sink.spool_path.exists()


def test_a_torn_spool_line_is_skipped_and_the_next_event_kept(
    shared_redis, stream, tmp_path, open_sinks
):
    dead = RedisStreamSink(CLOSED_PORT_URL, tmp_path, stream=stream)
    emitter = EventEmitter([dead], run_id="r-1")
    emit_progress(emitter, 1)
    with dead.spool_path.open("ab") as spool:
        spool.write(b'{"version": 1, "run_id": "r-1", "se')
    emit_progress(emitter, 1)
    dead.close()

    sink = RedisStreamSink(SHARED_REDIS_URL, tmp_path, stream=stream)
    open_sinks.append(sink)
    sink.start()

    assert seqs(stream_events(shared_redis, stream)) == [1, 2]


def test_agent_processes_sharing_a_spool_lose_none_of_each_others_events(
    shared_redis, stream, tmp_path, open_sinks
):
    offline = RedisStreamSink(CLOSED_PORT_URL, tmp_path, stream=stream)
    online = RedisStreamSink(SHARED_REDIS_URL, tmp_path, stream=stream)
    open_sinks.extend([offline, online])
    offline_run = EventEmitter([offline], run_id="r-offline")
    online_run = EventEmitter([online], run_id="r-online")
    emit_progress(offline_run, 50)

    drains = threading.Thread(target=lambda: [online.flush() for _ in range(50)])
    drains.start()
    emit_progress(offline_run, 50)
    drains.join()
    emit_progress(online_run, 1)

    events = stream_events(shared_redis, stream)
    offline_seqs = [event["seq"] for event in events if event["run_id"] == "r-offline"]
    assert list(dict.fromkeys(offline_seqs)) == list(range(1, 101))


def test_claiming_a_run_twice_fails_the_second_time(shared_redis, run_id):
    client = redis_client(SHARED_REDIS_URL)

    assert claim_run(client, run_id, "agent-a") is True
    assert claim_run(client, run_id, "agent-b") is False
    assert shared_redis.get(f"benchlab:claim:{run_id}") == "agent-a"
    assert shared_redis.ttl(f"benchlab:claim:{run_id}") > 600_000


def test_cancel_flag_is_seen_within_a_second(shared_redis, run_id):
    should_cancel = CancelWatcher(redis_client(SHARED_REDIS_URL), run_id)
    assert should_cancel() is False

    shared_redis.set(f"benchlab:cancel:{run_id}", "1", ex=60)
    flagged_at = time.monotonic()
    wait_for(should_cancel, timeout=2, interval=0.01)

    assert time.monotonic() - flagged_at <= 1.1


def test_cancel_watcher_asks_redis_at_most_once_a_second(shared_redis, run_id):
    should_cancel = CancelWatcher(redis_client(SHARED_REDIS_URL), run_id)
    should_cancel()
    shared_redis.set(f"benchlab:cancel:{run_id}", "1", ex=60)

    assert should_cancel() is False


def test_cancel_watcher_answers_false_when_redis_is_unreachable():
    should_cancel = CancelWatcher(redis_client(CLOSED_PORT_URL), "r-1")

    assert should_cancel() is False


def test_cancel_watcher_sees_the_flag_once_redis_is_back(spare_redis):
    should_cancel = CancelWatcher(redis_client(spare_redis.url), "r-1", retry_interval=0.2)
    spare_redis.stop()
    assert should_cancel() is False

    spare_redis.start()
    spare_redis.client().set("benchlab:cancel:r-1", "1")

    wait_for(should_cancel, timeout=2, interval=0.05)


def test_heartbeats_carry_the_running_run(shared_redis, stream, tmp_path, open_sinks):
    sink = RedisStreamSink(SHARED_REDIS_URL, tmp_path, stream=stream)
    open_sinks.append(sink)
    heartbeat = Heartbeat(AgentEventEmitter([sink], "agent-a"), interval=0.1)
    heartbeat.start()
    wait_for(lambda: stream_events(shared_redis, stream))
    heartbeat.running = "r-7"
    wait_for(lambda: stream_events(shared_redis, stream)[-1]["data"]["running"] == "r-7")
    heartbeat.stop()

    events = stream_events(shared_redis, stream)
    assert {event["type"] for event in events} == {"heartbeat"}
    assert all(validate_event(event)["agent"] == "agent-a" for event in events)
    assert events[0]["run_id"] is None
    assert events[0]["data"] == {"running": None, "job": None}


def test_agent_events_of_a_restarted_agent_number_higher_than_before(tmp_path):
    delivered: list[dict] = []
    first_process = AgentEventEmitter([delivered.append], "agent-a")
    for _ in range(3):
        first_process.emit("heartbeat", {"running": None})
    # A restart takes longer than the few milliseconds the first process's seqs used.
    wait_for(lambda: time.time() * 1000 > max(seqs(delivered)), 1, "the clock past the seqs")

    restarted = AgentEventEmitter([delivered.append], "agent-a")
    restarted.emit("heartbeat", {"running": None})

    assert seqs(delivered) == sorted(set(seqs(delivered)))
