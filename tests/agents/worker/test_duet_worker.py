"""A duet through the agent's real worker: one task, two runs, each claimed and reported
on its own; a worker killed mid-duet leaves nothing after the next agent's start."""

import os
import signal
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from agents.contract.signing import verify
from agents.contract.wire import claim_key, dispatch_key
from agents.cpusets import CPUSET_V1_MOUNT
from tests.agents.worker.conftest import SHARED_REDIS_URL
from tests.agents.worker.test_worker import (
    AgentProcess,
    celery_client,
    dispatch,
    events_of_type,
    measuring,
    run_events,
    start_agent,
    tiny_spec,
    wait_for_result,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def lab() -> Iterator[Celery]:
    client = celery_client(SHARED_REDIS_URL)
    yield client
    client.close()


@pytest.fixture
def agent(
    shared_redis: Any, stream: str, storage_root: Path, tmp_path: Path
) -> Iterator[AgentProcess]:
    """A running agent worker; stopped and its queue removed after."""
    process = start_agent(shared_redis, SHARED_REDIS_URL, stream, storage_root, tmp_path / "log")
    yield process
    process.stop()
    shared_redis.delete(process.queue, f"_kombu.binding.{process.queue}")


def duet_document(run_id: str, duration_s: int = 2) -> dict[str, Any]:
    sides = [tiny_spec(f"{run_id}-a", duration_s), tiny_spec(f"{run_id}-b", duration_s)]
    for side in sides:
        side["job_id"] = f"job-{side['run_id']}"
    return {
        "duet": 1,
        "key": run_id,
        "run_id": sides[0]["run_id"],
        "swapped": False,
        "sides": sides,
    }


def job_processes_of(agent_pid: int) -> list[int]:
    """The processes in the cgroups of the agent process `agent_pid` (pids controller)."""
    found = []
    for directory in Path("/sys/fs/cgroup/pids/benchlab").glob(f"agent-{agent_pid}-*"):
        for procs in directory.glob("*/cgroup.procs"):
            found += [int(pid) for pid in procs.read_text().split()]
    return found


def test_a_duet_is_one_task_whose_sides_report_as_their_own_runs(
    agent: AgentProcess, lab: Celery, shared_redis: Any, stream: str, run_id: str
) -> None:
    document = duet_document(run_id)
    dispatch(lab, agent, document)

    results = [wait_for_result(shared_redis, stream, f"{run_id}-{side}") for side in "ab"]

    for result, side in zip(results, document["sides"], strict=True):
        assert result["data"]["status"] == "succeeded", result["data"]["error"]
        events = run_events(shared_redis, stream, side["run_id"])
        assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
        assert {event["token"] for event in events} == {side["token"]}
        assert all(verify("event", event, agent.identity.secret) for event in events)
        assert shared_redis.get(claim_key(dispatch_key(side["run_id"], side["token"])))
    assert results[0]["data"]["duet"]["other_run"] == f"{run_id}-b"
    assert results[0]["data"]["cpus"] != results[1]["data"]["cpus"]
    beats = [event["data"] for event in events_of_type(shared_redis, stream, "heartbeat")]
    # The duet takes over ten seconds, beats come every five: one names both its jobs.
    assert {"running": f"{run_id}-a", "job": f"job-{run_id}-a", "duet_job": f"job-{run_id}-b"} in [
        {key: beat.get(key) for key in ("running", "job", "duet_job")} for beat in beats
    ]


def test_a_duet_whose_worker_is_killed_is_cleaned_up_by_the_next_agent(
    shared_redis: Any, lab: Celery, stream: str, storage_root: Path, tmp_path: Path, run_id: str
) -> None:
    if not (CPUSET_V1_MOUNT / "cgroup.procs").exists() or os.geteuid() != 0:
        pytest.skip("this test reads v1 cgroups, which need root")
    first = start_agent(shared_redis, SHARED_REDIS_URL, stream, storage_root, tmp_path / "1")
    dispatch(lab, first, duet_document(run_id, duration_s=60))
    for side_run in (f"{run_id}-a", f"{run_id}-b"):
        wait_for(partial(measuring, shared_redis, stream, side_run), timeout=120)
    killed_pid = first.process.pid
    assert job_processes_of(killed_pid), "both sides' servers and pgbench run"

    first.process.send_signal(signal.SIGKILL)
    first.stop()
    assert job_processes_of(killed_pid), "a SIGKILLed agent cleans nothing itself"
    second = start_agent(shared_redis, SHARED_REDIS_URL, stream, storage_root, tmp_path / "2")
    try:
        assert job_processes_of(killed_pid) == []
        assert list(storage_root.glob("benchlab-*")) == []
        assert list((CPUSET_V1_MOUNT / "benchlab").glob(f"agent-{killed_pid}-*")) == []
    finally:
        second.stop()
        for name in (first.queue, second.queue):
            shared_redis.delete(name, f"_kombu.binding.{name}")
