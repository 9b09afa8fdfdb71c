"""Starting and cancelling experiments through the API while agents stream events.

The web requests (new runs: a foreign-key check `FOR KEY SHARE` on each host at
commit; cancels: the run row) and the control worker's consumer (run rows, then
host rows for heartbeats) lock the same rows. Four API clients start 200
experiments on two hosts each and cancel a run of each, while a synthetic agent
fleet streams status, progress, sample, result and heartbeat events through
real Redis into the real consumer. No request may fail, and every run ends.
"""

import json
import threading
import time
from collections import defaultdict

import pytest
from django.db import connection, connections
from rest_framework.test import APIClient

from agents.contract.wire import EVENT_FIELD
from runs.agentlink.transport import redis_connection
from runs.control.consumer import EventConsumer
from runs.models import Experiment, Host, Run
from runs.services.access.tokens import api_token_create
from tests.integration.faults import assert_stored_once
from tests.runs import events
from tests.runs.factories import (
    ConfigProfileFactory,
    HostFactory,
    PgBuildFactory,
    UserFactory,
    WorkloadFactory,
)
from tests.waiting import wait_for

CLIENTS = 4
STARTS_PER_CLIENT = 50
# Rounds of the fleet (ROUND_S apart) a run streams for before its result.
ROUNDS_TO_FINISH = 4
# Runs each synthetic agent streams at once (a real one runs one; more make more contention).
STREAMS_PER_HOST = 10
ROUND_S = 0.05
MAX_BACKLOG = 200

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks: PostgreSQL only"),
    pytest.mark.faults,
]


