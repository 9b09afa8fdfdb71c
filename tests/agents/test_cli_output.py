"""What the CLI prints for a person after a run: the summary table on stderr."""

import pytest

from agents.cli_output import describe, print_summary
from agents.contract.reports.results import PointResult, ResultDocument


def point(index: int, tps: float | None, latency_ms: float | None) -> PointResult:
    return {
        "index": index,
        "clients": 4,
        "threads": 1,
        "repeat": 1,
        "argv": ["pgbench"],
        "exit_code": 0 if tps is not None else 1,
        "stdout": "",
        "stderr": "",
        "progress": [],
        "host_samples": [],
        "server_samples": [],
        "tps": tps,
        "latency_avg_ms": latency_ms,
        "latency_stddev_ms": None,
        "latency_percentiles_ms": None,
        "transactions": None,
        "failed": None,
        "duration_s": None,
        "statements": [],
    }


def result(points: list[PointResult]) -> ResultDocument:
    return {
        "version": 1,
        "run_id": "r1",
        "status": "failed",
        "error": {
            "code": "pgbench_failed",
            "category": "application",
            "field": None,
            "message": "pgbench exited with 1",
        },
        "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:01:00+00:00",
        "spec": {},
        "install": None,
        "facts": None,
        "storage": {},
        "settings": {"requested": {}, "effective": [], "warnings": []},
        "steps": [],
        "dataset": {},
        "points": points,
        "server_log_tail": "",
    }


def test_summary_shows_a_dash_for_a_point_pgbench_left_without_numbers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_summary(result([point(0, 1234.5, 3.25), point(1, None, None)]))

    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "status: failed"
    assert lines[1] == "error: pgbench_failed: pgbench exited with 1"
    measured, unparsed = lines[3].split(), lines[4].split()
    assert measured == ["4", "1", "1234.50", "3.250", "-"]
    assert unparsed == ["4", "1", "-", "-", "-"]


def test_a_second_estimated_from_a_sample_says_so() -> None:
    position = {"point": 0, "clients": 2, "repeat": 1}
    sampled = {"t": 3.0, "tps": 51200.0, "latency_ms": 0.039, "stddev_ms": 0.01}
    sample = {"sampled": 256, "sampling_rate": 0.005}
    line = describe({"type": "progress", "data": {**position, **sampled, **sample}})
    assert line is not None and "~51200.0 tps" in line and "from 256 sampled transactions" in line
    exact = describe({"type": "progress", "data": {**position, **sampled}})
    assert exact is not None and "~" not in exact and "sampled" not in exact
