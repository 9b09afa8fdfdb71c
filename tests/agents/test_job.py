"""The job runner end to end: real PostgreSQL 16 (prebuilt), real pgbench, real samplers."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from agents.postgres import settings as pg_settings
from tests.agents.jobs import run, small_spec
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
TPS_LINE = re.compile(r"^tps = ([\d.]+) \(without initial connection time\)$", re.MULTILINE)


def processes_mentioning(root: Path) -> list[str]:
    """Command lines of live processes that name a path under `root` (zombies read as empty)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if process.info["status"] != psutil.STATUS_ZOMBIE and str(root) in cmdline:
            found.append(cmdline)
    return found


def leftovers(root: Path) -> list[Path]:
    return [path for path in root.rglob("benchlab-*")]


def test_sweep_reports_the_tps_pgbench_printed(config, storage_root):
    spec = small_spec(settings={"shared_buffers": "64MB"}, sweep={"repeats": 2})
    result, events = run(spec, config)

    assert result["status"] == "succeeded", result["error"]
    assert [(p["clients"], p["repeat"]) for p in result["points"]] == [
        (1, 1),
        (1, 2),
        (2, 1),
        (2, 2),
    ]
    for point in result["points"]:
        printed = float(TPS_LINE.search(point["stdout"]).group(1))
        assert point["tps"] == printed
        assert point["argv"][0].endswith("/pgbench")
        assert "-l" in point["argv"] and not {"-P", "-r"} & set(point["argv"])
        percentiles = point["latency_percentiles_ms"]
        assert 0 < percentiles["sampled_transactions"] <= point["transactions"]
        assert len(point["progress"]) == int(point["seconds"]), "one line per whole second"
        assert point["host_samples"] and point["server_samples"]
    effective = {row["name"]: row for row in result["settings"]["effective"]}
    assert effective["shared_buffers"]["setting"] == "8192"
    assert result["storage"]["wal"]["path"] == str(storage_root / "wal")
    assert any(step["name"] == "initdb" and "--waldir" in step["argv"] for step in result["steps"])
    assert len(events.of_type("point")) == 4
    assert events.of_type("progress"), "progress events arrive while pgbench runs"
    assert [e["seq"] for e in events.events] == list(range(1, len(events.events) + 1))
    assert events.events[-1]["type"] == "result"
    assert leftovers(storage_root) == []


@pytest.mark.parametrize(
    ("settings", "code", "field"),
    [
        ({"shared_bufers": "64MB"}, "unknown_setting", "settings.shared_bufers"),
        ({"work_mem": "lots"}, "invalid_setting_value", "settings.work_mem"),
        ({"shared_buffers": "1PB"}, "invalid_setting_value", "settings.shared_buffers"),
        ({"archive_command": "rm -rf /"}, "refused_setting", "settings.archive_command"),
    ],
)
def test_bad_settings_fail_before_anything_is_measured(config, storage_root, settings, code, field):
    result, events = run(small_spec(settings=settings), config)

    assert result["status"] == "failed"
    assert result["error"]["code"] == code
    assert result["error"]["field"] == field
    assert result["error"]["category"] == "user"
    assert result["points"] == []
    assert not any(step["name"] == "pgbench_init" for step in result["steps"])
    assert leftovers(storage_root) == []


def test_refused_setting_is_refused_before_provisioning(config):
    result, events = run(small_spec(settings={"shared_preload_libraries": "x"}), config)

    assert result["error"]["code"] == "refused_setting"
    assert result["install"] is None
    assert result["steps"] == []


def test_refused_setting_passes_when_the_agent_allows_it(config):
    config.allow_settings = {"archive_command"}
    result, _ = run(
        small_spec(settings={"archive_command": "/bin/true"}, sweep={"clients": [1]}), config
    )

    assert result["status"] == "succeeded", result["error"]


def test_an_unknown_storage_target_is_refused_naming_the_targets_there_are(config):
    result, _ = run(small_spec(storage={"wal": "fast"}), config)

    assert (result["error"]["code"], result["error"]["field"]) == ("storage_unknown", "storage.wal")
    message = result["error"]["message"]
    assert "it has data, default, wal (add one with --storage fast=PATH)" in message
    assert result["install"] is None


def test_shell_script_is_refused_before_provisioning(config):
    script = {"name": "evil", "text": "\\shell touch /tmp/owned\nSELECT 1;\n", "weight": 1}
    result, _ = run(small_spec(workload={"scripts": [script]}), config)

    assert result["error"]["code"] == "refused_script"
    assert result["error"]["field"] == "workload.scripts[0].text"
    assert result["install"] is None


def test_missing_version_names_what_is_available(config):
    result, _ = run(small_spec(postgres={"version": "13", "source": "prebuilt"}), config)

    assert result["error"]["code"] == "version_unavailable"
    assert result["error"]["field"] == "postgres.version"
    assert "16.15" in result["error"]["message"]


