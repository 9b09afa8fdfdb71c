"""A job's points carry the host's noise: a real job, pgbench and PostgreSQL, with a CPU
burner outside the job running through it."""

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
    # pgbench and the server at 2 clients keep at least part of a CPU busy.
    assert noise["job_cpu_s"] > 0.2 * noise["window_s"]
    # The burner spins through the whole window; whatever else runs only adds.
    assert noise["foreign_cpu_s"] >= 0.25 * noise["window_s"]
    assert noise["host_busy_cpu_s"] >= noise["job_cpu_s"] + noise["foreign_cpu_s"] - 0.05
    assert events.of_type("point")[0]["data"]["noise"] == noise
