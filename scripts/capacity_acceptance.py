"""`scripts/bench capacity`: the capacity search's acceptance, measured.

A script, not a `manage.py` command: it runs the agent's jobs in this process, as
`scripts/bench causes` does (scripts/known_causes.py).

The case its acceptance names: PostgreSQL 17 (prebuilt), TPC-B at scale 10, 4
clients, objective p99 <= 20 ms.

1. `--searches` independent capacity searches (3). Each is an experiment of the
   throw-away lab database whose probes are jobs of the real agent, each in its own
   cluster (pgbench -i, then one point of pgbench -R, its sampled transaction log): the
   probe's spec is the lab's (runs/services/capacity.py `probe_spec`), its point is
   stored as the control worker stores it, and the next rate or the end comes from the
   lab's reading and search (runs/analysis/capacity.py, runs/inference/capacity_search.py),
   as the control worker's step takes them. Printed: every probe and the answer the
   search would give were its budget spent there, each search's capacity with its
   interval, its probes (at most `--budget`, the lab's default) and minutes, and whether
   the searches agree: every estimate within +-10 % of their median, or all
   their intervals overlapping.
2. At 0.85 x and 1.2 x of the capacity found (the searches' median; or `--capacity`),
   `--checks` runs each (5) of plain pgbench outside the lab, 0.85 x and 1.2 x taking
   turns: in one throw-away cluster made as the agent makes one (so with the probes'
   settings; with `--fresh-cluster`, a new one for each run, as each probe has),
   before each run `pgbench -i -s 10` and a CHECKPOINT (what each probe had
   before its window), then the command a user types, `pgbench -c 4 -j J -T T -M simple
   -R <rate> -l` with the probes' -c/-j/-T/-M, run bare (no sandbox, nothing watching).
   Its p99 is the nearest-rank percentile of every latency in its log (no histogram,
   no lab code); a run meets the objective when that is within the limit and no
   transaction failed. Done means 5 of 5 meet it at 0.85 x and at least 4 of 5 do not
   at 1.2 x.

Time, by estimate: a probe of 60 s costs about 80 s on a quiet machine (a job's fixed
costs, pgbench -i at scale 10, the 1 s calibration: about 20 s; under a load of 22 the
smoke run measured 58 s of them), so a search of about 12 probes (at most 24) about 16
minutes and three about 48; the ten plain checks of 60 s, each after its own pgbench -i,
about 13 more: about 60 minutes in all, about 90 under such a load. Run it on a quiet machine:
the other programs' load is measured with every probe (at a load of 22 to 27 a probe
at 20 tps already missed p99 <= 20 ms).

Ctrl-C or a TERM stops it as the lab cancels a run: the probe's or the check's pgbench
is stopped, its cluster and directories removed, and the script exits (130) with what
it measured so far printed.

A smoke run (a few minutes): `scripts/bench capacity --searches 1 --probe-s 20 --budget 4
--checks 0`, then the checks alone, `scripts/bench capacity --searches 0 --capacity 50
--probe-s 10 --checks 1`.
"""

import argparse
import functools
import json
import math
import os
import secrets
import signal
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchlab.settings")
django.setup()

from django.utils import timezone  # noqa: E402

from agents.config import AgentConfig  # noqa: E402
from agents.contract.pgbench_output.parse import parse_output  # noqa: E402
from agents.contract.spec.document import JobSpec, validate_spec  # noqa: E402
from agents.events import EventEmitter  # noqa: E402
from agents.job import Job, run_job  # noqa: E402
from agents.pgbench import command  # noqa: E402
from agents.pgbench.latency_log import point_log_dir  # noqa: E402
from agents.pgbench.process import Finished, run_pgbench  # noqa: E402
from agents.selfcheck import start_plain  # noqa: E402
from agents.sweep import LocalPoints, PointContext  # noqa: E402
from runs.analysis.capacity import (  # noqa: E402
    CapacityReading,
    capacity_reading,
    probes_expected,
)
from runs.inference.capacity_search import Found, next_step  # noqa: E402
from runs.inference.capacity_spread import spread_widens  # noqa: E402
from runs.management import synthetic  # noqa: E402
from runs.management.commands.bench_pages import (  # noqa: E402
    machine,
    require_throwaway_database,
)
from runs.models import Experiment, Host, Run  # noqa: E402
from runs.services.capacity import probe_spec  # noqa: E402
from runs.services.jobs.events import store_point  # noqa: E402

