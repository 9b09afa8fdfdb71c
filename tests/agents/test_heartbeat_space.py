"""Heartbeats carry the free space of the agent's storage targets: on the first beat,
then once a minute, and again when a job starts or ends."""

import os
from pathlib import Path

from agents.contract.reports.events import validate_event
from agents.observe.storage import target_space
from agents.worker.transport import AgentEventEmitter, Heartbeat


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
