"""parse_output on real captures of pgbench 14-18, and on the 9.2-13 line formats of the notes."""

import math
import re

import pytest

from agents.contract.pgbench_output.parse import PgbenchParseError, parse_output
from tests.agents.pgbench.captures import CAPTURED, VERSIONS, all_captures, capture

RUNS = [case for case in all_captures() if not case[1].startswith("init")]
READABLE_RUNS = [case for case in RUNS if case[1] != "run_err_div0_exit_on_abort"]


def line_value(text: str, prefix: str) -> str | None:
    """What follows `prefix` on the first line starting with it."""
    for line in text.splitlines():
        if line.startswith(prefix):
            return line[len(prefix) :]
    return None


@pytest.mark.parametrize(("label", "scenario"), READABLE_RUNS)
def test_every_capture_reads_as_the_file_says(label: str, scenario: str) -> None:
    run = capture(label, scenario)
    result = parse_output(run.text)

    tps_line = line_value(run.stdout, "tps = ")
    assert result["tps"] == (float(tps_line.split()[0]) if tps_line else None)
    processed = line_value(run.stdout, "number of transactions actually processed: ")
    assert result["transactions"] == int(processed.split("/")[0])
    latency = line_value(run.stdout, "latency average = ")
    assert result["latency_avg_ms"] == (float(latency.split()[0]) if latency else None)
    assert len(result["progress"]) == run.stderr.count("progress: ")
    rows = [line for line in run.stdout.splitlines() if re.match(r" {3,}\d+\.\d{3} ", line)]
    assert [s["latency_ms"] for s in result["statements"]] == [float(r.split()[0]) for r in rows]
    assert result["clients"] == int(run.argv[run.argv.index("-c") + 1])
    assert result["aborted"] == (run.exit_code == 2)


@pytest.mark.parametrize("label", VERSIONS)
def test_plain_run_reads_summary_statements_and_progress(label: str) -> None:
    run = capture(label, "run_plain_T2_P1_r")
    result = parse_output(run.text)

    assert result["pgbench_version"] is not None
    assert result["server_version"] == result["pgbench_version"]
    assert result["transaction_type"] == "<builtin: TPC-B (sort of)>"
    assert (result["scale"], result["query_mode"]) == (1, "simple")
    assert (result["clients"], result["threads"], result["duration_s"]) == (2, 2, 2)
    assert result["transactions_per_client"] is None
    assert result["latency_stddev_ms"] is not None
    assert result["initial_connection_ms"] > 0
    assert result["tps_including_connections"] is None
    assert [s["command"] for s in result["statements"]][-1] == "END;"
    assert [s["command"] for s in result["statements"]][4] == "BEGIN;"
    assert all(s["script"] == 1 for s in result["statements"])
    assert result["progress"][0]["t"] == 1.0
    assert result["aborted"] is False
    assert result["errors"] == []


def test_failure_columns_appear_from_15() -> None:
    old = parse_output(capture("pg14", "run_plain_T2_P1_r").text)
    assert (old["failed"], old["max_tries"], old["statements"][0]["failures"]) == (None, None, None)
    assert old["progress"][0]["failed"] is None
    for label in ["pg15", "pg16", "pg17", "pg18"]:
        new = parse_output(capture(label, "run_plain_T2_P1_r").text)
        assert (new["failed"], new["max_tries"]) == (0, 1)
        assert {s["failures"] for s in new["statements"]} == {0}
        assert {s["retries"] for s in new["statements"]} == {None}
        assert new["progress"][0]["failed"] == 0


def test_18_separates_command_from_counts_by_one_space() -> None:
    seventeen = parse_output(capture("pg17", "run_plain_T2_P1_r").text)
    eighteen = parse_output(capture("pg18", "run_plain_T2_P1_r").text)
    assert "0 END;" in capture("pg18", "run_plain_T2_P1_r").stdout
    commands = [s["command"] for s in eighteen["statements"]]
    assert commands == [s["command"] for s in seventeen["statements"]]


def test_debian_client_header_names_vendor_version_and_server() -> None:
    result = parse_output(capture("pg15_debian_client", "run_plain_T2_P1_r").text)
    assert re.fullmatch(r"15\.\d+ \(Debian .+\)", result["pgbench_version"])
    assert result["server_version"] == "15.19"


@pytest.mark.parametrize("label", VERSIONS)
def test_transaction_count_run_has_no_duration(label: str) -> None:
    result = parse_output(capture(label, "run_t200").text)
    assert result["duration_s"] is None
    assert result["transactions_per_client"] == 200
    assert result["transactions"] == result["transactions_planned"] == 400
    assert result["latency_stddev_ms"] is None


