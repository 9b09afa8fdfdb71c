"""Lines the parser does not know never cost a point its numbers (real captures of 14-18).

The captures (scripts/capture_pgbench_fixtures.py) are runs whose stderr a
strict reader could not read: threads interleaving their messages mid-line
(repeatable read at -c 8 -j 4 with --verbose-errors), clients aborting on a
script's errors, a server stopped with `pg_ctl stop -m immediate`, a backend
killed (crash and restart), and a killed postmaster under -C, whose
connection errors continue on lines starting with a tab.
"""

import json

import pytest

from agents.__main__ import main as agents_main
from agents.contract.pgbench_output.parse import PgbenchParseError, parse_output
from tests.agents.pgbench.captures import VERSIONS, all_captures, capture

FROM_15 = ["pg15", "pg16", "pg17", "pg18"]
DISTURBED = [
    "run_server_stopped_immediate_T5_P1_r",
    "run_backend_killed_T5_P1_r",
    "run_reconnect_postmaster_killed_C_T5_P1",
    "run_err_sometimes_div0_c8j4_T3_P1_r",
]


def printed(stdout: str, prefix: str) -> str:
    """The value pgbench printed after `prefix` (first word of the rest of the line)."""
    line = next(line for line in stdout.splitlines() if line.startswith(prefix))
    return line[len(prefix) :].split()[0]


def accounted_lines(result: dict) -> int:
    kept = ("progress", "errors", "notices", "messages")
    return sum(len(result[key]) for key in kept)


@pytest.mark.parametrize("label", FROM_15)
def test_interleaved_thread_messages_keep_the_numbers(label: str) -> None:
    run = capture(label, "run_repeatable_read_c8j4_maxtries3_verbose_errors_T3_P1_r")
    stderr_lines = run.stderr.splitlines()
    interleaved = [line for line in stderr_lines if not line.startswith(("pgbench: c", "progress"))]
    assert any(
        line.startswith(("pgbench:pgbench", "pgbench: pgbench", " ")) for line in interleaved
    )

    result = parse_output(run.text)

    assert result["tps"] == float(printed(run.stdout, "tps = "))
    processed = printed(run.stdout, "number of transactions actually processed: ")
    assert result["transactions"] == int(processed)
    assert result["failed"] == int(printed(run.stdout, "number of failed transactions: "))
    assert result["retried"] == int(printed(run.stdout, "number of transactions retried: "))
    assert result["aborted"] is False and result["errors"] == []
    assert result["messages"], "the interleaved fragments are kept"
    assert set(result["messages"]) <= set(stderr_lines)
    assert accounted_lines(result) == len([line for line in stderr_lines if line.strip()])


@pytest.mark.parametrize("scenario", DISTURBED)
@pytest.mark.parametrize("label", VERSIONS)
def test_aborted_runs_keep_the_summary_and_every_stderr_line(label: str, scenario: str) -> None:
    run = capture(label, scenario)

    result = parse_output(run.text)

    assert run.exit_code == 2
    assert result["aborted"] is True
    assert result["tps"] == float(printed(run.stdout, "tps = ")) > 0
    assert result["transactions"] == int(
        printed(run.stdout, "number of transactions actually processed: ")
    )
    assert result["latency_avg_ms"] == float(printed(run.stdout, "latency average = "))
    assert any("Run was aborted" in line for line in result["errors"])
    stderr_lines = [line for line in run.stderr.splitlines() if line.strip()]
    vacuum = sum(line.startswith("starting vacuum") for line in stderr_lines)
    assert accounted_lines(result) + vacuum == len(stderr_lines)


@pytest.mark.parametrize("label", VERSIONS)
def test_multi_line_connection_errors_keep_their_tab_lines(label: str) -> None:
    run = capture(label, "run_reconnect_postmaster_killed_C_T5_P1")
    tab_lines = [line for line in run.stderr.splitlines() if line.startswith("\t")]
    assert tab_lines, "a connection error continues on lines starting with a tab"

    result = parse_output(run.text)

    assert set(tab_lines) <= set(result["messages"] + result["notices"])
    assert result["average_connection_ms"] > 0


def test_lines_of_a_future_release_are_messages() -> None:
    run = capture("pg18", "run_plain_T2_P1_r")
    stdout = run.stdout.replace(
        "latency average = ", "number of transactions frobnicated: 3 (0.01%)\nlatency average = "
    )
    stderr = "threads took 3 ms to start: a wording no release has printed yet\n" + run.stderr

    result = parse_output(stdout + stderr)

    assert result == {
        **parse_output(run.text),
        "messages": [
            "number of transactions frobnicated: 3 (0.01%)",
            "threads took 3 ms to start: a wording no release has printed yet",
        ],
    }


def test_a_known_summary_line_that_does_not_read_is_still_an_error() -> None:
    stdout = capture("pg16", "run_plain_T2_P1_r").stdout.replace("tps = ", "tps = many ")
    with pytest.raises(PgbenchParseError, match='cannot read "tps = many'):
        parse_output(stdout)


def test_a_malformed_row_inside_the_statement_block_is_still_an_error() -> None:
    stdout = capture("pg16", "run_plain_T2_P1_r").stdout + "         0.010  x  END;\n"
    with pytest.raises(PgbenchParseError, match='cannot read "         0.010  x  END;'):
        parse_output(stdout)


def test_a_per_script_line_that_does_not_read_is_an_error() -> None:
    stdout = capture("pg16", "run_builtin_weights_P1_r").stdout.replace(
        " - latency average = ", " - latency average = ?", 1
    )
    with pytest.raises(PgbenchParseError, match="latency average = \\?"):
        parse_output(stdout)


@pytest.mark.parametrize(("label", "scenario"), all_captures("run_"))
def test_the_cli_reads_every_captured_run(label: str, scenario: str, tmp_path, capsys) -> None:
    run = capture(label, scenario)
    capture_file = tmp_path / f"{label}-{scenario}.txt"
    capture_file.write_text(run.text)

    exit_code = agents_main(["parse", str(capture_file)])

    out, err = capsys.readouterr()
    if scenario == "run_err_div0_exit_on_abort":
        assert exit_code == 2 and "no pgbench summary" in err
        return
    assert exit_code == 0, err
    assert json.loads(out)["transactions"] is not None


def test_every_version_has_the_disturbed_captures() -> None:
    captured = set(all_captures("run_"))
    assert {(label, scenario) for label in VERSIONS for scenario in DISTURBED} <= captured
