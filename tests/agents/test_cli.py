"""The agent's command line, run as a user would: `python -m agents ...`."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "agents" / "pgbench" / "fixtures"


def agents_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agents", *args], cwd=REPO, capture_output=True, text=True
    )


def test_parse_prints_the_contract_fields(tmp_path):
    capture = tmp_path / "pg16.txt"
    stdout = (FIXTURES / "pg16" / "run_plain_T2_P1_r.stdout").read_text()
    stderr = (FIXTURES / "pg16" / "run_plain_T2_P1_r.stderr").read_text()
    capture.write_text(stdout + stderr)

    finished = agents_cli("parse", str(capture))

    assert finished.returncode == 0, finished.stderr
    parsed = json.loads(finished.stdout)
    for key in ("tps", "latency_avg_ms", "latency_stddev_ms", "transactions", "failed",
                "clients", "threads", "scale", "query_mode", "duration_s", "statements",
                "progress"):  # fmt: skip
        assert key in parsed
    printed_tps = next(line for line in stdout.splitlines() if line.startswith("tps = "))
    assert str(parsed["tps"]) in printed_tps
    assert len(parsed["progress"]) == stderr.count("progress: ")


def test_parse_names_the_line_it_cannot_read(tmp_path):
    capture = tmp_path / "broken.txt"
    capture.write_text(
        "transaction type: <builtin: TPC-B (sort of)>\nscaling factor: 1\n"
        "latency average = abc ms\n"
    )

    finished = agents_cli("parse", str(capture))

    assert finished.returncode != 0
    assert "line 3" in finished.stderr
    assert "latency average = abc ms" in finished.stderr


def test_run_with_a_missing_spec_file_says_so(tmp_path):
    finished = agents_cli("run", str(tmp_path / "nope.json"))

    assert finished.returncode == 2
    assert "nope.json" in finished.stderr


def test_run_with_an_invalid_spec_names_the_field(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"version": 1, "sweep": {"clients": [], "duration_s": 5}}))

    finished = agents_cli("run", str(spec))

    assert finished.returncode == 1
    result = json.loads(finished.stdout)
    assert result["error"]["field"] == "sweep.clients"
    assert "sweep.clients" in finished.stderr


def test_facts_describe_this_host():
    finished = agents_cli("facts")

    assert finished.returncode == 0, finished.stderr
    facts = json.loads(finished.stdout)
    assert facts["cpu"]["threads"] >= 1
    assert facts["memory"]["total_bytes"] > 0
    assert facts["os"]["kernel_release"]
    assert facts["storage"]["default"]["filesystem"]


def test_installs_lists_the_cached_prebuilt_release(pg16_install):
    # The fixture puts 16 in the agent's cache (a fresh machine's fast tier has none).
    finished = agents_cli("installs")

    assert finished.returncode == 0, finished.stderr
    installs = json.loads(finished.stdout)
    versions = [install["version"] for install in installs["installed"]]
    assert any(version.startswith("16.") for version in versions)
