"""A storage target that fills up during a job: a real, small ext4 filesystem on a loop
device, real PostgreSQL 16 and `pgbench -i` at a scale that does not fit."""

import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from agents.config import AgentConfig
from tests.agents.jobs import Recorder, run, small_spec
from tests.small_disk import small_filesystem

DISK_MB = 128
# About 300 MB of tables, indexes and WAL (agents/contract/spec/space.py): far more than fits.
TOO_BIG_SCALE = 10


@pytest.fixture
def small_disk(storage_root: Path) -> Iterator[Path]:
    """A 128 MB ext4 filesystem mounted in the test's storage root; unmounted afterwards."""
    with small_filesystem(storage_root, DISK_MB) as mount:
        yield mount


def _config(storage_root: Path, small_disk: Path) -> AgentConfig:
    return AgentConfig(storage={"small": small_disk / "targets", "roomy": storage_root / "roomy"})


def _status_time(events: Recorder, state: str) -> datetime:
    found = [e for e in events.of_type("status") if e["data"]["state"] == state]
    return datetime.fromisoformat(found[-1]["ts"])


def _clusters_on(path: Path) -> list[Path]:
    return sorted(path.rglob("benchlab-*"))


@pytest.mark.parametrize(
    ("storage", "role", "said"),
    [
        # The operator's case: data and WAL on one small disk, pg_wal fills first.
        ({"data": "small", "wal": None}, "data", "No space left on device"),
        ({"data": "small", "wal": "roomy"}, "data", "could not extend file"),
        ({"data": "roomy", "wal": "small"}, "wal", 'could not write to file "pg_wal/'),
    ],
)
def test_a_disk_filled_by_pgbench_init_fails_fast_as_disk_full_and_the_next_job_runs(
    storage_root: Path, small_disk: Path, storage: dict, role: str, said: str
) -> None:
    config = _config(storage_root, small_disk)
    spec = small_spec(storage=storage, dataset={"scale": TOO_BIG_SCALE})

    result, events = run(spec, config)

    error = result["error"]
    assert error is not None
    assert (result["status"], error["code"], error["category"]) == ("failed", "disk_full", "user")
    assert error["field"] == f"storage.{role}"
    assert f"the {role} storage target “small” ({small_disk / 'targets'}, " in error["message"]
    assert "it filled during pgbench -i at scale 10" in error["message"]
    assert "the server said: " in error["message"] and said in error["message"]
    assert "Choose a smaller dataset.scale" in error["message"], "the dataset filled it"
    assert "were free when the job started)" in error["message"]
    # The disk fills while loading: from the start of loading to the end of the job,
    # an immediate stop and the cluster's removal included.
    loading_to_end = _status_time(events, "finished") - _status_time(events, "loading")
    assert loading_to_end.total_seconds() < 10, loading_to_end
    stops = [step for step in result["steps"] if step["name"] == "stop"]
    assert [step["argv"][step["argv"].index("-m") + 1] for step in stops] == ["immediate"]
    assert _clusters_on(small_disk) == [] and _clusters_on(storage_root / "roomy") == []
    assert sorted(p.name for p in small_disk.iterdir()) == ["lost+found", "targets"]
    assert list((small_disk / "targets").iterdir()) == []

    # 3 s, not 1: a loaded host once stalled the loop device's writes through a whole 1 s
    # point, and pgbench processed no transaction.
    after, _events = run(
        small_spec(run_id="next", storage=storage, sweep={"clients": [1], "duration_s": 3}),
        config,
    )
    assert after["status"] == "succeeded", after["error"]
    assert _clusters_on(small_disk) == []


def _fill(mount: Path, leave_bytes: int) -> None:
    """Another process's file taking all but `leave_bytes` of the filesystem at `mount`."""
    stats = os.statvfs(mount)
    fd = os.open(mount / "ballast", os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.posix_fallocate(fd, 0, stats.f_bavail * stats.f_frsize - leave_bytes)
    finally:
        os.close(fd)


def test_a_disk_another_process_fills_during_a_point_is_not_blamed_on_the_dataset(
    storage_root: Path, small_disk: Path
) -> None:
    config = _config(storage_root, small_disk)
    spec = small_spec(
        storage={"data": "small", "wal": None}, sweep={"clients": [1], "duration_s": 20}
    )

    def fill_once_measuring(event: dict) -> None:
        if event["type"] == "progress" and not (small_disk / "ballast").exists():
            _fill(small_disk, leave_bytes=256 * 1024)

    result, _events = run(spec, config, hook=fill_once_measuring)

    error = result["error"]
    assert error is not None
    assert (error["code"], error["field"]) == ("disk_full", "storage.data"), error["message"]
    message = error["message"]
    assert "it filled during point 1 of 1: 1 clients" in message, message
    assert "Another writer filled it: since the job started" in message
    assert "were written by another process on this host" in message
    assert "smaller dataset.scale" not in message
    assert message.endswith(
        "Free space on it, or choose a storage target with more free space for storage.data"
    )
