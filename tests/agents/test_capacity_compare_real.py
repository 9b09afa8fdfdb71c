"""Capacities compared on real PostgreSQL 16 (prebuilt) and pgbench: select-only at scale 1
and 1 client, -M simple against -M prepared, each cell's search driven by the lab's
search (runs/inference) with probes in interleaved rounds, each probe pgbench -R with the
agent's own command and full latency log read into the agent's histogram; and the
closed-loop verdict of the same two cells (seven interleaved rounds of tps, paired).

Short probes (1 s) on one cluster rather than a run per probe: a run is a cluster's whole
lifecycle (several seconds here), and the suite keeps this test near a minute. It times
pgbench, so it runs alone (solo). The objective is p95 (a second's probe at the lowest
rate, 200 tps, logs enough transactions to bound it; p99 needs about 370), and its limit
(200 ms) is far above a select's latency and a loaded host's scheduling stalls,
so each capacity is where the server saturates: a quarter above it, the backlog a
probe's second builds passes the limit. Whatever the closed loop decides, prepared's
capacity is never below the probes nor simple's above them, and where both capacities
are confirmed prepared's is above simple's (prepared skips parsing and planning each
select); an unconfirmed one gives an undecided ratio that says why. Where the closed-loop
verdict is decided and both capacities are confirmed, the ratio's verdict must match it.
Its 1 s rounds are often undecided on a loaded host (one round of 7 at a fifth of the
others' tps is enough), where the capacities still differ clearly."""

import subprocess
from pathlib import Path

import pytest

from agents.contract.pgbench_output.parse import parse_output
from agents.contract.spec.document import validate_spec
from agents.pgbench import command
from agents.pgbench.latency_log import LOG_FILE_PREFIX, LogPlan, log_files
from agents.pgbench.txlog import read_transaction_logs
from agents.postgres.cluster.lifecycle import Cluster
from agents.postgres.osuser import chown_tree
from runs.analysis.verdicts import Question, Verdict, judge
from runs.inference.capacity import Objective, ProbeMeasure, decide_probe
from runs.inference.capacity_compare import (
    COMPARED_CONFIRMING_PROBES,
    RatioVerdict,
    capacity_ratio,
    comparison_precision,
)
from runs.inference.capacity_search import (
    Found,
    RateOutcome,
    SearchPlan,
    capacity_of,
    next_step,
)
from runs.inference.quantiles import HistogramSample, percentile_interval
from tests.agents.jobs import small_spec

MODES = ("simple", "prepared")
OBJECTIVE = Objective(percentile=95.0, limit_ms=200.0)
MARGIN_PCT, MIN_EFFECT_PCT = 10.0, 1.0
# Up to 60,000 tps: prepared reached 16,000 at a load of 9, a quiet host goes further.
# 32 probes a cell: with both ends decided in three 1 s windows each, a search whose
# floor a stall made mixed spent 24 before its ends were confirmed (2 runs of 7).
PLAN = SearchPlan(
    200.0,
    60000.0,
    budget=32,
    precision=comparison_precision(MARGIN_PCT),
    confirming_probes=COMPARED_CONFIRMING_PROBES,
)
CLOSED_LOOP_ROUNDS = 7


class Bench:
    """pgbench on one cluster at 1 client for 1 s, as the agent builds its command."""

    def __init__(self, cluster: Cluster, logs: Path) -> None:
        self.cluster, self.logs = cluster, logs
        self.pgbench = cluster.install.bindir / "pgbench"
        self.conn = command.Connection(host=str(cluster.socket_dir), port=cluster.port)
        self.kwargs = cluster.os_user.subprocess_kwargs(**cluster.client_env())
        self.runs = 0

    def init(self) -> None:
        job = self.job("simple", None)
        argv = command.init_argv(self.pgbench, job["dataset"], self.conn)
        subprocess.run(argv, check=True, capture_output=True, **self.kwargs)

    def job(self, mode: str, rate: float | None) -> dict:
        workload = {
            "scripts": [{"builtin": "select-only", "weight": 1}],
            "query_mode": mode,
            "rate_tps": rate,
        }
        return validate_spec(small_spec(workload=workload, sweep={"clients": [1], "duration_s": 1}))

    def run(self, mode: str, rate: float | None) -> tuple[float, list[Path]]:
        """tps and the full log's files of one second of `mode` (at `rate` when given)."""
        self.runs += 1
        where = self.logs / f"run-{self.runs}"
        where.mkdir()
        chown_tree(where, self.cluster.os_user)
        job = self.job(mode, rate)
        workload = command.workload_args(self.pgbench, 16, job, 1, 1, {})
        log_args = LogPlan("full").args(where / LOG_FILE_PREFIX) if rate else []
        argv = command.run_argv(workload, [], log_args, self.conn)
        finished = subprocess.run(argv, capture_output=True, text=True, **self.kwargs)
        assert finished.returncode == 0, finished.stderr
        return float(parse_output(finished.stdout)["tps"]), log_files(where) if rate else []


