"""The lab's latency log on real PostgreSQL 16 and pgbench: where it goes, what it costs in
memory, and how close a sample's percentiles are to those of every transaction."""

import math
import os
import random
import subprocess
from pathlib import Path

import numpy
import pytest

from agents.config import AgentConfig
from agents.contract.errors import JobError
from agents.contract.spec.document import validate_spec
from agents.pgbench import command
from agents.pgbench.latency_log import LOG_FILE_PREFIX, ExpectedThroughput, LogPlan, log_files
from agents.pgbench.txlog import read_transaction_logs
from agents.postgres.cluster.lifecycle import Cluster
from agents.postgres.osuser import chown_tree
from tests.agents.jobs import run, small_spec

PERCENTILES = (50, 90, 95, 99)
# A sampled percentile's position in the full log's distribution may differ from
# its nominal level by 4 binomial standard errors (false alarm about 1 in 16,000).
STANDARD_ERRORS = 4
# HdrHistogram keeps 3 significant digits: a reported value is within 0.1 % of a latency.
RESOLUTION = 0.001


def spec(**workload) -> dict:
    return small_spec(
        run_id="fidelity",
        workload={"scripts": [{"builtin": "select-only", "weight": 1}], "query_mode": "prepared"}
        | workload,
        sweep={"duration_s": 3, "warmup_s": 2, "between_points": "checkpoint"},
    )


def files_under(root: Path, prefix: str) -> list[Path]:
    return [path for path in root.rglob(f"{prefix}*") if path.is_file()]


def this_jobs_logs(log_dir: Path) -> list[Path]:
    """Log files of this test's job (other jobs on this machine share the state directory)."""
    return [
        path
        for path in files_under(log_dir, LOG_FILE_PREFIX)
        if path.parent.name.startswith("fidelity-point-")
    ]


def test_sampled_log_is_written_to_the_state_directory_never_to_storage(config, storage_root):
    log_dir = config.state_dir.resolve() / "txlog"
    seen_in_storage: list[Path] = []
    seen_in_state: list[Path] = []

    def watch(event: dict) -> None:
        if event["type"] == "progress":
            seen_in_storage.extend(files_under(storage_root, LOG_FILE_PREFIX))
            seen_in_state.extend(this_jobs_logs(log_dir))

    result, _ = run(spec(), config, hook=watch)

    assert result["status"] == "succeeded", result["error"]
    assert seen_in_state, "pgbench wrote its sampled log under the state directory while it ran"
    assert seen_in_storage == [] and files_under(storage_root, LOG_FILE_PREFIX) == []
    for point in result["points"]:
        prefix = next(arg for arg in point["argv"] if arg.startswith("--log-prefix="))
        path = Path(prefix.removeprefix("--log-prefix="))
        assert path.is_relative_to(log_dir) and not path.is_relative_to(storage_root)
        assert not path.parent.exists(), "the point's log is removed once it is read"
    assert this_jobs_logs(log_dir) == []


def test_sample_size_and_rate_follow_the_measured_throughput(config):
    result, _ = run(spec(), config)

    assert result["status"] == "succeeded", result["error"]
    first, second = result["points"]
    assert first["latency_percentiles_ms"]["expected_from"] == "warmup"
    assert second["latency_percentiles_ms"]["expected_from"] == "previous_point"
    for point in result["points"]:
        percentiles = point["latency_percentiles_ms"]
        rate, transactions = percentiles["sampling_rate"], point["transactions"]
        assert f"--sampling-rate={rate}" in point["argv"] or percentiles["source"] == "full"
        spread = STANDARD_ERRORS * math.sqrt(transactions * rate * (1 - rate)) + 1
        assert abs(percentiles["sampled_transactions"] - transactions * rate) <= spread
        assert percentiles["p50"] <= percentiles["p99"] <= percentiles["max"]
        assert point["pgbench_cpus"] == min(point["threads"], len(os.sched_getaffinity(0)))
        capacity_s = point["pgbench_cpus"] * point["seconds"]
        assert 0 < point["pgbench_cpu_s"] <= capacity_s, "pgbench's own CPU time, from wait4"
        assert 0 <= point["agent_cpu_s"] < point["pgbench_cpu_s"]
    assert "-l" in first["argv"] and not {"-P", "-r"} & set(first["argv"])


def sweep_mark(event: dict) -> str | None:
    """ "point" for a finished point, the step name for a warm-up or a before-point step."""
    if event["type"] == "point":
        return "point"
    if event["type"] == "step" and event["data"]["name"] in ("warmup", "before_point"):
        return event["data"]["name"]
    return None