CLIENTS = 4
SCALE = 10
PERCENTILE = 99.0
LIMIT_MS = 20.0
# Searches agree when every estimate is within this share of their median (or overlap).
AGREEMENT = 0.10
FACTORS = (0.85, 1.2)
# Set by Ctrl-C or TERM: every job and check polls it, as the agent's jobs poll a cancel.
STOP = threading.Event()
LOG_PREFIX = "plain"


@dataclass(frozen=True)
class Searched:
    """One search: its answer, estimate and interval (tps), probes, minutes, why it ended."""

    number: int
    found: str
    sentence: str
    estimate: float | None
    lower: float | None
    upper: float | None
    probes: int
    minutes: float
    ended: str
    expected_probes: int
    learned_spread_pct: float | None


@dataclass(frozen=True)
class Checked:
    """One plain pgbench run at `factor` x the capacity: its p99 from the log and more."""

    factor: float
    rate_tps: float
    tps: float
    p99_ms: float | None
    logged: int
    failed: int
    meets: bool
    argv: list[str]


def job_spec(options: argparse.Namespace, run_id: str, rate_tps: float | None = None) -> JobSpec:
    """The cell every probe and check measures (the lab's defaults elsewhere)."""
    return cast(
        JobSpec,
        {
            "version": 1,
            "run_id": run_id,
            "postgres": {"version": options.postgres, "source": "prebuilt"},
            "storage": {"data": "data", "wal": None},
            "dataset": {"scale": SCALE},
            "workload": {
                "scripts": [{"builtin": "tpcb-like", "weight": 1}],
                "query_mode": "simple",
                "rate_tps": rate_tps,
            },
            "sweep": {"clients": [CLIENTS], "duration_s": options.probe_s, "repeats": 1},
        },
    )


def search_experiment(number: int, options: argparse.Namespace) -> Experiment:
    experiment = synthetic.experiment(f"capacity-{number}-{secrets.token_hex(4)}")
    experiment.clients = [CLIENTS]
    experiment.duration_s = options.probe_s
    experiment.execution = "rounds"
    experiment.capacity = True
    experiment.capacity_percentile = PERCENTILE
    experiment.capacity_limit_ms = LIMIT_MS
    experiment.capacity_low_tps = options.low
    experiment.capacity_high_tps = options.high
    experiment.capacity_probes = options.budget
    experiment.save()
    # One host for every search, so that each later search's estimate learns from the
    # earlier ones' windows, as the schedule's does.
    host, _ = Host.objects.get_or_create(
        name="capacity-acceptance", defaults={"enrollment": Host.Enrollment.APPROVED}
    )
    experiment.hosts.set([host])
    return experiment


def measure_probe(
    experiment: Experiment, spec: JobSpec, number: int, config: AgentConfig
) -> str | None:
    """One probe: the agent's job, its point stored in a run of `experiment`. None, or
    why the probe failed (which ends the search, as in the lab)."""
    run = Run.objects.create(
        experiment=experiment,
        host=experiment.hosts.get(),
        build=experiment.builds.get(),
        config_profile=experiment.config_profiles.get(),
        workload=experiment.workloads.get(),
        storage_data="default",
        token=secrets.token_hex(16),
        status=Run.Status.RUNNING,
        round=number,
        position=number,
        spec=spec,
        started_at=timezone.now(),
    )
    emitter = EventEmitter([lambda event: None], run_id=spec["run_id"])
    document = run_job(dict(spec), config, emitter, STOP.is_set)
    for point in document["points"]:
        store_point(run, point)
    succeeded = document["status"] == "succeeded"
    run.status = Run.Status.SUCCEEDED if succeeded else Run.Status.FAILED
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "finished_at"])
    return None if succeeded else f"probe {number} {document['status']}: {document['error']}"


