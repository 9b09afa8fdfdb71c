"""Members of the control group that are gone are removed; live ones and owners stay."""

import time

import pytest

from runs.control.consumer import EventConsumer
from runs.control.members import remove_dead_consumers


@pytest.mark.django_db
def test_idle_members_without_pending_entries_are_removed(lab_redis, events_stream):
    group = "control"
    EventConsumer(client=lab_redis).ensure_group()
    for entry in range(3):
        lab_redis.xadd(events_stream, {"event": str(entry)})
    gone = lab_redis.xreadgroup(group, "gone", {events_stream: ">"}, count=1)
    lab_redis.xack(events_stream, group, gone[0][1][0][0])
    lab_redis.xreadgroup(group, "owner", {events_stream: ">"}, count=1)  # one left pending
    time.sleep(0.2)
    live = lab_redis.xreadgroup(group, "live", {events_stream: ">"}, count=1)
    lab_redis.xack(events_stream, group, live[0][1][0][0])

    removed = remove_dead_consumers(lab_redis, events_stream, group, keep="me", idle_ms=100)

    assert removed == ["gone"]
    names = {member["name"] for member in lab_redis.xinfo_consumers(events_stream, group)}
    assert names == {"owner", "live"}