def test_plpgsql_setup_sql_and_custom_script_run_without_superuser_rights(config):
    setup = (
        "CREATE TABLE kv (id int PRIMARY KEY, v int);"
        "CREATE FUNCTION bump(i int) RETURNS void LANGUAGE plpgsql AS $$ BEGIN "
        "UPDATE kv SET v = v + 1 WHERE id = i; IF NOT FOUND THEN INSERT INTO kv VALUES (i, 1) "
        "ON CONFLICT (id) DO UPDATE SET v = kv.v + 1; END IF; END $$;"
    )
    script = {"name": "bump", "text": "\\set id random(1, 1000)\nSELECT bump(:id);\n", "weight": 1}
    spec = small_spec(
        dataset={"setup_sql": setup},
        workload={
            "scripts": [script],
            "query_mode": "prepared",
            "no_vacuum": True,
            "statement_latencies": True,
        },
        sweep={"clients": [2]},
    )
    result, _ = run(spec, config)

    assert result["status"] == "succeeded", result["error"]
    commands = [statement["command"] for statement in result["points"][0]["statements"]]
    assert any("SELECT bump(:id);" in command for command in commands)
    assert "setup_sql_seconds" in result["dataset"]
    assert result["dataset"]["workload"]["user"] == "benchlab_workload"
    assert result["dataset"]["workload"]["superuser"] is False


def postmaster_of(data_dir: Path) -> int:
    """The pid of the postmaster serving `data_dir` as this process sees it (postmaster.pid
    holds the pid it has in its sandbox's namespace)."""
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if cmdline[1:3] == ["-D", str(data_dir)] and cmdline[0].endswith("/postgres"):
            return process.pid
    raise AssertionError(f"no postmaster serves {data_dir}")


def test_server_killed_mid_sweep_keeps_finished_points(config, storage_root):
    def kill_server_during_second_point(event):
        if event["type"] == "progress" and event["data"]["point"] == 1:
            data_dir = next(storage_root.glob("data/benchlab-*/data"))
            os.kill(postmaster_of(data_dir), signal.SIGKILL)

    spec = small_spec(sweep={"clients": [1, 2, 4], "duration_s": 3})
    result, _ = run(spec, config, hook=kill_server_during_second_point)

    assert result["status"] == "failed"
    assert result["error"]["code"] == "server_died"
    assert [point["clients"] for point in result["points"]] == [1]
    assert result["points"][0]["tps"] > 0
    assert result["server_log_tail"]
    assert leftovers(storage_root) == []


def test_cancel_mid_sweep_keeps_finished_points(config, storage_root):
    progress_of_second_point = []

    def watch(event):
        if event["type"] == "progress" and event["data"]["point"] == 1:
            progress_of_second_point.append(event)

    spec = small_spec(sweep={"clients": [1, 2, 4], "duration_s": 4})
    result, _ = run(spec, config, hook=watch, should_cancel=lambda: bool(progress_of_second_point))

    assert result["status"] == "cancelled"
    assert result["error"]["category"] == "cancelled"
    assert [point["clients"] for point in result["points"]] == [1]
    assert leftovers(storage_root) == []


def test_ctrl_c_on_the_cli_cleans_up_everything(storage_root, tmp_path):
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(small_spec(run_id="ctrlc", sweep={"duration_s": 30})))
    cli = subprocess.Popen(
        [sys.executable, "-m", "agents", "run", str(spec_file), "--json-events",
         "--storage", f"data={storage_root / 'data'}", "--storage", f"wal={storage_root / 'wal'}"],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    for line in cli.stdout:
        if json.loads(line)["type"] == "progress":
            break
    running_before = processes_mentioning(storage_root)
    cli.send_signal(signal.SIGINT)
    events = [json.loads(line) for line in cli.stdout]
    assert cli.wait(timeout=60) == 1

    result = events[-1]["data"]
    assert result["status"] == "cancelled"
    assert leftovers(storage_root) == []
    # pgbench and the postmaster's children end after the agent reaped what it started.
    wait_for(lambda: processes_mentioning(storage_root) == [], 10, "no process under the root")
    assert running_before, "the cluster and pgbench were running before Ctrl-C"


def test_an_unreadable_cached_catalogue_is_read_again_from_the_server(config):
    result, _ = run(small_spec(sweep={"clients": [1]}), config)
    cached = pg_settings.catalogue_path(config.cache_dir, result["install"]["version"])
    cached.write_text("{not json")

    result, _ = run(small_spec(settings={"work_mem": "8MB"}, sweep={"clients": [1]}), config)

    assert result["status"] == "succeeded", result["error"]
    assert pg_settings.read_cached_catalogue(cached) is not None
