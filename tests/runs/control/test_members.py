"""Members of the control group that are gone are removed; live ones and owners stay."""

import os
import socket
import subprocess

import pytest
import redis

from runs.control.consumer import EventConsumer
from runs.control.members import claim_from_dead_here, remove_dead_consumers
from tests.waiting import wait_for


def idle_ms(client: redis.Redis, stream: str, group: str, name: str) -> int:
    """How long a member of the group has been idle, as Redis counts it."""
    members = client.xinfo_consumers(stream, group)
    return next(int(member["idle"]) for member in members if member["name"] == name)


@pytest.mark.django_db
def test_idle_members_without_pending_entries_are_removed(lab_redis, events_stream):
    group = "control"
    EventConsumer(client=lab_redis).ensure_group()
    for entry in range(3):
        lab_redis.xadd(events_stream, {"event": str(entry)})
    gone = lab_redis.xreadgroup(group, "gone", {events_stream: ">"}, count=1)
    lab_redis.xack(events_stream, group, gone[0][1][0][0])
    lab_redis.xreadgroup(group, "owner", {events_stream: ">"}, count=1)  # one left pending
    wait_for(lambda: idle_ms(lab_redis, events_stream, group, "owner") > 100, 5, "owner idle")
    live = lab_redis.xreadgroup(group, "live", {events_stream: ">"}, count=1)
    lab_redis.xack(events_stream, group, live[0][1][0][0])

    removed = remove_dead_consumers(lab_redis, events_stream, group, keep="me", idle_ms=100)

    assert removed == ["gone"]
    names = {member["name"] for member in lab_redis.xinfo_consumers(events_stream, group)}
    assert names == {"owner", "live"}


def dead_pid() -> int:
    """The pid of a process that ran here and has ended."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.mark.django_db
def test_what_a_killed_worker_of_this_host_left_pending_is_claimed_at_once(
    lab_redis, events_stream
):
    group, host = "control", socket.gethostname()
    EventConsumer(client=lab_redis).ensure_group()
    for entry in range(4):
        lab_redis.xadd(events_stream, {"event": str(entry)})
    killed, elsewhere, alive = f"{host}-{dead_pid()}", "other-host-1", f"{host}-{os.getpid()}"
    for name in (killed, elsewhere, alive):
        lab_redis.xreadgroup(group, name, {events_stream: ">"}, count=1)  # left pending

    claimed = claim_from_dead_here(lab_redis, events_stream, group, claimer="restarted")

    assert claimed == 1
    pending = {m["name"]: m["pending"] for m in lab_redis.xinfo_consumers(events_stream, group)}
    assert pending == {killed: 0, elsewhere: 1, alive: 1, "restarted": 1}
    # The restarted worker's next round reads it as its own pending entry.
    consumer = EventConsumer(client=lab_redis, consumer="restarted")
    assert [fields for _id, fields in consumer._own_pending()] == [{"event": "0"}]
