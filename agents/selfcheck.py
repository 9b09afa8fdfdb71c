"""Fidelity benchmark: does the lab's pgbench command measure what plain pgbench measures?

Per workload (select-only `-M prepared` at 2 clients, the costliest case on a
small host, and tpcb-like at 2 clients), in one throw-away cluster after a
warm-up, each round runs the workload twice: the lab's command through the
agent (`--failures-detailed` and the sampled transaction log, read live for
the timeline; host and server samplers; events) and the plain command a user
would type (no `-P`, `-r`, `-l`) with nothing watching. The order flips every
round.

The cost is the ratio lab/plain of each round; the report gives their
geometric mean with a 95 % confidence interval (Student's t on the log
ratios), and the agent's own CPU time as a share of its measured windows.
Beside it stands pgbench's own CPU time per transaction on each side (from
wait4): the work the lab's options add inside pgbench, which a neighbour's
load moves much less than it moves tps.
A workload is "within budget" when the interval's lower end is at least
RATIO_TARGET, "over budget" when its upper end is below it, and
"inconclusive" otherwise (the machine was too noisy for the rounds run). The
check fails when a workload is over budget or the agent's CPU share reaches
CPU_BUDGET_PERCENT. It is a benchmark, not a unit test: run it on a quiet
machine (docs/benchmarks.md).
"""

import dataclasses
import functools
import logging
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from scipy import stats

from agents.config import AgentConfig
from agents.contract.errors import JobError
from agents.contract.pgbench_output.parse import parse_output
from agents.contract.reports.latency import LatencyPercentiles
from agents.contract.reports.results import PointResult
from agents.contract.spec.document import validate_spec
from agents.events import EventEmitter
from agents.job import Job
from agents.pgbench.process import run_pgbench
from agents.sandbox import Sandbox, Started, View
from agents.sweep import LocalPoints, PointContext, Sweep

logger = logging.getLogger(__name__)

RATIO_TARGET = 0.99
# The agent's own CPU during a window, in % of one CPU: its log tail, samplers and
# heartbeat must stay out of the numbers pgbench measures.
CPU_BUDGET_PERCENT = 0.3
CONFIDENCE = 0.95
CLIENTS = 2
SCALE = 10
WORKLOADS: dict[str, dict[str, object]] = {
    "select-only prepared": {
        "scripts": [{"builtin": "select-only", "weight": 1}],
        "query_mode": "prepared",
        "no_vacuum": True,
    },
    "tpcb-like": {"scripts": [{"builtin": "tpcb-like", "weight": 1}], "no_vacuum": True},
}

Verdict = Literal["within budget", "over budget", "inconclusive"]


class RoundResult(TypedDict):
    round: int
    order: list[str]
    lab_tps: float
    plain_tps: float
    ratio: float
    lab_pgbench_cpu_us_per_tx: float | None
    plain_pgbench_cpu_us_per_tx: float | None


class Measured(TypedDict):
    tps: float
    pgbench_cpu_us_per_tx: float | None


class PgbenchCpuReport(TypedDict):
    lab_us_per_tx: float
    plain_us_per_tx: float
    ratio: float
    ratio_ci95: list[float]


class WorkloadReport(TypedDict):
    """One workload's rounds and what they show (the report's `workloads`)."""

    workload: str
    clients: int
    lab_argv: list[str]
    plain_argv: list[str]
    rounds: list[RoundResult]
    lab_tps_mean: float
    plain_tps_mean: float
    ratio: float
    ratio_ci95: list[float]
    verdict: "Verdict"
    agent_cpu_percent_of_window: float
    pgbench_cpu_per_transaction: PgbenchCpuReport | None
    latency_percentiles_ms: LatencyPercentiles | None


class SelfcheckReport(TypedDict):
    """What `python -m agents selfcheck` prints."""

    postgres: str
    duration_s: int
    rounds: int
    cpu_count: int
    load_average_before: list[float]
    load_average_after: list[float]
    finished_at: str
    workloads: list[WorkloadReport]
    targets: dict[str, float]
    passed: bool


@dataclass(frozen=True)
class RatioEstimate:
    """Geometric mean of per-round ratios with its confidence interval."""

    ratio: float
    low: float
    high: float

    @property
    def verdict(self) -> Verdict:
        if self.low >= RATIO_TARGET:
            return "within budget"
        if self.high < RATIO_TARGET:
            return "over budget"
        return "inconclusive"


