"""Heartbeats carry the free space of the agent's storage targets: on the first beat,
then once a minute, again when a job starts or ends, and whenever it moved."""

import os
from pathlib import Path

from agents.contract.reports.events import validate_event
from agents.observe.storage import target_space
from agents.transport import SPACE_CHANGE_BYTES, AgentEventEmitter, Heartbeat

MiB = 1024**2


def test_heartbeats_report_each_targets_free_space_once_a_minute_and_when_a_job_changes(
    tmp_path: Path,
) -> None:
    delivered: list[dict] = []
    targets = {"fast": tmp_path / "fast", "missing": tmp_path / "not" / "yet"}
    (tmp_path / "fast").mkdir()
    heartbeat = Heartbeat(
        AgentEventEmitter([delivered.append], "agent-a"), space=lambda: target_space(targets)
    )

    heartbeat.beat()
    heartbeat.beat()
    heartbeat.set_running("r-1", "j-1")
    heartbeat.beat()

    events = [validate_event(event) for event in delivered]
    assert ["space" in event["data"] for event in events] == [True, False, True]
    space = events[0]["data"]["space"]
    stats = os.statvfs(tmp_path)
    assert set(space) == {"fast", "missing"}
    assert space["fast"]["total_bytes"] == stats.f_blocks * stats.f_frsize
    assert 0 < space["missing"]["free_bytes"] <= space["missing"]["total_bytes"]


def test_a_beat_reports_space_as_soon_as_a_target_was_freed_or_filled() -> None:
    """Read every beat, reported when it moved: a target freed (another process's file
    removed) reaches the lab a beat later, not up to a minute later."""
    delivered: list[dict] = []
    free = {"bytes": 100 * MiB}
    heartbeat = Heartbeat(
        AgentEventEmitter([delivered.append], "agent-a"),
        space=lambda: {"small": {"total_bytes": 256 * MiB, "free_bytes": free["bytes"]}},
    )

    heartbeat.beat()
    free["bytes"] -= SPACE_CHANGE_BYTES // 2  # a job writing: not worth a report
    heartbeat.beat()
    free["bytes"] += 150 * MiB  # a ballast removed
    heartbeat.beat()
    heartbeat.beat()

    reported = [event["data"].get("space", {}).get("small") for event in delivered]
    assert [figures and figures["free_bytes"] for figures in reported] == [
        100 * MiB,
        None,
        free["bytes"],
        None,
    ]
