"""The lab's pgbench command against the plain one a user would type."""

from pathlib import Path

import pytest

from agents.contract.spec.document import validate_spec
from agents.pgbench import command

CONN = command.Connection(host="/tmp/socket", port=5432, user="bench", dbname="bench")


def job(**workload) -> dict:
    return validate_spec(
        {
            "version": 1,
            "workload": {
                "scripts": [{"builtin": "select-only"}],
                "query_mode": "prepared",
                **workload,
            },
            "sweep": {"clients": [2], "duration_s": 20},
        }
    )


def argv(spec: dict, major: int = 16, log_args: list[str] | None = None) -> list[str]:
    workload = command.workload_args(Path("/bin/pgbench"), major, spec, 2, 2, {})
    reporting = command.reporting_args(spec["workload"], major)
    return command.run_argv(workload, reporting, log_args or [], CONN)


def test_plain_command_has_nothing_the_lab_adds():
    spec = job()
    workload = command.workload_args(Path("/bin/pgbench"), 16, spec, 2, 2, {})
    assert command.plain_argv(workload, CONN) == [
        "/bin/pgbench", "-c", "2", "-j", "2", "-T", "20", "-M", "prepared",
        "-b", "select-only@1", "-h", "/tmp/socket", "-p", "5432", "-U", "bench", "bench",
    ]  # fmt: skip


def test_lab_command_adds_only_detailed_failures_and_its_log_by_default():
    """No `-P 1`: its timed waits cost about 3 % of select-only tps (the timeline comes
    from the log, agents/pgbench/log_timeline.py); no `-r`."""
    lab = argv(job(), log_args=["-l", "--log-prefix=/state/txlog/x/pgbench_log"])
    assert lab[9:13] == ["-b", "select-only@1", "--failures-detailed", "-l"]
    assert "-r" not in lab and "-P" not in lab


def test_statement_latencies_and_progress_are_options():
    lab = argv(job(progress=True, statement_latencies=True))
    assert "-r" in lab and lab[lab.index("-P") + 1] == "1"


def test_failures_detailed_only_where_pgbench_has_it():
    assert "--failures-detailed" not in argv(job(), major=14)


@pytest.mark.parametrize(
    ("scripts", "expected"),
    [
        ([{"builtin": "select-only"}], ["-S"]),
        ([{"builtin": "simple-update"}], ["-N"]),
        ([{"builtin": "tpcb-like"}], []),
        ([{"name": "join", "text": "SELECT 1;"}], ["-f", "/tmp/join.sql"]),
    ],
)
def test_pgbench_before_9_6_gets_its_one_script_without_b_or_weight(scripts, expected):
    spec = job(scripts=scripts)
    paths = {0: Path("/tmp/join.sql")}
    workload = command.workload_args(
        Path("/bin/pgbench"), 9, spec, 2, 2, paths, weighted_scripts=False
    )
    assert workload[len(workload) - len(expected) :] == expected
    assert "-b" not in workload and not any("@" in part for part in workload)
    assert workload[workload.index("prepared") + 1 :] in (expected, ["-s", "1", *expected])