def ratio_estimate(ratios: list[float]) -> RatioEstimate:
    """Geometric mean of `ratios` and its CONFIDENCE interval (t on the logs; needs 2+)."""
    if len(ratios) < 2:
        raise ValueError("a confidence interval needs at least 2 rounds")
    logs = [math.log(ratio) for ratio in ratios]
    mean = statistics.fmean(logs)
    half = stats.t.ppf((1 + CONFIDENCE) / 2, len(logs) - 1) * statistics.stdev(logs)
    half /= math.sqrt(len(logs))
    return RatioEstimate(math.exp(mean), math.exp(mean - half), math.exp(mean + half))


def selfcheck_spec(name: str, duration_s: int) -> dict[str, object]:
    return {
        "version": 1,
        "run_id": "selfcheck",
        "postgres": {"version": "16", "source": "auto"},
        "dataset": {"scale": SCALE},
        "workload": WORKLOADS[name],
        "sweep": {"clients": [CLIENTS], "duration_s": duration_s},
    }


def run_selfcheck(
    config: AgentConfig,
    rounds: int = 6,
    duration_s: int = 20,
    log: Callable[[str], None] | None = None,
) -> SelfcheckReport:
    """Interleave the lab's and the plain command per workload; return the report."""
    say = log or logger.info
    load_before = os.getloadavg()
    first = next(iter(WORKLOADS))
    job = Job(selfcheck_spec(first, duration_s), config, EventEmitter([]), lambda: False)
    try:
        install, spec = job.prepare()
        place = job.sweep_place(install)
        context = PointContext.at(job, place, spec)
        Sweep(context, LocalPoints(context)).prepare_dataset()
        workloads = [
            _check_workload(
                LocalPoints(
                    PointContext.at(job, place, validate_spec(selfcheck_spec(name, duration_s)))
                ),
                name,
                rounds,
                say,
            )
            for name in WORKLOADS
        ]
    finally:
        job.teardown()
    return _report(workloads, install.version, duration_s, rounds, load_before)


def _check_workload(
    points: LocalPoints, name: str, rounds: int, say: Callable[[str], None]
) -> WorkloadReport:
    # One warm-up as long as a point, before the first round of the two commands.
    warmup = points.context.spec["sweep"]["duration_s"] or 0
    say(f"{name}: warming up for {warmup} s")
    points.warm_up(CLIENTS, warmup)
    results: list[RoundResult] = []
    lab_points: list[PointResult] = []
    for round_no in range(1, rounds + 1):
        order = ["lab", "plain"] if round_no % 2 else ["plain", "lab"]
        seen: dict[str, Measured] = {}
        for kind in order:
            if kind == "lab":
                lab_points.append(points.run_point(round_no - 1, rounds, CLIENTS, round_no))
                seen["lab"] = _lab_measured(lab_points[-1])
            else:
                seen["plain"] = _plain_measured(points)
        lab, plain = seen["lab"], seen["plain"]
        results.append(
            RoundResult(
                round=round_no,
                order=order,
                lab_tps=lab["tps"],
                plain_tps=plain["tps"],
                ratio=round(lab["tps"] / plain["tps"], 4),
                lab_pgbench_cpu_us_per_tx=lab["pgbench_cpu_us_per_tx"],
                plain_pgbench_cpu_us_per_tx=plain["pgbench_cpu_us_per_tx"],
            )
        )
        say(f"{name} round {round_no}: lab {lab['tps']:.0f} tps, plain {plain['tps']:.0f} tps")
    workload = _workload_report(name, points, results, lab_points)
    say(_describe(workload))
    return workload


def _cpu_us_per_transaction(cpu_s: float | None, transactions: int | None) -> float | None:
    if cpu_s is None or not transactions:
        return None
    return round(1e6 * cpu_s / transactions, 3)


def _lab_measured(point: PointResult) -> Measured:
    """A kept point always has its tps (an incomplete one ends the job); say so if not."""
    if point["tps"] is None:
        raise RuntimeError(f"the lab's point {point['index']} was kept without a tps")
    cpu = _cpu_us_per_transaction(point.get("pgbench_cpu_s"), point["transactions"])
    return Measured(tps=point["tps"], pgbench_cpu_us_per_tx=cpu)


def _plain_measured(points: LocalPoints) -> Measured:
    """The plain command, run bare: no progress reader, no samplers, no log."""
    finished = run_pgbench(
        points.plain_argv(CLIENTS),
        launch=functools.partial(start_plain, points),
        on_stderr_line=lambda line: None,
        should_stop=lambda: False,
        timed=True,
    )
    parsed = parse_output(finished.stdout + finished.stderr) if not finished.exit_code else None
    if parsed is None or parsed["tps"] is None:
        message = f"plain pgbench exited with {finished.exit_code}: {finished.stderr.strip()}"
        raise JobError("pgbench_failed", message)
    cpu = _cpu_us_per_transaction(finished.cpu_s, parsed["transactions"])
    return Measured(tps=parsed["tps"], pgbench_cpu_us_per_tx=cpu)