@pytest.mark.parametrize("label", VERSIONS)
def test_weighted_builtin_scripts_give_one_block_each(label: str) -> None:
    result = parse_output(capture(label, "run_builtin_weights_P1_r").text)
    first, second = result["scripts"]
    assert result["transaction_type"] == "multiple scripts"
    assert (first["number"], first["name"], first["weight"]) == (1, "<builtin: select only>", 9)
    assert (second["name"], second["weight"], second["weight_percent"]) == (
        "<builtin: simple update>",
        1,
        10.0,
    )
    assert first["tps"] > second["tps"] > 0
    assert first["latency_avg_ms"] > 0 and second["latency_stddev_ms"] > 0
    assert [s["script"] for s in result["statements"]] == [1] * 2 + [2] * 9
    if label == "pg18":
        assert first["processed"] <= first["transactions"]
    else:
        assert first["processed"] is None
    if label != "pg14":
        assert first["failed"] == second["failed"] == 0


@pytest.mark.parametrize("label", VERSIONS)
def test_custom_script_rows_keep_first_line_of_multiline_command(label: str) -> None:
    result = parse_output(capture(label, "run_custom_script_r").text)
    assert result["transaction_type"] == "custom.sql"
    commands = [s["command"] for s in result["statements"]]
    assert commands[0] == r"\set aid random(1, 100000 * :scale)"
    assert commands[4] == "SELECT abalance"


@pytest.mark.parametrize("label", VERSIONS)
def test_custom_and_builtin_scripts_in_prepared_mode(label: str) -> None:
    result = parse_output(capture(label, "run_custom_and_builtin_prepared_t100_r").text)
    assert result["query_mode"] == "prepared"
    assert [(s["name"], s["weight"]) for s in result["scripts"]] == [
        ("custom.sql", 2),
        ("<builtin: TPC-B (sort of)>", 1),
    ]
    assert [s["script"] for s in result["statements"]] == [1] * 6 + [2] * 11


@pytest.mark.parametrize("label", VERSIONS)
def test_rate_limit_with_latency_limit_reports_skipped_late_and_lag(label: str) -> None:
    result = parse_output(capture(label, "run_rate_R20000_L1_P1").text)
    assert result["skipped"] > 0
    assert 0 < result["late"] <= result["transactions"]
    assert result["latency_limit_ms"] == 1.0
    assert 0 < result["lag_avg_ms"] <= result["lag_max_ms"]
    assert all(p["skipped"] > 0 and p["lag_ms"] > 0 for p in result["progress"])


@pytest.mark.parametrize("label", VERSIONS)
def test_latency_limit_alone_counts_late_not_skipped(label: str) -> None:
    result = parse_output(capture(label, "run_latency_limit_L05").text)
    assert result["latency_limit_ms"] == 0.5
    assert result["late"] is not None and result["skipped"] is None


@pytest.mark.parametrize("label", VERSIONS)
def test_reconnecting_run_reports_tps_including_reconnection_times(label: str) -> None:
    run = capture(label, "run_connect_C")
    result = parse_output(run.text)
    assert f"tps = {result['tps']:f} (including reconnection times)" in run.stdout
    assert result["average_connection_ms"] > 0
    assert result["initial_connection_ms"] is None


@pytest.mark.parametrize("label", VERSIONS)
def test_progress_timestamp_gives_epoch_seconds(label: str) -> None:
    result = parse_output(capture(label, "run_progress_timestamp").text)
    assert all(p["t"] > 1.7e9 for p in result["progress"])


@pytest.mark.parametrize("label", VERSIONS)
def test_partitioned_accounts_are_reported(label: str) -> None:
    result = parse_output(capture(label, "run_partitioned_t50").text)
    assert (result["partition_method"], result["partitions"]) == ("range", 2)


def test_serialization_error_aborts_clients_in_14() -> None:
    run = capture("pg14", "run_serialization_P1_r")
    result = parse_output(run.text)
    assert result["aborted"] is True
    assert any("could not serialize access" in line for line in result["errors"])
    assert result["failed"] is None and result["tps"] > 0


@pytest.mark.parametrize("label", ["pg15", "pg16", "pg17", "pg18"])
def test_serialization_failures_are_counted_from_15(label: str) -> None:
    result = parse_output(capture(label, "run_serialization_P1_r").text)
    assert result["failed"] > 0 and result["aborted"] is False
    assert sum(s["failures"] for s in result["statements"]) == result["failed"]
    assert result["retried"] is None and result["serialization_failures"] is None


@pytest.mark.parametrize("label", ["pg15", "pg15_debian_client", "pg16", "pg17", "pg18"])
def test_retries_and_detailed_failures_add_up(label: str) -> None:
    result = parse_output(capture(label, "run_serialization_maxtries3_detailed_P1_r").text)
    assert result["max_tries"] == 3
    assert result["serialization_failures"] + result["deadlock_failures"] == result["failed"]
    assert sum(s["failures"] for s in result["statements"]) == result["failed"]
    # Rows also count the retries of transactions cut off by the end of -T (max_tries - 1 each).
    unfinished = sum(s["retries"] for s in result["statements"]) - result["retries"]
    assert 0 <= unfinished <= result["clients"] * (result["max_tries"] - 1)
    assert 0 < result["retried"] <= result["retries"]
    assert all(
        p["retried"] is not None and p["retries"] >= p["retried"] for p in result["progress"]
    )