def say_probe(reading: CapacityReading, number: int) -> None:
    probe = next(probe for probe in reading.probes if probe.number == number)
    outcome = next(o for o in reading.outcomes if o.offered_tps == probe.offered_tps)
    p99 = probe.percentiles.get(PERCENTILE)
    reasons = "; ".join(outcome.verdict.reasons)
    stalled = f"; stalled: {probe.stall}" if probe.stall else ""
    say(
        f"  probe {number}: {probe.offered_tps:,.0f} tps offered, "
        f"{probe.reached_tps or 0:,.1f} reached, p99 {_ms(p99)}; the rate's windows pooled: "
        f"{outcome.decision}{' (' + reasons + ')' if reasons else ''}{stalled}"
    )
    # What the search would answer were its budget spent here (the steps before the budget
    # do not depend on it): a smaller budget's answer, read off the same probes.
    say(f"    the answer were the budget spent here: {reading.capacity.sentence}")


def search(number: int, options: argparse.Namespace, config: AgentConfig) -> Searched:
    """One capacity search, its probes measured here one after the other."""
    started = time.monotonic()
    experiment = search_experiment(number, options)
    say(f"\nsearch {number}: {options.low:g} to {options.high:g} tps, {options.budget} probes")
    learned = probes_expected(experiment, 1, {experiment.hosts.get().pk})
    expected, spread = learned.probes, learned.spread
    spread_pct = round(spread.percent, 1) if spread is not None and spread_widens(spread) else None
    said = [f"their windows spread {spread_pct} %"] if spread_pct else []
    if learned.beyond_schedule is not None:
        said.append(f"took {learned.beyond_schedule} probes beyond a steady host's schedule")
    earlier = f"; the earlier searches {' and '.join(said)}" if said else ""
    say(f"  the schedule expects {expected} probes{earlier}")
    rate, probes, ended = options.low, 0, ""
    while True:
        probes += 1
        run_id = f"capacity-{number}-{probes}"
        spec = probe_spec(experiment, job_spec(options, run_id), rate)
        spec["run_id"] = run_id
        failure = measure_probe(experiment, spec, probes, config)
        reading = capacity_reading(experiment)
        if failure is not None:
            ended = failure
            break
        say_probe(reading, probes)
        step = next_step(reading.plan, reading.objective, reading.outcomes)
        if step.next_tps is None:
            ended = str(step.ended)
            break
        rate = step.next_tps
    capacity = reading.capacity
    # Ended as the lab ends a search, so that the next one learns from its probes.
    experiment.capacity_state = {"ended": ended, "answer": capacity.sentence, "cells": {}}
    experiment.save(update_fields=["capacity_state"])
    minutes = (time.monotonic() - started) / 60
    say(f"search {number}: {capacity.sentence} ({probes} probes, {minutes:.1f} min; {ended})")
    return Searched(
        number,
        str(capacity.found),
        capacity.sentence,
        capacity.estimate,
        capacity.lower,
        capacity.upper,
        probes,
        round(minutes, 2),
        ended,
        expected,
        spread_pct,
    )


def agreement(searched: list[Searched]) -> dict[str, Any]:
    """Whether the searches' estimates are within AGREEMENT of their median, and whether
    their intervals overlap (every one of them found a capacity)."""
    found = [s for s in searched if s.found == Found.FOUND and s.estimate is not None]
    if len(found) < len(searched) or len(found) < 2:
        return {"within": False, "overlap": False, "agree": False, "median": _median(found)}
    middle = statistics.median(cast(float, s.estimate) for s in found)
    within = all(abs(cast(float, s.estimate) / middle - 1) <= AGREEMENT for s in found)
    lowest_upper = min(cast(float, s.upper) for s in found)
    overlap = max(cast(float, s.lower) for s in found) <= lowest_upper
    return {"within": within, "overlap": overlap, "agree": within or overlap, "median": middle}


