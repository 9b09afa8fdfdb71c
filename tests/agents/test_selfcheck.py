"""The fidelity benchmark: the lab's pgbench command against the plain one a user would type.

The 1 % target itself (RATIO_TARGET) is a benchmark's to check, on a quiet machine with
long rounds (`python -m agents selfcheck`, docs/benchmarks.md), not a timed test's: at
2 clients on 2 CPUs the agent's own ~1 % of the CPU already shows in tps. This test runs
the same check end to end and holds what short rounds can tell: the interval of the
ratio lab/plain must reach GROSS_SLOWDOWN_RATIO, which a cost of a few percent such as
`-P 1`'s timed waits (about 3 % of select-only tps, docs/benchmarks.md) coming back into
the default command misses. The agent's own CPU share must stay small, and pgbench's
own CPU per transaction must stay well below what a full `-l` log makes it.
"""

from pathlib import Path

import pytest

from agents.config import AgentConfig
from agents.selfcheck import RATIO_TARGET, WORKLOADS, ratio_estimate, run_selfcheck

# What short rounds can hold the lab's command to (the target is RATIO_TARGET, above).
GROSS_SLOWDOWN_RATIO = 0.97
# Windows of a few seconds carry the samplers' start-up cost (a CI run on a noisy VM, 2026-11-29:
# 3.2 % of 4 s windows); 20 s windows stay under 0.5 %. A gross guard: the target is
# measured by `python -m agents selfcheck` (docs/benchmarks.md), not here.
SHORT_WINDOW_CPU_PERCENT = 5.0
# The former full `-l` log took about 60 % more of pgbench's own CPU per transaction.
FULL_LOG_PGBENCH_CPU_RATIO = 1.3


def test_rounds_all_slower_by_seven_percent_are_over_budget():
    estimate = ratio_estimate([0.93, 0.935, 0.925, 0.94])
    assert estimate.verdict == "over budget"
    assert estimate.low < 0.93 < estimate.high < RATIO_TARGET


def test_rounds_scattered_around_one_are_inconclusive():
    estimate = ratio_estimate([1.05, 0.94, 1.02, 0.97])
    assert estimate.verdict == "inconclusive"
    assert estimate.low < RATIO_TARGET < 1.0 < estimate.high


def test_tight_rounds_at_one_are_within_budget():
    estimate = ratio_estimate([1.001, 0.999, 1.002, 1.0, 0.998, 1.001])
    assert estimate.verdict == "within budget"
    assert estimate.ratio == pytest.approx(1.0, abs=0.001)


def test_one_round_gives_no_interval():
    with pytest.raises(ValueError, match="at least 2 rounds"):
        ratio_estimate([1.0])


@pytest.mark.solo
def test_lab_command_is_not_over_budget_against_plain_pgbench(storage_root: Path):
    messages: list[str] = []
    # A storage target of its own, removed after the test, not the shared default one.
    config = AgentConfig(storage={"default": storage_root})

    report = run_selfcheck(config, rounds=3, duration_s=4, log=messages.append)

    assert [workload["workload"] for workload in report["workloads"]] == list(WORKLOADS)
    for workload in report["workloads"]:
        assert not {"-P", "-r", "-l", "--failures-detailed"} & set(workload["plain_argv"])
        assert {"-l", "--failures-detailed"} <= set(workload["lab_argv"])
        assert "-P" not in workload["lab_argv"], "the timeline is read from the log"
        assert [r["order"] for r in workload["rounds"]] == [
            ["lab", "plain"],
            ["plain", "lab"],
            ["lab", "plain"],
        ]
        low, high = workload["ratio_ci95"]
        assert low <= workload["ratio"] <= high
        assert high >= GROSS_SLOWDOWN_RATIO, f"the lab's command slows pgbench: {workload}"
        assert workload["agent_cpu_percent_of_window"] < SHORT_WINDOW_CPU_PERCENT
        cpu = workload["pgbench_cpu_per_transaction"]
        assert cpu["lab_us_per_tx"] > 0 and cpu["plain_us_per_tx"] > 0
        assert cpu["ratio_ci95"][0] <= cpu["ratio"] <= cpu["ratio_ci95"][1]
        # A full log as the default (about +60 % of pgbench's own work) puts the interval above.
        assert cpu["ratio_ci95"][0] < FULL_LOG_PGBENCH_CPU_RATIO, f"pgbench works harder: {cpu}"
    select_only = report["workloads"][0]
    assert any(arg.startswith("--sampling-rate=") for arg in select_only["lab_argv"])
    assert select_only["latency_percentiles_ms"]["source"] == "sample"
    assert any("95 % CI" in message for message in messages)
    assert len(report["load_average_before"]) == 3