def start_plain(points: LocalPoints, argv: list[str], **popen_kwargs: Any) -> Started:
    """The plain command as a user types it: the same OS user and connection, no sandbox."""
    bare = dataclasses.replace(points.context.cluster.os_user, sandbox=Sandbox(enabled=False))
    env = points.context.cluster.workload_env()
    return bare.start(argv, View(), points.context.workdir, env=env, **popen_kwargs)


def _pgbench_cpu_report(results: list[RoundResult]) -> PgbenchCpuReport | None:
    """pgbench's CPU per transaction on each side, and lab/plain with its interval."""
    pairs = [(r["lab_pgbench_cpu_us_per_tx"], r["plain_pgbench_cpu_us_per_tx"]) for r in results]
    known = [(lab, plain) for lab, plain in pairs if lab and plain]
    if len(known) < 2:
        return None
    estimate = ratio_estimate([lab / plain for lab, plain in known])
    return {
        "lab_us_per_tx": round(statistics.fmean(lab for lab, _ in known), 3),
        "plain_us_per_tx": round(statistics.fmean(plain for _, plain in known), 3),
        "ratio": round(estimate.ratio, 4),
        "ratio_ci95": [round(estimate.low, 4), round(estimate.high, 4)],
    }


def _workload_report(
    name: str, points: LocalPoints, results: list[RoundResult], lab_points: list[PointResult]
) -> WorkloadReport:
    estimate = ratio_estimate([result["ratio"] for result in results])
    cpu_s = sum(point["agent_cpu_s"] for point in lab_points)
    window_s = sum(point["seconds"] for point in lab_points)
    return {
        "workload": name,
        "clients": CLIENTS,
        "lab_argv": lab_points[-1]["argv"],
        "plain_argv": points.plain_argv(CLIENTS),
        "rounds": results,
        "lab_tps_mean": round(statistics.fmean(r["lab_tps"] for r in results), 1),
        "plain_tps_mean": round(statistics.fmean(r["plain_tps"] for r in results), 1),
        "ratio": round(estimate.ratio, 4),
        "ratio_ci95": [round(estimate.low, 4), round(estimate.high, 4)],
        "verdict": estimate.verdict,
        "agent_cpu_percent_of_window": round(100.0 * cpu_s / window_s, 3),
        "pgbench_cpu_per_transaction": _pgbench_cpu_report(results),
        "latency_percentiles_ms": lab_points[-1]["latency_percentiles_ms"],
    }


def _describe(workload: WorkloadReport) -> str:
    low, high = workload["ratio_ci95"]
    cpu = workload["pgbench_cpu_per_transaction"]
    pgbench_cpu = (
        f"; pgbench CPU per transaction lab {cpu['lab_us_per_tx']:.2f} us, plain "
        f"{cpu['plain_us_per_tx']:.2f} us (x{cpu['ratio']:.3f}, 95 % CI "
        f"{cpu['ratio_ci95'][0]:.3f} to {cpu['ratio_ci95'][1]:.3f})"
        if cpu
        else ""
    )
    return (
        f"{workload['workload']}, {workload['clients']} clients: lab/plain "
        f"{workload['ratio']:.3f} (95 % CI {low:.3f} to {high:.3f}), agent CPU "
        f"{workload['agent_cpu_percent_of_window']:.2f} % of the window: {workload['verdict']}"
        f"{pgbench_cpu}"
    )


def _report(
    workloads: list[WorkloadReport],
    version: str,
    duration_s: int,
    rounds: int,
    load_before: tuple[float, float, float],
) -> SelfcheckReport:
    over = any(workload["verdict"] == "over budget" for workload in workloads)
    cpu_ok = all(w["agent_cpu_percent_of_window"] < CPU_BUDGET_PERCENT for w in workloads)
    return {
        "postgres": version,
        "duration_s": duration_s,
        "rounds": rounds,
        "cpu_count": len(os.sched_getaffinity(0)),
        "load_average_before": [round(value, 2) for value in load_before],
        "load_average_after": [round(value, 2) for value in os.getloadavg()],
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "workloads": workloads,
        "targets": {
            "tps_ratio_at_least": RATIO_TARGET,
            "agent_cpu_percent_below": CPU_BUDGET_PERCENT,
            "confidence": CONFIDENCE,
        },
        "passed": not over and cpu_ok,
    }
