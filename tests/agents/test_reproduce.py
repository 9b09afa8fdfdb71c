"""Runs anyone can reproduce: a recorded run's manifest replayed by `python -m agents run
--manifest`, and its reproduce script run against a throw-away cluster of its own."""

import copy
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.config import AgentConfig
from agents.contract.spec.manifest import Manifest, command_shape, make_manifest
from runs.reproduce.script import reproduce_script
from tests.agents.jobs import run, small_spec

REPO = Path(__file__).resolve().parents[2]
# A setting's value and setup SQL text that touch CANARY if any of it runs as bash or psql.
NOTE = 'it\'s \\ a\\b "$(touch CANARY)" `touch CANARY`\nBENCHLAB_SQL\n\\! touch CANARY\r\tend'


def place() -> Path:
    """A directory PostgreSQL's unprivileged OS user can reach."""
    root = Path(tempfile.mkdtemp(prefix="benchlab-reproduce-", dir="/var/tmp"))
    root.chmod(0o755)
    return root


@pytest.fixture(scope="module")
def manifest() -> Iterator[Manifest]:
    """The manifest of a real two-point run (data and WAL apart, a setting, a checkpoint).
    Points of 3 s: under a CI run's load a 1 s point's pgbench once connected too late to
    finish a transaction, and the run failed (pgbench printed no tps)."""
    root = place()
    spec = small_spec(
        settings={"shared_buffers": "48MB"},
        sweep={"duration_s": 3, "between_points": "checkpoint"},
    )
    config = AgentConfig(storage={"data": root / "data", "wal": root / "wal"})
    result, _events = run(spec, config)
    assert result["status"] == "succeeded", result["error"]
    record = {
        "steps": result["steps"],
        "effective": result["settings"]["effective"],
        "storage": result["storage"],
        "facts": result["facts"],
        "agent_version": result.get("agent_version"),
    }
    points = [
        {k: p[k] for k in ("index", "clients", "repeat", "tps", "latency_avg_ms")}
        for p in result["points"]
    ]
    yield make_manifest("42", result["spec"], result["install"] or {}, record, points)
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.cluster  # its manifest is a real run
def test_a_replayed_manifest_runs_the_recorded_commands(manifest, tmp_path):
    root = place()
    manifest_file = tmp_path / "manifest.json"
    manifest_file.write_text(json.dumps(manifest))

    replay = subprocess.run(
        [sys.executable, "-m", "agents", "run", "--manifest", str(manifest_file),
         "--storage", f"data={root / 'data'}", "--storage", f"wal={root / 'wal'}"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    shutil.rmtree(root, ignore_errors=True)

    assert replay.returncode == 0, replay.stderr
    result = json.loads(replay.stdout)
    replayed = [(c["name"], command_shape(c["argv"])) for c in result["steps"]]
    recorded = [(c["name"], command_shape(c["argv"])) for c in manifest["commands"]]
    assert replayed == recorded
    assert [name for name, _ in recorded].count("pgbench") == 2
    assert "commands: same as recorded" in replay.stderr
    assert manifest["agent_version"] and manifest["build"]["digest"]


def test_a_manifest_that_is_none_is_refused_naming_what_is_wrong(tmp_path):
    not_a_manifest = tmp_path / "spec.json"
    not_a_manifest.write_text(json.dumps(small_spec()))

    refused = subprocess.run(
        [sys.executable, "-m", "agents", "run", "--manifest", str(not_a_manifest)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert refused.returncode == 2
    assert 'not a run manifest: expected "kind": "benchlab-run-manifest"' in refused.stderr


@pytest.mark.cluster  # its manifest is a real run
def test_the_reproduce_script_recreates_the_cluster_and_prints_tps_beside_the_recorded(
    manifest,
):
    root = place()
    script = root / "reproduce.sh"
    script.write_text(reproduce_script(manifest))

    replay = subprocess.run(
        ["bash", str(script), str(root / "work")], capture_output=True, text=True, timeout=300
    )
    conf = (root / "work" / "data" / "cluster" / "postgresql.conf").read_text()
    wal_apart = (root / "work" / "data" / "cluster" / "pg_wal").is_symlink()
    shutil.rmtree(root, ignore_errors=True)

    assert replay.returncode == 0, replay.stderr
    rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)$", replay.stdout, re.MULTILINE)
    recorded = [(str(p["clients"]), f"{p['tps']:.2f}") for p in manifest["points"]]
    assert [(clients, before) for clients, _run, before, _now in rows] == recorded
    assert all(float(now) > 0 for *_rest, now in rows)
    assert "shared_buffers = '6144'" in conf
    assert wal_apart


@pytest.mark.cluster  # its manifest is a real run
def test_text_of_the_run_reaches_postgresql_as_it_is_and_psql_runs_no_backslash_command(
    manifest,
):
    hostile = copy.deepcopy(manifest)
    hostile["settings"]["effective"].append(
        {"name": "benchlab.note", "setting": NOTE, "source": "configuration file"}
    )
    hostile["spec"]["dataset"]["setup_sql"] = (
        f"CREATE TABLE note AS SELECT $note${NOTE}$note$ AS body;\n"
        "SELECT count(*) AS same FROM note WHERE body = current_setting('benchlab.note');\n"
        "\\! touch CANARY\n"
    )
    root = place()
    anyone_writes = root / "cwd"  # where psql's \! would touch CANARY as PostgreSQL's OS user
    anyone_writes.mkdir(mode=0o777)
    anyone_writes.chmod(0o777)
    script = root / "reproduce.sh"
    script.write_text(reproduce_script(hostile))

    replay = subprocess.run(
        ["bash", str(script), str(root / "work")],
        cwd=anyone_writes, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    canaries = list(root.rglob("CANARY"))
    shutil.rmtree(root, ignore_errors=True)

    assert not canaries
    assert re.search(r"^ same \n-+\n +1\n", replay.stdout, re.MULTILINE), replay.stdout
    assert replay.returncode != 0
    assert 'syntax error at or near "\\"' in replay.stderr


@pytest.mark.cluster  # its manifest is a real run
def test_without_the_recorded_binaries_the_script_fetches_the_same_release(manifest):
    gone = copy.deepcopy(manifest)
    gone["build"]["install"]["bindir"] = "/nonexistent/postgresql/bin"
    root = place()
    script = root / "reproduce.sh"
    script.write_text(reproduce_script(gone))

    replay = subprocess.run(
        ["bash", str(script), str(root / "work")], capture_output=True, text=True, timeout=600
    )
    shutil.rmtree(root, ignore_errors=True)

    assert replay.returncode == 0, replay.stderr
    version = manifest["build"]["install"]["version"]
    assert f"PostgreSQL: postgres (PostgreSQL) {version} in {root}/work/postgresql/bin" in (
        replay.stderr
    )
    assert len(re.findall(r"^\s+\d+\s+\d+\s+[\d.]+\s+[\d.]+$", replay.stdout, re.MULTILINE)) == 2


def test_a_command_shape_sets_aside_places_and_the_measured_sampling_rate():
    here = ["/a/bin/pgbench", "-c", "4", "-h", "/a/s", "-p", "5432", "--sampling-rate=0.01",
            "--log-prefix=/a/log", "-T", "10", "benchlab"]  # fmt: skip
    there = ["/b/bin/pgbench", "-c", "4", "-h", "/b/s", "-p", "6543",
             "--log-prefix=/b/log", "-T", "10", "benchlab"]  # fmt: skip

    assert command_shape(here) == command_shape(there)
    assert command_shape(here) != command_shape([*there[:-3], "-T", "20", "benchlab"])
