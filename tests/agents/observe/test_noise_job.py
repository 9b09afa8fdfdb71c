"""A job's noise: its points' steal and foreign CPU (a CPU burner outside the job running
through a real job, pgbench and PostgreSQL) and the canary it times before its cluster."""

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.agents.jobs import run, small_spec

SPIN = [sys.executable, "-c", "while True:\n    pass"]


@pytest.fixture
def burner() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(SPIN)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def test_each_point_tells_the_jobs_cpu_from_a_burner_outside_it(config, burner) -> None:
    result, events = run(small_spec(sweep={"clients": [2], "duration_s": 3}), config)

    assert result["status"] == "succeeded", result["error"]
    (point,) = result["points"]
    noise = point["noise"]
    assert noise["window_s"] >= 3
    assert noise["job_cpu_source"] in {"cgroup", "processes"}
    # The job's CPU holds pgbench's own (and, read from processes, the server's).
    assert noise["job_cpu_s"] >= point["pgbench_cpu_s"] > 0
    # The burner spins through the whole window; whatever else runs only adds.
    assert noise["foreign_cpu_s"] >= 0.25 * noise["window_s"]
    outside = noise["host_busy_cpu_s"] - noise["job_cpu_s"] - noise["agent_cpu_s"]
    assert noise["foreign_cpu_s"] == pytest.approx(max(0.0, outside), abs=0.02)
    assert events.of_type("point")[0]["data"]["noise"] == noise


def test_the_job_times_its_canary_on_its_data_storage_before_the_cluster_starts(
    config, storage_root
) -> None:
    result, events = run(small_spec(sweep={"clients": [1], "duration_s": 1}), config)

    assert result["status"] == "succeeded", result["error"]
    canary = result["canary"]
    assert canary["fsync_directory"] in {str(storage_root / "data"), str(storage_root)}
    assert canary["cpu_loop_ns"] > 0 and 0 < canary["fsync_ms"] <= canary["fsync_max_ms"]
    steps = [event["data"]["message"] for event in events.of_type("status")]
    timing = next(i for i, message in enumerate(steps) if message.startswith("timing the host"))
    assert timing < steps.index("creating a throw-away cluster")