def test_between_points_action_runs_before_the_first_point_too(config):
    job = spec(latency_log="none", progress=False, statement_latencies=True)
    result, events = run(job, config)

    assert result["status"] == "succeeded", result["error"]
    marks = [mark for mark in map(sweep_mark, events.events) if mark]
    assert marks == ["warmup", "before_point", "point", "before_point", "point"]
    for point in result["points"]:
        assert point["latency_percentiles_ms"] is None and point["progress"] == []
        assert point["statements"], "-r on request gives per-statement latencies"
        assert "-r" in point["argv"] and "-P" not in point["argv"]
        assert not any(arg.startswith("--log-prefix") for arg in point["argv"])


def test_state_directory_inside_a_storage_target_is_refused_before_provisioning(
    storage_root: Path,
):
    config = AgentConfig(
        state_dir=storage_root / "data" / "agent",
        storage={"data": storage_root / "data", "wal": storage_root / "wal"},
    )
    result, _ = run(spec(), config)

    assert result["error"]["code"] == "invalid_spec"
    assert result["error"]["field"] == "workload.latency_log"
    assert result["install"] is None and result["points"] == []


def test_latency_log_mode_is_checked_with_the_spec():
    assert validate_spec(spec())["workload"]["latency_log"] == "sampled"
    with pytest.raises(JobError, match="sampled, aggregate, full, none") as raised:
        validate_spec(spec(latency_log="everything"))
    assert raised.value.field == "workload.latency_log"
    with pytest.raises(JobError, match="true or false") as raised:
        validate_spec(spec(statement_latencies="yes"))
    assert raised.value.field == "workload.statement_latencies"


def run_full_log(cluster: Cluster, log_dir: Path, per_client: int) -> list[Path]:
    """Initialise pgbench at scale 1 and run select-only at 2 clients, `per_client`
    transactions each, with a full `-l` log."""
    sweep = {"clients": [2], "transactions": per_client}
    job = validate_spec(spec(latency_log="full") | {"sweep": sweep})
    pgbench = cluster.install.bindir / "pgbench"
    conn = command.Connection(host=str(cluster.socket_dir), port=cluster.port)
    kwargs = cluster.os_user.subprocess_kwargs(**cluster.client_env())
    subprocess.run(command.init_argv(pgbench, job["dataset"], conn), check=True, **kwargs)
    workload = command.workload_args(pgbench, 16, job, 2, 2, {})
    log_args = LogPlan("full").args(log_dir / LOG_FILE_PREFIX)
    argv = command.run_argv(workload, command.reporting_args(job["workload"], 16), log_args, conn)
    finished = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    assert finished.returncode == 0, finished.stderr
    return log_files(log_dir)


def bernoulli_sample(paths: list[Path], rate: float, target: Path, seed: int) -> Path:
    """Keep each line with probability `rate`, as pgbench's --sampling-rate does."""
    draw = random.Random(seed).random
    with open(target, "w") as out:
        for path in paths:
            out.writelines(line for line in path.open() if draw() < rate)
    return target


def position_interval(latencies: numpy.ndarray, value_ms: float) -> tuple[float, float]:
    """Where a reported value lies in the sorted full log, allowing for its resolution."""
    low = numpy.searchsorted(latencies, value_ms * 1000 * (1 - RESOLUTION) - 1, side="left")
    high = numpy.searchsorted(latencies, value_ms * 1000 * (1 + RESOLUTION) + 1, side="right")
    return low / len(latencies), high / len(latencies)


def test_sampled_percentiles_agree_with_the_full_log_of_the_same_run(
    make_cluster, storage_root: Path, tmp_path: Path
):
    """pgbench cannot write a sampled and a full log in one run: the sample is drawn from the
    full log the way pgbench draws it (each transaction kept with probability `rate`)."""
    cluster = make_cluster()
    cluster.initdb()
    cluster.start()
    log_dir = storage_root / "log"
    log_dir.mkdir()
    chown_tree(log_dir, cluster.os_user)
    paths = run_full_log(cluster, log_dir, per_client=15_000)
    latencies = numpy.sort(
        numpy.array([int(line.split()[2]) for path in paths for line in path.open()])
    )
    assert_same_footprint(paths, tmp_path / "one-line.log")
    full = LogPlan("full").read(paths, start=0.0, whole_seconds=0).percentiles
    assert full["sampled_transactions"] == len(latencies) == 30_000
    for p in PERCENTILES:
        exact = latencies[math.ceil(p / 100 * len(latencies)) - 1] / 1000
        assert abs(full[f"p{p}"] - exact) <= exact * RESOLUTION + 0.001

    rate = 0.05
    sample = bernoulli_sample(paths, rate, tmp_path / f"{LOG_FILE_PREFIX}.1", seed=12)
    plan = LogPlan("sampled", rate, ExpectedThroughput(20_000.0, "warmup"))
    sampled = plan.read([sample], start=0.0, whole_seconds=0).percentiles
    n = sampled["sampled_transactions"]
    assert sampled["source"] == "sample" and n > 1_200
    for p in PERCENTILES:
        level = p / 100
        tolerance = STANDARD_ERRORS * math.sqrt(level * (1 - level) / n)
        low, high = position_interval(latencies, sampled[f"p{p}"])
        assert low - tolerance <= level <= high + tolerance, (p, sampled[f"p{p}"], low, high)