@pytest.mark.parametrize("label", ["pg15", "pg16", "pg17", "pg18"])
def test_verbose_errors_are_notices_even_when_threads_interleave(label: str) -> None:
    run = capture(label, "run_serialization_maxtries2_verbose_errors_t20")
    result = parse_output(run.text)
    assert len(result["notices"]) == len(run.stderr.splitlines())
    assert result["aborted"] is False and result["errors"] == []


@pytest.mark.parametrize("label", VERSIONS)
def test_all_clients_aborting_leaves_no_tps(label: str) -> None:
    result = parse_output(capture(label, "run_err_div0").text)
    assert result["aborted"] is True
    assert (result["transactions"], result["tps"], result["latency_avg_ms"]) == (0, None, None)
    assert sum("division by zero" in line for line in result["errors"]) == 2
    assert any("Run was aborted" in line for line in result["errors"])


def test_18_prints_no_failed_line_when_nothing_ran_yet_failed_is_known_zero() -> None:
    run = capture("pg18", "run_err_div0")
    assert "number of failed transactions" not in run.stdout
    assert parse_output(run.text)["failed"] == 0
    assert "number of failed transactions: 0 (NaN%)" in capture("pg17", "run_err_div0").stdout


@pytest.mark.parametrize("label", ["pg17", "pg18"])
def test_exit_on_abort_output_has_no_summary_and_is_an_error(label: str) -> None:
    with pytest.raises(PgbenchParseError, match="Run was aborted due to an error in thread"):
        parse_output(capture(label, "run_err_div0_exit_on_abort").text)


@pytest.mark.parametrize("label", VERSIONS)
def test_terminated_backend_keeps_the_summary_and_marks_the_run_aborted(label: str) -> None:
    result = parse_output(capture(label, "run_err_backend_terminated").text)
    assert result["aborted"] is True and result["tps"] > 0
    assert any("terminating connection" in line for line in result["errors"])


def test_stream_order_does_not_matter() -> None:
    run = capture("pg16", "run_err_backend_terminated")
    together = parse_output(run.stdout + run.stderr)
    stderr_first = parse_output(run.stderr + run.stdout)
    assert stderr_first == together
    out, err = run.stdout.splitlines(), run.stderr.splitlines()
    woven = [line for pair in zip(out, err, strict=False) for line in pair]
    woven += out[len(err) :] + err[len(out) :]
    assert parse_output("\n".join(woven)) == together


def test_carriage_return_line_ends_are_accepted() -> None:
    run = capture("pg16", "run_plain_T2_P1_r")
    assert parse_output(run.text.replace("\n", "\r\n")) == parse_output(run.text)


def test_a_bad_value_names_the_line() -> None:
    text = capture("pg16", "run_plain_T2_P1_r").stdout.replace(
        "latency average = ", "latency average = abc ms", 1
    )
    with pytest.raises(PgbenchParseError) as caught:
        parse_output(text)
    line_no = text.splitlines().index(caught.value.line) + 1
    assert caught.value.line_no == line_no
    assert str(caught.value).startswith(f'line {line_no}: cannot read "latency average = abc ms')


def test_unknown_line_inside_statement_block_is_an_error() -> None:
    text = capture("pg16", "run_plain_T2_P1_r").stdout + "         0.010  oops  extra\n"
    with pytest.raises(PgbenchParseError, match='line 27: cannot read "         0.010  oops'):
        parse_output(text)


@pytest.mark.parametrize("text", ["", "hello world\n", "NOTICE:  something\n"])
def test_text_without_summary_or_progress_is_an_error(text: str) -> None:
    with pytest.raises(PgbenchParseError):
        parse_output(text)


def test_progress_alone_is_enough() -> None:
    result = parse_output("progress: 1.0 s, 2980.8 tps, lat 1.329 ms stddev 1.565\n")
    assert result["progress"] == [
        {
            "t": 1.0,
            "tps": 2980.8,
            "latency_ms": 1.329,
            "stddev_ms": 1.565,
            "failed": None,
            "lag_ms": None,
            "skipped": None,
            "retried": None,
            "retries": None,
        }
    ]
    assert result["tps"] is None


def test_nan_percentages_and_empty_intervals() -> None:
    result = parse_output(capture("pg15", "run_err_div0").stdout)
    assert result["failed"] == 0
    zero = parse_output("progress: 2.0 s, 0.0 tps, lat 0.000 ms stddev 0.000, 0 failed\n")
    assert zero["progress"][0]["tps"] == 0.0
    nan = parse_output("progress: 1.0 s, 0.0 tps, lat nan ms stddev -nan\n")
    assert math.isnan(nan["progress"][0]["stddev_ms"])


def test_every_captured_label_is_tested() -> None:
    assert {label for label, _ in RUNS} == set(CAPTURED)
