"""A point of several pgbench processes, and `-v`, with real PostgreSQL 16 and real pgbench."""

import math
import re
import statistics

import pytest

from tests.agents.jobs import run, small_spec

TPS_LINE = re.compile(r"^tps = ([\d.]+) \(without initial connection time\)$", re.MULTILINE)
TABLES_SQL = "CREATE TABLE t1 (v int);\nCREATE TABLE t2 (v int);\n"


def insert_into(table: str) -> dict:
    return {"name": f"insert-{table}", "text": f"INSERT INTO {table} VALUES (1);\n", "weight": 1}


@pytest.mark.parametrize("progress", [False, True], ids=["timeline-from-log", "timeline-from-P"])
def test_two_processes_in_one_point_sum_what_each_printed(config, progress: bool):
    spec = small_spec(
        dataset={"scale": 1, "setup_sql": TABLES_SQL},
        workload={
            "processes": [
                {"scripts": [insert_into("t1")], "clients": 1},
                {"scripts": [insert_into("t2")], "clients": 2, "threads": 2},
            ],
            "progress": progress,
        },
        # The warm-up sets the log's sampling rate (a first guess errs low: few lines, late).
        sweep={"clients": [1], "duration_s": 3, "warmup_s": 1},
    )
    result, events = run(spec, config)

    assert result["status"] == "succeeded", result["error"]
    (point,) = result["points"]
    first, second = point["processes"]
    printed = [float(TPS_LINE.search(p["stdout"]).group(1)) for p in (first, second)]
    assert [first["tps"], second["tps"]] == printed
    assert point["tps"] == round(sum(printed), 6)
    assert point["transactions"] == first["transactions"] + second["transactions"]
    assert {"-c", "1"} <= set(first["argv"]) and "-j" in second["argv"]
    assert second["argv"][second["argv"].index("-c") + 1] == "2"
    assert any(arg.endswith("insert-t2.sql@1") for arg in second["argv"])
    assert point["argv"] == first["argv"]
    live = [(s["t"], s["tps"]) for s in (e["data"] for e in events.of_type("progress"))]
    kept = [(s["t"], s["tps"]) for s in point["progress"]]
    assert live, "the summed timeline arrives live"
    if progress:
        assert live == kept
        return
    # From the log: the seconds both processes' logs had passed while they ran, as kept.
    assert live == kept[: len(live)]
    assert [t for t, _ in kept] == [float(n + 1) for n in range(int(point["seconds"]))]
    # Both processes are in the timeline: a process missing throughout would leave each
    # second a third or two thirds short of what both printed, so the best second is
    # checked. Any one second may fall short on a busy machine (an edge second while
    # clients connect; the middle one 19 % short once under three test workers), and
    # what pgbench printed averages those dips in, so no second stands for the run.
    # None counted twice: the seconds' mean is not above what both printed.
    lines = sum(second["sampled"] for second in point["progress"])
    tolerance = 4 / math.sqrt(lines) + 0.1
    best_tps = max(tps for _, tps in kept)
    mean_tps = statistics.mean(tps for _, tps in kept)
    assert best_tps > point["tps"] * (1 - tolerance), "both processes in the timeline"
    assert mean_tps < point["tps"] * (1 + tolerance), "no process counted twice"


def test_vacuum_all_puts_v_on_the_command_line(config):
    result, _events = run(
        small_spec(workload={"vacuum_all": True}, sweep={"clients": [1], "duration_s": 1}), config
    )

    assert result["status"] == "succeeded", result["error"]
    assert "-v" in result["points"][0]["argv"]
