"""A point of several pgbench processes, and `-v`, with real PostgreSQL 16 and real pgbench."""

import math
import re

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
        # 5 s: the cut last second, and a process that started late under load, leave out a
        # smaller share of the transactions (15 % of a 3 s point in one CI run).
        sweep={"clients": [1], "duration_s": 5, "warmup_s": 1},
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
    # Both processes in it, neither twice: the kept seconds hold the transactions both ran
    # (all but those of the cut last second, a few percent). A missing process would leave
    # a third or two thirds of them out, a doubled one add as many. Rates are not
    # compared: under the suite's load a point's rate moves by tens of percent from one
    # second to the next, so one second (the middle one 19 % under what both printed in
    # a CI run) or all three (17 % under it in another) may miss the printed tps.
    lines = sum(second["sampled"] for second in point["progress"])
    in_seconds = sum(tps for _, tps in kept)  # each line covers one second
    tolerance = 4 / math.sqrt(lines) + 0.1
    assert abs(in_seconds / point["transactions"] - 1) < tolerance, (
        in_seconds,
        point["transactions"],
    )


def test_vacuum_all_puts_v_on_the_command_line(config):
    result, _events = run(
        small_spec(workload={"vacuum_all": True}, sweep={"clients": [1], "duration_s": 1}), config
    )

    assert result["status"] == "succeeded", result["error"]
    assert "-v" in result["points"][0]["argv"]
