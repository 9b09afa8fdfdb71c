"""How a point's transaction log is planned, placed and summarised."""

import os
import time
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

from agents.contract.errors import JobError
from agents.contract.reports.latency import describe_percentiles
from agents.pgbench.latency_log import (
    FIRST_GUESS_TPS_PER_CPU,
    MIN_LOGGED_TRANSACTIONS,
    STALE_AFTER_S,
    TARGET_LOG_LINES_PER_S,
    ExpectedThroughput,
    LogPlan,
    Measured,
    _write_owner,
    expected_throughput,
    log_root,
    point_transactions,
    remove_dead_job_logs,
    remove_stale_logs,
    sampling_rate_for,
)
from tests.agents.pgbench.captures import capture


def test_first_point_without_measurement_guesses_high_for_a_small_sample() -> None:
    expected = expected_throughput(clients=8, measured=None, rate_tps=None, cpu_count=4)
    assert expected == ExpectedThroughput(4 * FIRST_GUESS_TPS_PER_CPU, "first_guess")


def test_measured_throughput_scales_up_with_clients_never_down() -> None:
    warmup = Measured(clients=2, tps=20_000.0, source="warmup")
    assert expected_throughput(8, warmup, None, 2) == ExpectedThroughput(80_000.0, "warmup")
    previous = Measured(clients=16, tps=30_000.0, source="previous_point")
    assert expected_throughput(4, previous, None, 2).tps == 30_000.0


def test_rate_limit_caps_the_expected_throughput() -> None:
    measured = Measured(clients=2, tps=20_000.0, source="warmup")
    assert expected_throughput(2, measured, 500.0, 2) == ExpectedThroughput(500.0, "rate_limit")
    assert expected_throughput(2, measured, 90_000.0, 2).source == "warmup"


@pytest.mark.parametrize(
    ("tps", "rate"), [(150_000.0, 0.0033), (26_000.0, 0.019), (2_000.0, 0.25), (400.0, 1.0)]
)
def test_sampling_rate_keeps_the_log_near_its_target(tps: float, rate: float) -> None:
    assert sampling_rate_for(tps) == rate
    assert tps * rate <= TARGET_LOG_LINES_PER_S * 1.05 or rate == 1.0


@pytest.mark.parametrize(
    ("tps", "duration_s"), [(708.0, 10), (708.0, 3), (150_000.0, 1), (2_000.0, 2), (50.0, 10)]
)
def test_sample_of_a_point_at_its_expected_tps_holds_four_times_the_minimum(
    tps: float, duration_s: int
) -> None:
    transactions = point_transactions(tps, duration_s, None, clients=4)
    assert transactions == tps * duration_s
    rate = sampling_rate_for(tps, transactions)
    logged = rate * transactions
    assert logged >= min(4 * MIN_LOGGED_TRANSACTIONS * 0.95, transactions)
    assert rate == 1.0 or logged / duration_s <= max(
        TARGET_LOG_LINES_PER_S * 1.05, 4.2 * MIN_LOGGED_TRANSACTIONS / duration_s
    )


def test_transaction_count_points_plan_on_their_exact_count() -> None:
    assert point_transactions(708.0, None, 300, clients=2) == 600.0
    assert sampling_rate_for(708.0, 600.0) == 1.0, "fewer than the minimum: every one logged"
    assert sampling_rate_for(708.0, 100_000.0) == 0.71
    assert sampling_rate_for(708.0, 5_000.0) == 0.8
    assert point_transactions(708.0, None, None, clients=2) is None


def test_first_guess_of_the_old_kind_would_have_logged_too_few() -> None:
    """The case that made the rate measured: 708 tps planned at the first guess logs a few
    dozen lines in 10 s; planned at the measured tps it logs thousands."""
    guessed = FIRST_GUESS_TPS_PER_CPU * 2
    assert sampling_rate_for(guessed) * 708 * 10 < 100
    assert sampling_rate_for(708.0, 7080.0) * 7080 >= 4 * MIN_LOGGED_TRANSACTIONS


def test_sampled_plan_passes_its_rate_to_pgbench(tmp_path: Path) -> None:
    plan = LogPlan.for_point("sampled", ExpectedThroughput(25_000.0, "warmup"))
    assert plan.args(tmp_path / "log") == [
        "-l",
        f"--log-prefix={tmp_path / 'log'}",
        "--sampling-rate=0.02",
    ]
    assert plan.source == "sample"


def test_sample_of_every_transaction_is_a_full_log(tmp_path: Path) -> None:
    plan = LogPlan.for_point("sampled", ExpectedThroughput(300.0, "previous_point"))
    assert plan.sampling_rate == 1.0
    assert plan.args(tmp_path / "log") == ["-l", f"--log-prefix={tmp_path / 'log'}"]
    assert plan.source == "full"


def test_other_modes_need_no_expected_throughput(tmp_path: Path) -> None:
    expected = ExpectedThroughput(1e6, "first_guess")
    assert LogPlan.for_point("none", expected).args(tmp_path / "x") == []
    assert LogPlan.for_point("full", expected).args(tmp_path / "x")[-1].startswith("--log-prefix")
    assert "--aggregate-interval=1" in LogPlan.for_point("aggregate", expected).args(tmp_path)