class Fleet:
    """Agents on `hosts`, as the consumer sees them: each round a status or progress and a
    sample event of the runs it streams, a heartbeat of every host, and the result of the
    runs that have streamed long enough."""

    def __init__(self, hosts: list[Host], stream: str):
        self.hosts = {host.pk: host for host in hosts}
        self.stream = stream
        self.redis = redis_connection()
        self.seq: dict[int, int] = defaultdict(int)
        self.rounds: dict[int, int] = defaultdict(int)
        self.beats = 0
        self.ended: set[int] = set()  # runs whose result was sent: an agent sends it once

    def emit_round(self) -> int:
        active = self._streaming()
        pipe = self.redis.pipeline(transaction=False)
        for run in active:
            for event_type, data in self._events_of(run):
                self.seq[run.pk] += 1
                document = events.run_event(run, self.seq[run.pk], event_type, data)
                pipe.xadd(self.stream, {EVENT_FIELD: json.dumps(document)})
        running = {run.host_id: str(run.pk) for run in active}
        for host in self.hosts.values():
            self.beats += 1
            beat = {"running": running.get(host.pk)}
            document = events.agent_event(host.name, self.beats, "heartbeat", beat, host.secret)
            pipe.xadd(self.stream, {EVENT_FIELD: json.dumps(document)})
        pipe.execute()
        return len(active)

    def _streaming(self) -> list[Run]:
        """The oldest STREAMS_PER_HOST runs of each host that are not final."""
        unfinished = Run.objects.exclude(status__in=Run.FINAL_STATES).select_related("host")
        by_host: dict[int, list[Run]] = defaultdict(list)
        for run in unfinished.order_by("pk"):
            if run.pk not in self.ended and len(by_host[run.host_id]) < STREAMS_PER_HOST:
                by_host[run.host_id].append(run)
        return [run for runs in by_host.values() for run in runs]

    def _events_of(self, run: Run) -> list[tuple[str, dict]]:
        self.rounds[run.pk] += 1
        count = self.rounds[run.pk]
        if count == 1:
            return [("status", {"state": "initdb"})]
        if count >= ROUNDS_TO_FINISH:
            self.ended.add(run.pk)
            return [("result", events.result(run, points=[events.point(0)]))]
        t = float(count)
        return [
            ("progress", {"point": 0, "t": t, "tps": 500.0, "latency_ms": 2.0}),
            ("sample", {"point": 0, "host": {"t": t, "cpu_user": 40.0}}),
        ]

    def run_until(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                # Never far ahead of the consumer: the test is about locks, not throughput.
                if self.redis.xlen(self.stream) < MAX_BACKLOG:
                    self.emit_round()
                stop.wait(ROUND_S)
        finally:
            connection.close()
            self.redis.close()


def _state(lab_redis, consumer: EventConsumer) -> str:
    unfinished = Run.objects.exclude(status__in=Run.FINAL_STATES)
    return (
        f"not final: {list(unfinished.values_list('pk', 'status', 'host_id')[:20])}, "
        f"{unfinished.count()} in all; stream {lab_redis.xlen(consumer.stream)} entries"
    )


def start_and_cancel(client: APIClient, payload: dict, count: int, codes: list[int]) -> None:
    """Start `count` experiments, cancelling the first run of each; keep every status code."""
    try:
        for _ in range(count):
            created = client.post("/api/experiments/", {**payload, "start": True}, format="json")
            codes.append(created.status_code)
            if created.status_code != 201:
                continue
            listed = client.get(f"/api/experiments/{created.json()['id']}/runs/")
            codes.append(listed.status_code)
            runs = listed.json()["results"] if listed.status_code == 200 else []
            if runs:
                cancelled = client.post(f"/api/runs/{runs[0]['id']}/cancel/")
                codes.append(cancelled.status_code)
    finally:
        connection.close()


def test_starts_and_cancels_during_event_streaming_never_fail_and_every_run_ends(
    transactional_db, lab_redis, events_stream, settings
):
    hosts = [HostFactory(), HostFactory()]
    payload = {
        "name": "contention",
        "hosts": [host.pk for host in hosts],
        "builds": [PgBuildFactory().pk],
        "config_profiles": [ConfigProfileFactory(settings={}).pk],
        "workloads": [WorkloadFactory(scale=1).pk],
        "clients": [1],
        "duration_s": 1,
    }
    settings.BENCHLAB_MAX_QUEUED_RUNS_PER_USER = 10 * CLIENTS * STARTS_PER_CLIENT
    stop_events = threading.Event()
    consumer = EventConsumer(consumer="contention-test", block_ms=50)
    consumer.ensure_group()
    fleet = Fleet(hosts, events_stream)
    background = [
        threading.Thread(target=consumer.run_forever, args=(stop_events,)),
        threading.Thread(target=fleet.run_until, args=(stop_events,)),
    ]
    codes: list[list[int]] = [[] for _ in range(CLIENTS)]
    clients = []
    for index in range(CLIENTS):
        client = APIClient(raise_request_exception=False)  # a server error is a 500 here
        _row, token = api_token_create(UserFactory())
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        thread = threading.Thread(
            target=start_and_cancel, args=(client, payload, STARTS_PER_CLIENT, codes[index])
        )
        clients.append(thread)
    started = time.monotonic()
    try:
        for thread in background + clients:
            thread.start()
        for thread in clients:
            thread.join(timeout=150)
        requests_s = time.monotonic() - started
        all_codes = [code for client_codes in codes for code in client_codes]
        assert not [code for code in all_codes if code >= 500], all_codes
        assert all_codes.count(201) == CLIENTS * STARTS_PER_CLIENT
        wait_for(
            lambda: not Run.objects.exclude(status__in=Run.FINAL_STATES).exists(),
            60,
            "every run to end",
            lambda: _state(lab_redis, consumer),
        )
    finally:
        stop_events.set()
        for thread in background:
            thread.join(timeout=30)
        connections.close_all()
    assert Experiment.objects.count() == CLIENTS * STARTS_PER_CLIENT
    assert Run.objects.count() == 2 * CLIENTS * STARTS_PER_CLIENT
    assert set(Run.objects.values_list("status", flat=True)) <= {
        Run.Status.SUCCEEDED,
        Run.Status.CANCELLED,
    }
    assert lab_redis.xlen(consumer.dead_letter_stream) == 0
    for run in Run.objects.all():
        assert_stored_once(run)
    assert time.monotonic() - started < 120, f"requests took {requests_s:.0f} s"
