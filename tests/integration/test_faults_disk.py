"""A disk that fills during `pgbench -i` under a real agent and control worker: a small
ext4 filesystem on a loop device as one of the agent's storage targets, filled by
someone else after the lab checked the dataset fits (the space the agent reported)."""

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runs.models import Host, Run
from tests.integration.conftest import Lab, running_lab
from tests.integration.faults import (
    all_final,
    assert_measured_once,
    assert_no_orphans,
    assert_stored_once,
    recovered,
    short_run,
)
from tests.small_disk import small_filesystem
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.faults]

DISK_MB = 256
# About 180 MB with the lab's margin (agents/contract/spec/space.py): fits the empty disk.
SCALE = 4
# What the ballast leaves free: initdb fits, pgbench -i at SCALE does not.
LEFT_MB = 70
# The lab sees a freed target within a few heartbeats (5 s each); it took up to a minute.
SPACE_SEEN_WITHIN_S = 20


@pytest.fixture
def lab_with_small_disk(transactional_db, tmp_path) -> Iterator[tuple[Lab, Path]]:
    """A lab whose agent has a storage target `small` on its own small filesystem."""
    root = Path(tempfile.mkdtemp(prefix="benchlab-small-", dir="/var/tmp"))
    root.chmod(0o755)
    try:
        with small_filesystem(root, DISK_MB) as mount:
            target = mount / "targets"
            with running_lab(tmp_path, agent_args=["--storage", f"small={target}"]) as lab:
                yield lab, mount
    finally:
        shutil.rmtree(root)


def fill(mount: Path, leave_mb: int) -> Path:
    """A ballast file that leaves `leave_mb` free on the filesystem at `mount`."""
    stats = os.statvfs(mount)
    size = stats.f_bavail * stats.f_frsize - leave_mb * 1024**2
    ballast = mount / "ballast"
    fd = os.open(ballast, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)
    return ballast


def test_a_disk_filled_during_pgbench_init_fails_the_run_as_disk_full_and_the_queue_moves(
    api, lab_with_small_disk
):
    lab, mount = lab_with_small_disk
    run_id = short_run(api, lab, scale=SCALE, data="small")  # the lab's space check passes
    ballast = fill(mount, LEFT_MB)
    began = time.monotonic()
    (run,) = all_final(lab, [run_id], within_s=60)
    recovered("disk full during pgbench -i: run final (from its start)", began)

    assert (run.status, run.error_code, run.error_category) == ("failed", "disk_full", "user"), (
        run.error_message
    )
    assert "storage target “small”" in run.error_message
    assert "pgbench -i" in run.error_message
    # The ballast, laid before the job started or while it loaded, not the dataset.
    named = ("Other files filled it before the job started", "Another writer filled it")
    assert any(words in run.error_message for words in named), run.error_message
    assert "smaller dataset.scale" not in run.error_message
    stops = [step for step in run.steps if step["name"] == "stop"]
    assert [step["argv"][step["argv"].index("-m") + 1] for step in stops] == ["immediate"]
    assert_stored_once(run)
    assert_measured_once(lab, [run])
    assert_no_orphans(lab)
    assert list((mount / "targets").iterdir()) == [], "the cluster was removed from the disk"

    ballast.unlink()
    freed = time.monotonic()
    host = lab.wait_registered()
    wait_for(lambda: free_mb(host) > DISK_MB - LEFT_MB, 30, "the freed space reported", lab.logs)
    seen = recovered("disk full: the lab sees the target freed", freed)
    assert seen < SPACE_SEEN_WITHIN_S, "read every heartbeat, not once a minute"
    again = lab.wait_terminal(short_run(api, lab, scale=SCALE, data="small"), timeout=120)
    assert again.status == Run.Status.SUCCEEDED, again.error_message
    assert_stored_once(again)
    recovered("disk full: the same dataset on the freed target succeeded", freed)


def free_mb(host: Host) -> float:
    """The free space the lab last stored for the host's target `small`, in MB."""
    host.refresh_from_db()
    return (host.storage_space.get("small", {}).get("free_bytes") or 0) / 1024**2