def test_percentiles_say_how_they_were_obtained() -> None:
    plan = LogPlan.for_point("sampled", ExpectedThroughput(50_000.0, "warmup"))
    run = capture("pg16", "log_per_transaction_t300")
    percentiles = plan.read(run.log_files, start=0.0, whole_seconds=0).percentiles
    assert percentiles["source"] == "sample"
    assert percentiles["sampling_rate"] == 0.01
    assert percentiles["sampled_transactions"] == 600
    assert (percentiles["expected_tps"], percentiles["expected_from"]) == (50_000.0, "warmup")
    assert percentiles["p99"] is not None and percentiles["error"] is None
    assert describe_percentiles(percentiles) == "from a 1 % sample, 600 transactions"


def test_a_point_with_a_rate_sends_its_latencies_histogram() -> None:
    files = capture("pg16", "log_per_transaction_t300").log_files
    without = LogPlan.for_point("sampled", ExpectedThroughput(50_000.0, "warmup"))
    assert "histogram" not in without.read(files, start=0.0, whole_seconds=0).percentiles
    plan = LogPlan.for_point("full", ExpectedThroughput(1.0, "rate_limit"), keeps_histogram=True)
    percentiles = plan.read(files, start=0.0, whole_seconds=0).percentiles
    histogram = HdrHistogram.decode(percentiles["histogram"])
    assert histogram.get_total_count() == percentiles["sampled_transactions"] == 600
    assert histogram.get_value_at_percentile(99) / 1000 == pytest.approx(percentiles["p99"])


def test_full_log_carries_a_warning_about_its_cost() -> None:
    plan = LogPlan.for_point("full", ExpectedThroughput(1.0, "first_guess"))
    files = capture("pg16", "log_per_transaction_t300").log_files
    percentiles = plan.read(files, start=0.0, whole_seconds=0).percentiles
    assert percentiles["source"] == "full" and percentiles["sampling_rate"] == 1.0
    assert "costs throughput" in percentiles["warning"]
    assert describe_percentiles(percentiles) == "from every transaction, 600"


def test_aggregate_log_gives_the_exact_max_and_no_percentiles() -> None:
    plan = LogPlan.for_point("aggregate", ExpectedThroughput(1.0, "first_guess"))
    run = capture("pg16", "log_aggregate_T2")
    percentiles = plan.read(run.log_files, start=0.0, whole_seconds=0).percentiles
    maxima = [int(line.split()[5]) for path in run.log_files for line in path.open()]
    assert percentiles["max"] == max(maxima) / 1000
    assert percentiles["p99"] is None and percentiles["source"] == "aggregate"
    assert describe_percentiles(percentiles).startswith("max from per-second aggregates")


def test_malformed_line_loses_the_percentiles_with_a_message(tmp_path: Path) -> None:
    log = tmp_path / "pgbench_log.123"
    log.write_text("0 1 534 0 1795315403 517576\n0 2 garbage 0 1795315403 517577\n")
    plan = LogPlan.for_point("sampled", ExpectedThroughput(50_000.0, "warmup"))
    percentiles = plan.read([log], start=0.0, whole_seconds=0).percentiles
    assert percentiles["p50"] is None and percentiles["p99"] is None
    assert f"{log}:2" in percentiles["error"]
    assert describe_percentiles(percentiles).startswith("no percentiles: transaction log")


def test_logs_are_refused_inside_a_storage_target(tmp_path: Path) -> None:
    storage = {"data": tmp_path / "data", "wal": tmp_path}
    with pytest.raises(JobError, match="wal storage target") as raised:
        log_root(tmp_path / "state", storage, "sampled")
    assert raised.value.field == "workload.latency_log"
    assert log_root(tmp_path / "state", storage, "none") == tmp_path.resolve() / "state" / "txlog"


def test_logs_go_to_the_state_directory_beside_the_targets(tmp_path: Path) -> None:
    storage = {"data": tmp_path / "data", "wal": tmp_path / "wal"}
    assert log_root(tmp_path / "state", storage, "full") == tmp_path.resolve() / "state" / "txlog"


def test_logs_a_killed_agent_left_are_removed_and_running_ones_kept(tmp_path: Path) -> None:
    left, running = tmp_path / "7-point-0-abc", tmp_path / "8-point-3-def"
    for directory in (left, running):
        directory.mkdir()
        (directory / "pgbench_log.1234").write_text("0 1 534 0 1795315403 517576\n")
    day_ago = time.time() - STALE_AFTER_S - 60
    os.utime(left / "pgbench_log.1234", (day_ago, day_ago))
    os.utime(left, (day_ago, day_ago))

    assert remove_stale_logs(tmp_path) == [left]
    assert not left.exists() and running.exists()


def test_at_start_logs_of_a_dead_agent_process_are_removed_and_live_ones_kept(
    tmp_path: Path,
) -> None:
    root = tmp_path / "txlog"
    dead, live, unowned = root / "7-point-0-abc", root / "8-point-3-def", root / "9-point-0-ghi"
    for directory in (dead, live, unowned):
        directory.mkdir(parents=True)
        (directory / "pgbench_log.1234").write_text("0 1 534 0 1795315403 517576\n")
    child = os.fork()
    if child == 0:  # an agent process that made its point's directory, then was killed
        _write_owner(dead)
        os._exit(0)
    os.waitpid(child, 0)
    _write_owner(live)

    assert remove_dead_job_logs(tmp_path) == [dead]
    assert not dead.exists() and live.exists() and unowned.exists()
    assert remove_dead_job_logs(tmp_path / "nothing-yet") == []