def assert_same_footprint(full_log: list[Path], one_line: Path) -> None:
    """The histogram of a whole real log is the size of the histogram of one line."""
    one_line.write_text(full_log[0].open().readline())
    small, large = read_transaction_logs([one_line]), read_transaction_logs(full_log)
    assert large.histogram.get_total_count() > 10_000 * small.histogram.get_total_count()
    assert large.histogram.counts_len == small.histogram.counts_len
    assert len(large.histogram.counts) == len(small.histogram.counts)


def test_full_log_is_available_with_a_warning_about_its_cost(config):
    job = spec(latency_log="full") | {"sweep": {"clients": [2], "duration_s": 2}}
    result, events = run(job, config)

    assert result["status"] == "succeeded", result["error"]
    warnings = [event["data"]["message"] for event in events.of_type("log")]
    assert any("costs throughput" in message for message in warnings)
    (point,) = result["points"]
    percentiles = point["latency_percentiles_ms"]
    assert (percentiles["source"], percentiles["sampling_rate"]) == ("full", 1.0)
    assert percentiles["sampled_transactions"] == point["transactions"]
    assert "costs throughput" in percentiles["warning"]
    assert not any(arg.startswith("--sampling-rate") for arg in point["argv"])


POSITION = ("point", "clients", "repeat")


def test_timeline_is_read_from_the_sampled_log_live_and_kept(config):
    """No `-P`: each second comes from the sampled log, live once every thread's log has
    passed it, and the point keeps the same numbers; they estimate what pgbench printed.
    8 s points: pgbench buffers its log 4 kB at a time, and on a busy host (a tenth of the
    calibrated ~500 lines a second, shared by two threads) 3 s points ended before a
    thread's first write, so no second could arrive live (it failed CI once)."""
    job = spec()
    result, events = run(job | {"sweep": {**job["sweep"], "duration_s": 8}}, config)

    assert result["status"] == "succeeded", result["error"]
    for point in result["points"]:
        assert "-P" not in point["argv"]
        timeline, rate = point["progress"], point["latency_percentiles_ms"]["sampling_rate"]
        whole_seconds = range(int(point["seconds"]))
        assert [line["t"] for line in timeline] == [float(n + 1) for n in whole_seconds]
        assert {line["sampling_rate"] for line in timeline} == {rate}
        lines = sum(line["sampled"] for line in timeline)
        assert 0 < lines <= point["latency_percentiles_ms"]["sampled_transactions"]
        mean_tps = sum(line["tps"] for line in timeline) / len(timeline)
        assert abs(mean_tps / point["tps"] - 1) < STANDARD_ERRORS / math.sqrt(lines) + 0.05
        assert all(0 < line["latency_ms"] < 100 for line in timeline)
        live = [
            {key: value for key, value in e["data"].items() if key not in POSITION}
            for e in events.of_type("progress")
            if e["data"]["point"] == point["index"]
        ]
        assert live, "seconds arrive while pgbench runs"
        assert live == timeline[: len(live)], "the live seconds are the kept ones"


@pytest.mark.parametrize("mode", ["full", "aggregate"])
def test_full_and_aggregate_logs_give_an_exact_timeline_once_the_point_ends(config, mode):
    job = spec(latency_log=mode) | {"sweep": {"clients": [2], "duration_s": 3}}
    result, events = run(job, config)

    assert result["status"] == "succeeded", result["error"]
    (point,) = result["points"]
    timeline = point["progress"]
    assert events.of_type("progress") == [], "a full or aggregate log is read after pgbench"
    assert len(timeline) >= 2
    if mode == "full":
        assert all(line["tps"] == line["sampled"] for line in timeline), "every one counted"
        assert {line["sampling_rate"] for line in timeline} == {1.0}
    else:
        assert all("sampled" not in line for line in timeline), "exact per-second counts"
    counted = sum(line["tps"] for line in timeline)
    # Every transaction of the whole seconds: all but the cut last second's, which lasted
    # under a second (bounded by the busiest whole second, with room for a second on a
    # loaded machine going faster than the ones before it: a CI run's cut second held
    # 1.62 times its busiest whole one).
    assert counted <= point["transactions"]
    assert point["transactions"] - counted <= 2.0 * max(line["tps"] for line in timeline)


def test_progress_option_takes_the_timeline_from_p(config):
    result, events = run(spec(progress=True), config)

    assert result["status"] == "succeeded", result["error"]
    for point in result["points"]:
        assert point["argv"][point["argv"].index("-P") + 1] == "1"
        assert point["progress"] and all("sampled" not in line for line in point["progress"])
    assert events.of_type("progress")
