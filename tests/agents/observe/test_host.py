"""The host sampler against this machine's real /proc and disks."""

import logging
import os
import time
from pathlib import Path

import pytest

from agents.observe.host import HostSampler, process_cpu_seconds
from agents.observe.storage import sampling_device
from tests.agents.observe.fakes import FakeClock

INTERVAL = 0.2
FAKE_INTERVAL = 0.25  # exact in binary, so fake-clock ticks are exact


def sample_for(sampler: HostSampler, seconds: float) -> list[dict]:
    sampler.start()
    time.sleep(seconds)
    return sampler.stop()


def write_and_fsync(directory: Path, megabytes: int) -> None:
    with open(directory / "payload", "wb") as payload:
        for _ in range(megabytes):
            payload.write(os.urandom(1 << 20))
        payload.flush()
        os.fsync(payload.fileno())


def sample_on_fake_clock(sampler: HostSampler, clock: FakeClock, seconds: float) -> list[dict]:
    sampler.start()
    clock.run_for(seconds)
    return sampler.stop()


def test_samples_arrive_once_per_interval_on_the_schedule(tmp_path: Path) -> None:
    clock = FakeClock()
    sampler = HostSampler({"data": tmp_path}, interval=FAKE_INTERVAL, clock=clock)
    samples = sample_on_fake_clock(sampler, clock, 1.1)
    assert [sample["t"] for sample in samples] == [0.25, 0.5, 0.75, 1.0]


def test_slow_callback_skips_missed_ticks_without_drifting() -> None:
    clock = FakeClock()
    sampler = HostSampler(
        {},
        interval=FAKE_INTERVAL,
        on_sample=lambda _: clock.spend(1.25 * FAKE_INTERVAL),
        clock=clock,
    )
    samples = sample_on_fake_clock(sampler, clock, 1.3)
    assert [sample["t"] for sample in samples] == [0.25, 0.75, 1.25]


def test_writing_and_fsyncing_shows_disk_writes_per_second_of_the_sampler_clock(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    sampler = HostSampler({"data": tmp_path}, interval=FAKE_INTERVAL, clock=clock)
    sampler.start()
    clock.run_for(FAKE_INTERVAL)
    write_and_fsync(tmp_path, megabytes=8)
    clock.run_for(FAKE_INTERVAL)
    samples = sampler.stop()
    before, during = (sample["disks"]["data"] for sample in samples)
    if during["device"] is None:
        pytest.skip("the test directory has no block device")
    assert before["device"] == during["device"] == sampling_device(tmp_path)
    # 8 MiB reached the disk in what the sampler's clock calls a quarter second.
    assert during["write_bytes_per_s"] >= 4 * 8 * (1 << 20)
    assert during["write_iops"] > 0
    assert 0 <= during["util_percent"] <= 100


def test_cpu_and_memory_fields_are_consistent(tmp_path: Path) -> None:
    sample = sample_for(HostSampler({"data": tmp_path}, interval=INTERVAL), 0.3)[0]
    shares = ("cpu_user", "cpu_system", "cpu_iowait", "cpu_idle", "cpu_steal")
    assert all(sample[share] >= 0 for share in shares)
    assert sum(sample[share] for share in shares) <= 100.1
    assert sample["mem_used_bytes"] > 0
    assert sample["mem_available_bytes"] > 0
    assert sample["mem_dirty_bytes"] >= 0


def test_roles_on_the_same_device_both_name_it(tmp_path: Path) -> None:
    (tmp_path / "wal").mkdir()
    sampler = HostSampler({"data": tmp_path, "wal": tmp_path / "wal"}, interval=INTERVAL)
    samples = sample_for(sampler, 0.5)
    assert sampler.role_devices["data"] == sampler.role_devices["wal"]
    for sample in samples:
        assert sample["disks"]["data"] == sample["disks"]["wal"]


def test_path_without_block_device_reports_no_numbers() -> None:
    if sampling_device(Path("/dev/shm")) is not None:
        pytest.skip("/dev/shm has a block device here")
    clock = FakeClock()
    sampler = HostSampler({"data": Path("/dev/shm")}, interval=FAKE_INTERVAL, clock=clock)
    (sample,) = sample_on_fake_clock(sampler, clock, 0.3)
    assert sample["disks"]["data"]["device"] is None
    assert sample["disks"]["data"]["write_bytes_per_s"] is None


def test_failing_callback_is_logged_and_sampling_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken_consumer(sample: dict) -> None:
        raise RuntimeError("consumer bug")

    clock = FakeClock()
    with caplog.at_level(logging.ERROR, logger="agents.observe.periodic"):
        sampler = HostSampler(
            {"data": tmp_path}, interval=FAKE_INTERVAL, on_sample=broken_consumer, clock=clock
        )
        samples = sample_on_fake_clock(sampler, clock, 0.8)
    assert len(samples) == 3
    failures = [record for record in caplog.records if "callback failed" in record.message]
    assert len(failures) == 3
    assert "consumer bug" in caplog.text
    assert failures[0].exc_info is not None


def test_sampling_costs_little_cpu(tmp_path: Path) -> None:
    sampler = HostSampler({"data": tmp_path, "wal": tmp_path}, interval=0.05)
    samples = sample_for(sampler, 1.0)
    per_sample = sampler.cpu_seconds / len(samples)
    logging.getLogger(__name__).info("host sampler: %.6f s CPU per sample", per_sample)
    assert per_sample < 0.005


def test_process_cpu_seconds_grows_with_work() -> None:
    before = process_cpu_seconds()
    # 50 ms of CPU, not of wall time: on a loaded machine 50 ms of wall time can be no CPU.
    spent_from = time.process_time()
    while time.process_time() - spent_from < 0.05:
        pass
    assert process_cpu_seconds() > before