def _median(found: list[Searched]) -> float | None:
    estimates = [s.estimate for s in found if s.estimate is not None]
    return statistics.median(estimates) if estimates else None


def plain_p99(log_dir: Path) -> tuple[float | None, int, int]:
    """The nearest-rank p99 (ms) of every latency in pgbench's per-transaction logs in
    `log_dir` (one file per thread; the third field is the latency in µs, or a word for a
    transaction without one), how many latencies, and how many transactions failed."""
    latencies: list[int] = []
    failed = 0
    for path in sorted(log_dir.glob(f"{LOG_PREFIX}.*")):
        for line in path.read_text().splitlines():
            field = line.split()[2]
            if field.isdigit():
                latencies.append(int(field))
            elif field != "skipped":
                failed += 1
    if not latencies:
        return None, 0, failed
    latencies.sort()
    rank = math.ceil(PERCENTILE / 100 * len(latencies))
    return latencies[rank - 1] / 1000, len(latencies), failed


def plain_run(job: Job, place: Any, spec: JobSpec, factor: float) -> Checked:
    """`pgbench -i`, a CHECKPOINT, then the plain command with -R and -l, run bare."""
    points = LocalPoints(PointContext.at(job, place, validate_spec(dict(spec))))
    context = points.context
    context.prepare_workdir()
    launch = functools.partial(start_plain, points)
    pgbench = context.install.bindir / "pgbench"
    init = command.init_argv(pgbench, context.spec["dataset"], context.conn)
    initialised = _bare(init, launch, timed=False)
    if initialised.exit_code != 0:
        raise RuntimeError(f"pgbench -i exited with {initialised.exit_code}: {initialised.stderr}")
    with context.cluster.connect() as conn:
        conn.execute("CHECKPOINT")
    rate = cast(float, spec["workload"]["rate_tps"])
    with point_log_dir(context.log_root, "capacity-check", context.cluster.os_user) as log_dir:
        log_args = ["-l", f"--log-prefix={log_dir / LOG_PREFIX}"]
        argv = command.run_argv(points.workload_args(CLIENTS), [], log_args, context.conn)
        finished = _bare(argv, launch, timed=True)
        p99, logged, failed = plain_p99(log_dir)
    if finished.exit_code != 0:
        raise RuntimeError(f"pgbench exited with {finished.exit_code}: {finished.stderr}")
    tps = parse_output(finished.stdout + finished.stderr)["tps"] or 0.0
    meets = p99 is not None and p99 <= LIMIT_MS and failed == 0
    return Checked(factor, rate, tps, p99, logged, failed, meets, argv)


def _bare(argv: list[str], launch: Any, timed: bool) -> Finished:
    """pgbench to its end, nothing reading its lines and nothing but Ctrl-C or TERM
    stopping it."""
    return run_pgbench(
        argv, launch=launch, on_stderr_line=_ignore, should_stop=STOP.is_set, timed=timed
    )


def _ignore(line: str) -> None:
    return None


def _stop(signum: int, frame: Any) -> None:
    """Ctrl-C or TERM: the job under way stops and cleans up, then the script ends."""
    STOP.set()
    # Unbuffered: a print here could land inside the main flow's own print to stdout.
    message = f"\n{signal.Signals(signum).name}: stopping the probe under way and cleaning up\n"
    os.write(sys.stderr.fileno(), message.encode())


