"""parse_output on pgbench 9.2-13 output, which cannot be run here.

pg13 is the summary of a live 13.16 run (fixtures/pg13, fixtures/README.md says where it
comes from); the others are built line by line from the printf formats of each version
range's pgbench.c (docs/pgbench.md says how they differ).
"""

from agents.contract.pgbench_output.parse import parse_output
from tests.agents.pgbench.captures import FIXTURES

OLD_HEADER = """\
scaling factor: 1
query mode: simple
number of clients: 2
number of threads: 2
"""


def test_13_live_summary_reads_excluding_connections_tps() -> None:
    result = parse_output((FIXTURES / "pg13" / "run_default_c4j2_T4_P1_r.stdout").read_text())
    assert result["tps"] == 2608.625984
    assert result["tps_including_connections"] == 2606.902331
    assert (result["latency_avg_ms"], result["latency_stddev_ms"]) == (1.528, 1.089)
    assert (result["scale"], result["clients"], result["threads"]) == (2, 4, 2)
    assert (result["duration_s"], result["transactions"]) == (4, 10438)
    assert result["pgbench_version"] is None and result["failed"] is None
    assert result["initial_connection_ms"] is None


def test_9_3_transaction_count_run_without_latency() -> None:
    text = (
        "starting vacuum...end.\n"
        "transaction type: TPC-B (sort of)\n"
        + OLD_HEADER
        + "number of transactions per client: 10\n"
        "number of transactions actually processed: 19/20\n"
        "tps = 500.123456 (including connections establishing)\n"
        "tps = 510.654321 (excluding connections establishing)\n"
        "Client 1 aborted in state 3: ERROR:  division by zero\n"
    )
    result = parse_output(text)
    assert result["tps"] == 510.654321
    assert result["latency_avg_ms"] is None
    assert (result["transactions"], result["transactions_planned"]) == (19, 20)
    assert result["transactions_per_client"] == 10 and result["duration_s"] is None
    assert result["aborted"] is True
    assert result["errors"] == ["Client 1 aborted in state 3: ERROR:  division by zero"]


def test_9_4_colon_latency_lag_and_forked_progress() -> None:
    text = (
        "transaction type: SELECT only\n" + OLD_HEADER + "duration: 10 s\n"
        "number of transactions actually processed: 1000\n"
        "latency average: 0.500 ms\n"
        "latency stddev: 0.100 ms\n"
        "rate limit schedule lag: avg 0.050 (max 0.900) ms\n"
        "tps = 99.912345 (including connections establishing)\n"
        "tps = 100.012345 (excluding connections establishing)\n"
        "progress: 1.0 s, 100.0 tps, lat 0.500 ms stddev 0.100, lag 0.050 ms\n"
        "progress 1: 2.0 s, 99.0 tps, lat 0.510 ms stddev 0.120, lag 0.060 ms\n"
    )
    result = parse_output(text)
    assert (result["latency_avg_ms"], result["latency_stddev_ms"]) == (0.5, 0.1)
    assert (result["lag_avg_ms"], result["lag_max_ms"]) == (0.05, 0.9)
    assert [p["lag_ms"] for p in result["progress"]] == [0.05, 0.06]
    assert result["progress"][1]["failed"] is None


def test_9_5_skipped_late_and_tab_separated_rows_per_file() -> None:
    text = (
        "transaction type: Custom query\n" + OLD_HEADER + "duration: 10 s\n"
        "number of transactions actually processed: 800\n"
        "number of transactions skipped: 200 (20.000 %)\n"
        "number of transactions above the 5.0 ms latency limit: 3 (0.375 %)\n"
        "latency average: 1.250 ms\n"
        "latency stddev: 0.300 ms\n"
        "rate limit schedule lag: avg 0.050 (max 0.900) ms\n"
        "tps = 79.900000 (including connections establishing)\n"
        "tps = 80.000000 (excluding connections establishing)\n"
        "statement latencies in milliseconds, file 1:\n"
        "\t0.118000\tSELECT 1;\n"
        "statement latencies in milliseconds, file 2:\n"
        "\t0.200000\t\\setrandom aid 1 :naccounts\n"
        "\t0.300000\tSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
        "progress: 1.0 s, 80.0 tps, lat 1.250 ms stddev 0.300, lag 0.050 ms, 20 skipped\n"
    )
    result = parse_output(text)
    assert (result["skipped"], result["late"], result["latency_limit_ms"]) == (200, 3, 5.0)
    assert [(s["script"], s["latency_ms"], s["command"]) for s in result["statements"]] == [
        (1, 0.118, "SELECT 1;"),
        (2, 0.2, "\\setrandom aid 1 :naccounts"),
        (2, 0.3, "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;"),
    ]
    assert result["statements"][0]["failures"] is None
    assert result["progress"][0]["skipped"] == 20


def test_9_6_script_statistics_block_for_a_single_script() -> None:
    text = (
        "transaction type: <builtin: TPC-B (sort of)>\n"
        + OLD_HEADER.replace("simple", "prepared")
        + "number of transactions per client: 100\n"
        "number of transactions actually processed: 200/200\n"
        "latency average = 1.000 ms\n"
        "tps = 900.000000 (including connections establishing)\n"
        "tps = 1000.000000 (excluding connections establishing)\n"
        "script statistics:\n"
        " - statement latencies in milliseconds:\n"
        "         0.002  \\set aid random(1, 100000 * :scale)\n"
        "         0.130  UPDATE pgbench_tellers SET tbalance = tbalance + :delta;\n"
        "client 0 aborted in state 1: ERROR:  division by zero\n"
    )
    result = parse_output(text)
    assert result["query_mode"] == "prepared" and result["tps"] == 1000.0
    assert result["scripts"][0]["number"] == 1 and result["scripts"][0]["name"] is None
    assert [s["latency_ms"] for s in result["statements"]] == [0.002, 0.13]
    assert result["aborted"] is True