def probe(bench: Bench, mode: str, rate: float, pooled: list[tuple[float, str]]) -> RateOutcome:
    """One probe of `mode` at `rate`, pooled with the earlier ones at that rate (each
    probe's tps and histogram), each of them also decided alone."""
    tps, paths = bench.run(mode, rate)
    pooled.append((tps, read_transaction_logs(paths).histogram.encode().decode()))
    measure = measured(rate, pooled)
    windows = tuple(decide_probe(measured(rate, [one]), OBJECTIVE).decision for one in pooled)
    estimate = measure.interval.estimate if measure.interval else None
    return RateOutcome(rate, decide_probe(measure, OBJECTIVE), estimate, len(pooled), windows)


def measured(rate: float, pooled: list[tuple[float, str]]) -> ProbeMeasure:
    """The 1 s probes of one rate as one measure, their histograms merged."""
    sample = HistogramSample([histogram for _tps, histogram in pooled])
    interval = percentile_interval(sample, OBJECTIVE.percentile)
    tps = sum(tps for tps, _histogram in pooled) / len(pooled)
    return ProbeMeasure(rate, tps, sample.count, 0, 0, float(len(pooled)), interval)


@pytest.mark.solo
def test_prepared_against_simple_capacity_points_the_way_the_closed_loop_verdict_does(
    make_cluster, storage_root: Path
) -> None:
    cluster = make_cluster()
    cluster.initdb()
    cluster.start()
    bench = Bench(cluster, storage_root)
    bench.init()

    tps: dict[str, list[float]] = {mode: [] for mode in MODES}
    for number in range(CLOSED_LOOP_ROUNDS):
        for mode in MODES[::-1] if number % 2 else MODES:
            tps[mode].append(bench.run(mode, None)[0])
    rounds = list(range(1, CLOSED_LOOP_ROUNDS + 1))
    question = Question(tps["prepared"], tps["simple"], True, rounds, rounds)
    closed_loop = judge([question], MIN_EFFECT_PCT, MARGIN_PCT)[0]

    outcomes: dict[str, dict[float, RateOutcome]] = {mode: {} for mode in MODES}
    histograms: dict[tuple[str, float], list[tuple[float, str]]] = {}
    number = 0
    while True:
        asked = {
            mode: step.next_tps
            for mode in MODES
            if (step := next_step(PLAN, OBJECTIVE, list(outcomes[mode].values()))).next_tps
            is not None
        }
        if not asked:
            break
        number += 1
        for mode in sorted(asked, reverse=number % 2 == 0):
            rate = asked[mode]
            pooled = histograms.setdefault((mode, rate), [])
            outcomes[mode][rate] = probe(bench, mode, rate, pooled)
    simple, prepared = (capacity_of(PLAN, OBJECTIVE, list(outcomes[m].values())) for m in MODES)
    ratio = capacity_ratio(prepared, simple, MARGIN_PCT, MIN_EFFECT_PCT)

    probed = {
        mode: {
            f"{rate:g}": [w.value for w in o.windows] for rate, o in sorted(outcomes[mode].items())
        }
        for mode in MODES
    }
    found = (
        f"simple {simple.sentence}; prepared {prepared.sentence}; closed loop {tps}; "
        f"windows {probed}"
    )
    # Measured +22 % to +228 % (docs/benchmarks.md); only the direction is asserted: a stall in
    # one 1 s probe could fail a rate well below a capacity (the +22 %: prepared 5,904 tps
    # while its closed-loop rounds ran 16,000 to 31,000, before ceilings were probed three
    # times). A capacity past the probes gives no ratio and its direction from which side
    # it is on.
    assert prepared.found != Found.BELOW and simple.found != Found.ABOVE, found
    assert ratio.verdict != RatioVerdict.SLOWER, (ratio.sentence, found)
    if not (simple.confirmed and prepared.confirmed):
        # Both ends decided in three 1 s windows each: near saturation a 1 s window passes
        # or fails by chance, a floor found mixed moves down, and 3 runs of 10 spent the
        # budget first (2026-11-29). Then no verdict, and the sentence says why; the
        # estimate of an unconfirmed capacity has no direction to assert (CI, 2026-11-30: a
        # failed 1 s window moved prepared's down to 0.72 of simple's, [0.58, 1.66]).
        assert ratio.verdict == RatioVerdict.UNDECIDED, (ratio.sentence, found)
        assert "capacity is not confirmed" in ratio.sentence, (ratio.sentence, found)
        return
    assert ratio.estimate is None or ratio.estimate > 1, (ratio.sentence, found)
    assert ratio.upper is None or ratio.upper > 1, (ratio.sentence, found)
    if closed_loop.verdict in (Verdict.FASTER, Verdict.SLOWER):
        # Two confirmed capacities can still leave the ratio's interval wide (CI, 2026-11-29:
        # +20.2 % [-4.3, +42.7] from 1 s windows): undecided then, never the other way.
        agreeing = (RatioVerdict(closed_loop.verdict.value), RatioVerdict.UNDECIDED)
        assert ratio.verdict in agreeing, (ratio.sentence, found)