def check(capacity: float, options: argparse.Namespace, config: AgentConfig) -> list[Checked]:
    """`options.checks` plain runs at each of FACTORS x `capacity`, the factors in turns,
    in one throw-away cluster (each in its own with `--fresh-cluster`, as every probe is:
    a server in its first minute reads a higher p99, docs/benchmarks.md)."""
    say(f"\nplain pgbench at {' and '.join(f'{f:g} x' for f in FACTORS)} {capacity:,.0f} tps")
    checked: list[Checked] = []
    job: Job | None = None
    try:
        for number in range(options.checks):
            order = FACTORS if number % 2 == 0 else FACTORS[::-1]
            for factor in order:
                if STOP.is_set():
                    return checked
                if job is None or options.fresh_cluster:
                    if job is not None:
                        job.teardown()
                    job = Job(
                        job_spec(options, "capacity-check"), config, EventEmitter([]), STOP.is_set
                    )
                    install, _spec = job.prepare()
                    place = job.sweep_place(install)
                rate = round(factor * capacity, 1)
                spec = job_spec(options, "capacity-check", rate)
                done = plain_run(job, place, spec, factor)
                checked.append(done)
                say(
                    f"  {factor:g} x: -R {rate:g}: {done.tps:,.1f} tps, p99 {_ms(done.p99_ms)} "
                    f"of {done.logged:,} logged, {done.failed} failed: "
                    f"{'meets' if done.meets else 'misses'} p99 <= {LIMIT_MS:g} ms"
                )
    finally:
        if job is not None:
            job.teardown()
    return checked


def tally(checked: list[Checked]) -> dict[str, Any]:
    """How many runs met the objective at each factor, and whether done means holds."""
    low = [c for c in checked if c.factor == FACTORS[0]]
    high = [c for c in checked if c.factor == FACTORS[1]]
    met_low = sum(c.meets for c in low)
    missed_high = sum(not c.meets for c in high)
    return {
        "met_at_0.85": f"{met_low} of {len(low)}",
        "missed_at_1.2": f"{missed_high} of {len(high)}",
        "done": len(low) == len(high) == 5 and met_low == 5 and missed_high >= 4,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=int, default=3)
    budget = Experiment._meta.get_field("capacity_probes").get_default()
    parser.add_argument("--budget", type=int, default=budget, help="most probes a search takes")
    parser.add_argument("--probe-s", type=int, default=60, help="each probe's and check's -T")
    parser.add_argument("--low", type=float, default=50.0, help="the range's lowest rate")
    parser.add_argument("--high", type=float, default=5000.0, help="the range's highest rate")
    parser.add_argument("--checks", type=int, default=5, help="plain runs at each factor")
    parser.add_argument("--capacity", type=float, help="check this capacity, searching none")
    parser.add_argument("--postgres", default="17", help="the prebuilt PostgreSQL version")
    parser.add_argument(
        "--fresh-cluster",
        action="store_true",
        help="each plain check in a cluster of its own, made as a probe's is",
    )
    parser.add_argument("--json", type=Path, help="also write what was measured here")
    options = parser.parse_args()
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    require_throwaway_database()
    say(f"{machine()}; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    report: dict[str, Any] = {"options": vars(options) | {"json": None}}
    with tempfile.TemporaryDirectory(prefix="capacity-", dir="/var/tmp") as storage:
        root = Path(storage)
        root.chmod(0o755)
        config = AgentConfig(storage={"data": root / "data"})
        capacity = options.capacity
        if capacity is None:
            searched = []
            for number in range(1, options.searches + 1):
                if not STOP.is_set():
                    searched.append(search(number, options, config))
            agreed = agreement(searched)
            report |= {"searches": [asdict(s) for s in searched], "agreement": agreed}
            say(
                f"\nsearches: within +-{AGREEMENT:.0%} of their median: {agreed['within']}; "
                f"intervals overlap: {agreed['overlap']}"
            )
            capacity = agreed["median"]
        if capacity is None:
            say("no search found a capacity: nothing to check")
        elif options.checks and not STOP.is_set():
            checked = check(capacity, options, config)
            report |= {"capacity": capacity, "checks": [asdict(c) for c in checked]}
            report["tally"] = tally(checked)
            say(f"\nchecks: {report['tally']}")
    report["load_average_after"] = os.getloadavg()
    if options.json:
        options.json.write_text(json.dumps(report, indent=1, default=str))
    if STOP.is_set():
        sys.exit(130)


def _ms(value: float | None) -> str:
    return "none" if value is None else f"{value:,.1f} ms"


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
