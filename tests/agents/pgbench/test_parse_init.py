"""parse_init_progress on the real `pgbench -i` stderr of 14-18 and the older line forms."""

import pytest

from agents.contract.pgbench_output.init_progress import parse_init_progress
from tests.agents.pgbench.captures import VERSIONS, capture

INIT_SCENARIOS = ["init", "init_server_side", "init_partitioned"]


@pytest.mark.parametrize("scenario", INIT_SCENARIOS)
@pytest.mark.parametrize("label", VERSIONS)
def test_every_init_line_but_server_notices_is_read(label: str, scenario: str) -> None:
    lines = capture(label, scenario).stderr.splitlines()
    for line in lines:
        progress = parse_init_progress(line)
        if line.startswith("NOTICE:"):
            assert progress is None
        else:
            assert progress is not None and progress["message"] == line
    assert parse_init_progress(lines[-1])["percent"] == 100.0


@pytest.mark.parametrize("label", VERSIONS)
def test_done_line_gives_seconds_per_step(label: str) -> None:
    done = capture(label, "init").stderr.splitlines()[-1]
    steps = parse_init_progress(done)["step_seconds"]
    assert set(steps) == {
        "drop tables",
        "create tables",
        "client-side generate",
        "vacuum",
        "primary keys",
        "total",
    }
    assert steps["total"] == float(done.split()[2])
    server_side = capture(label, "init_server_side").stderr.splitlines()[-1]
    assert "server-side generate" in parse_init_progress(server_side)["step_seconds"]


@pytest.mark.parametrize("label", VERSIONS)
def test_tuple_lines_name_the_table(label: str) -> None:
    stderr = capture(label, "init").stderr
    tuples = next(line for line in stderr.splitlines() if " tuples (" in line)
    progress = parse_init_progress(tuples)
    assert progress["table"] == "pgbench_accounts" and progress["percent"] == 100.0
    assert (" of pgbench_accounts done" in tuples) == (label in ("pg17", "pg18"))


def test_terminal_lines_ending_in_carriage_returns_read_their_last_update() -> None:
    line = (
        "100000 of 1000000 tuples (10%) of pgbench_accounts done (elapsed 0.10 s, remaining"
        " 0.90 s)   \r200000 of 1000000 tuples (20%) of pgbench_accounts done (elapsed 0.20 s,"
        " remaining 0.80 s)   \r"
    )
    progress = parse_init_progress(line)
    assert progress["percent"] == 20.0
    assert progress["message"].startswith("200000 of 1000000")


@pytest.mark.parametrize(
    ("line", "percent"),
    [
        ("100000 of 1000000 tuples (10%) done (elapsed 0.12 s, remaining 1.08 s).", 10.0),
        ("150000 of 1000000 tuples (15%) done (elapsed 0.12 s, remaining 1.08 s)", 15.0),
        ("set primary keys...", None),
        ("vacuum...", None),
        ("creating 4 partitions...", None),
        ("done.", 100.0),
    ],
)
def test_older_init_lines(line: str, percent: float | None) -> None:
    assert parse_init_progress(line)["percent"] == percent


@pytest.mark.parametrize("line", ["", "starting vacuum...end.", "progress: 1.0 s, 1.0 tps"])
def test_unrelated_lines_are_none(line: str) -> None:
    assert parse_init_progress(line) is None