def test_10_multiple_scripts_with_skipped_and_rows() -> None:
    text = (
        "transaction type: multiple scripts\n" + OLD_HEADER + "duration: 10 s\n"
        "number of transactions actually processed: 1000\n"
        "number of transactions skipped: 10 (0.990 %)\n"
        "number of transactions above the 5.0 ms latency limit: 3 (0.300 %)\n"
        "latency average = 0.200 ms\n"
        "latency stddev = 0.020 ms\n"
        "rate limit schedule lag: avg 0.010 (max 0.100) ms\n"
        "tps = 99.000000 (including connections establishing)\n"
        "tps = 100.000000 (excluding connections establishing)\n"
        "SQL script 1: <builtin: select only>\n"
        " - weight: 1 (targets 50.0% of total)\n"
        " - 500 transactions (50.0% of total, tps = 50.000000)\n"
        " - number of transactions skipped: 5 (1.000%)\n"
        " - latency average = 0.100 ms\n"
        " - latency stddev = 0.010 ms\n"
        " - statement latencies in milliseconds:\n"
        "         0.098  SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
        "SQL script 2: bench.sql\n"
        " - weight: 1 (targets 50.0% of total)\n"
        " - 500 transactions (50.0% of total, tps = 50.000000)\n"
        " - number of transactions skipped: 5 (1.000%)\n"
        " - latency average = 0.300 ms\n"
        " - latency stddev = 0.030 ms\n"
        " - statement latencies in milliseconds:\n"
        "         0.300  SELECT 1;\n"
        "client 1 aborted in command 0 of script 1; ERROR:  division by zero\n"
    )
    result = parse_output(text)
    assert [(s["name"], s["tps"], s["skipped"]) for s in result["scripts"]] == [
        ("<builtin: select only>", 50.0, 5),
        ("bench.sql", 50.0, 5),
    ]
    assert [(s["script"], s["command"]) for s in result["statements"]] == [
        (1, "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;"),
        (2, "SELECT 1;"),
    ]
    assert result["aborted"] is True


def test_11_late_over_processed_zipfian_and_unprefixed_heading() -> None:
    text = (
        "transaction type: bench.sql\n" + OLD_HEADER + "duration: 10 s\n"
        "number of transactions actually processed: 800\n"
        "zipfian cache array overflowed 7 time(s)\n"
        "number of transactions above the 5.0 ms latency limit: 3/800 (0.375 %)\n"
        "latency average = 1.250 ms\n"
        "latency stddev = 0.300 ms\n"
        "tps = 79.900000 (including connections establishing)\n"
        "tps = 80.000000 (excluding connections establishing)\n"
        "statement latencies in milliseconds:\n"
        "         1.250  SELECT 1;\n"
        "client 0 aborted in command 1 (SQL) of script 0; ERROR:  division by zero\n"
    )
    result = parse_output(text)
    assert (result["late"], result["zipfian_overflows"]) == (3, 7)
    assert result["statements"][0]["script"] == 1
    assert result["aborted"] is True


def test_12_and_13_abort_and_run_aborted_lines() -> None:
    summary = (
        "transaction type: div0.sql\n"
        "scaling factor: 1\n"
        "partition method: hash\n"
        "partitions: 4\n"
        "query mode: simple\nnumber of clients: 1\nnumber of threads: 1\n"
        "number of transactions per client: 10\n"
        "number of transactions actually processed: 0/10\n"
    )
    twelve = parse_output(
        summary + "client 0 script 0 aborted in command 0 query 0: ERROR:  division by zero\n"
        "Run was aborted; the above results are incomplete.\n"
    )
    thirteen = parse_output(
        summary + "pgbench: error: client 0 script 0 aborted in command 0 query 0: "
        "ERROR:  division by zero\n"
        "pgbench: fatal: Run was aborted; the above results are incomplete.\n"
        "progress: 1795316004.216 s, 0.0 tps, lat 0.000 ms stddev 0.000\n"
    )
    for result in (twelve, thirteen):
        assert result["aborted"] is True and len(result["errors"]) == 2
        assert (result["partition_method"], result["partitions"]) == ("hash", 4)
        assert result["failed"] is None and result["tps"] is None
    assert thirteen["progress"][0]["t"] == 1795316004.216


def test_vacuum_errors_on_a_database_without_pgbench_tables_are_recorded() -> None:
    text = (
        'starting vacuum...ERROR:  relation "pgbench_branches" does not exist\n'
        "(ignoring this error and continuing anyway)\n"
        'ERROR:  relation "pgbench_tellers" does not exist\n'
        "(ignoring this error and continuing anyway)\n"
        "end.\n"
        "transaction type: bench.sql\n" + OLD_HEADER + "duration: 2 s\n"
        "number of transactions actually processed: 10\n"
        "latency average = 1.000 ms\n"
        "tps = 5.000000 (including connections establishing)\n"
        "tps = 5.100000 (excluding connections establishing)\n"
    )
    result = parse_output(text)
    assert len(result["errors"]) == 2 and result["aborted"] is False
    assert result["tps"] == 5.1
