"""Adaptive duets against adaptive sequential rounds on this machine under a background load
the benchmark starts and stops itself (`scripts/bench duet`; figures in docs/benchmarks.md,
"Duets on a loaded host"). Not part of the suite (the file is not named test_*.py): it runs
for up to an hour.

One lab (a control worker and a real agent, as the integration tests start them) runs, per
try, an A/A and a planted slowdown, each as an adaptive duet and as adaptive sequential
rounds (rounds in turn, answered from paired rounds), while a CPU burner loads every CPU of
the host with a duty cycle drawn anew every minute. Select-only at scale 1, one client,
5 s points, margin ±5 %, first look after 3 rounds, at most 20 minutes of rounds (and at
most BENCH_DUET_ROUNDS of them: the time ends an experiment first, with a last look at the
rounds measured by then).

The cells: two workloads whose one statement is the select-only lookup with a constant
`length(repeat('x', n)) > 0` the server folds while planning each statement: n = 1 in the
reference, n = 1 again in the A/A's other cell, n = BENCH_DUET_PLANT (500) in the planted
slowdown. The statement's cost grows with n alone (docs/benchmarks.md says what 500 costs).

Settings (environment): BENCH_DUET_TRIES (1), BENCH_DUET_CASES (aa,plant),
BENCH_DUET_DESIGNS (duet,sequential), BENCH_DUET_PLANT (500), BENCH_DUET_MINUTES (20),
BENCH_DUET_ROUNDS (100; the lab's limit is raised to it for the benchmark), BENCH_DUET_SEED
(36: the burner's duties; another seed, another load), BENCH_DUET_BURN (1; 0: no burner,
the agent's own CPU on a quiet host), BENCH_DUET_OUT (scratch/bench-duet.jsonl: one JSON
line per experiment).
"""

import contextlib
import json
import math
import multiprocessing
import os
import random
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import psutil
import pytest
from django.db.models import Sum
from django.test import override_settings

from runs import services
from runs.models import Experiment, PgBuild, Result, Run, Workload
from runs.services.adaptive_rounds import tps_by_round
from tests.integration.conftest import running_lab
from tests.runs.factories import ConfigProfileFactory, UserFactory
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(6 * 3600)]

LOOKUP = (
    "\\set aid random(1, 100000 * :scale)\n"
    "SELECT abalance FROM pgbench_accounts WHERE aid = :aid AND length(repeat('x', {n})) > 0;\n"
)
BURN_PERIOD_S = 0.1
DUTY_MINUTE_S = 60.0


def setting(name: str, default: str) -> str:
    return os.environ.get(f"BENCH_DUET_{name}", default)


def _burn(duties: list[float], stop_at: float) -> None:
    """Busy for duty x 100 ms of every 100 ms, the duty of the current minute, until stop_at."""
    started = time.monotonic()
    while (now := time.monotonic()) < stop_at:
        duty = duties[int((now - started) // DUTY_MINUTE_S) % len(duties)]
        busy_until = now + duty * BURN_PERIOD_S
        while time.monotonic() < busy_until:
            pass
        time.sleep((1 - duty) * BURN_PERIOD_S)


@contextmanager
def burner(seconds: float, seed: int) -> Iterator[list[float]]:
    """One burner process per CPU, each minute's duty drawn from 10 to 90 %; stopped on exit
    and at the latest after `seconds`."""
    duties = [random.Random(seed * 1000 + i).uniform(0.1, 0.9) for i in range(120)]
    stop_at = time.monotonic() + seconds
    processes = [
        multiprocessing.Process(target=_burn, args=(duties, stop_at), daemon=True)
        for _ in range(os.cpu_count() or 1)
    ]
    for process in processes:
        process.start()
    try:
        yield duties
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(timeout=10)


def workload(name: str, n: int) -> Workload:
    return Workload.objects.create(
        name=name,
        scale=1,
        scripts=[{"name": f"lookup-{n}", "text": LOOKUP.format(n=n), "weight": 1}],
    )


def agent_cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def agent_share_of_windows(experiment: Experiment) -> float | None:
    """The agent process's CPU time over its points' windows, in % of one CPU. A duet's two
    sides share one agent process whose windows coincide: its first side's points count."""
    results = Result.objects.filter(run__experiment=experiment, agent_cpu_s__isnull=False)
    if experiment.duet:
        results = results.filter(run__cell=0)
    totals = results.aggregate(cpu=Sum("agent_cpu_s"), window=Sum("duration_s"))
    if not totals["window"]:
        return None
    return round(100 * totals["cpu"] / totals["window"], 3)


def summary(experiment: Experiment, design: str, case: str, agent_pid: int, cpu: float) -> dict:
    experiment.refresh_from_db()
    state = experiment.adaptive_state
    point = next(iter(state.get("points", [])), {})
    runs = experiment.runs.filter(round__isnull=False)
    first = runs.order_by("started_at").values_list("started_at", flat=True).first()
    ended = datetime.fromisoformat(state["ended_at"])
    wall_s = (ended - first).total_seconds() if first else 0.0
    by_round = tps_by_round(experiment)
    mine, theirs = dict(by_round.get((1, 1), [])), dict(by_round.get((0, 1), []))
    ratios = [math.log(mine[r] / theirs[r]) for r in sorted(mine.keys() & theirs.keys())]
    return {
        "experiment": experiment.pk,
        "design": design,
        "case": case,
        "answer": point.get("sentence", ""),
        "verdict": point.get("verdict", ""),
        "answered_by": point.get("design", ""),
        "ended": state.get("ended", ""),
        "rounds": max(runs.values_list("round", flat=True), default=0),
        "runs": runs.count(),
        "failed_runs": runs.exclude(status=Run.Status.SUCCEEDED).count(),
        "wall_s": round(wall_s),
        "log_ratio_sd_pct": round(100 * statistics.stdev(ratios), 1) if len(ratios) > 1 else None,
        "mean_ratio_pct": round(100 * math.expm1(statistics.fmean(ratios)), 1) if ratios else None,
        "agent_cpu_pct_of_wall": round(100 * (agent_cpu_s(agent_pid) - cpu) / wall_s, 3)
        if wall_s
        else None,
        "agent_cpu_pct_of_windows": agent_share_of_windows(experiment),
        "load_avg_end": os.getloadavg(),
    }


def test_adaptive_duets_and_sequential_rounds_under_a_changing_background_load(
    transactional_db, tmp_path
):
    tries = int(setting("TRIES", "1"))
    cases = setting("CASES", "aa,plant").split(",")
    designs = setting("DESIGNS", "duet,sequential").split(",")
    plant = int(setting("PLANT", "500"))
    minutes = float(setting("MINUTES", "20"))
    rounds = int(setting("ROUNDS", "100"))
    out = Path(setting("OUT", "scratch/bench-duet.jsonl"))
    out.parent.mkdir(parents=True, exist_ok=True)

    build = PgBuild.objects.create(name="pg16", version="16", source="prebuilt")
    profile = ConfigProfileFactory(name="defaults", settings={})
    reference = workload("lookup n=1", 1)
    other = {"aa": workload("lookup n=1 again", 1), "plant": workload(f"lookup n={plant}", plant)}
    user = UserFactory()
    limit = {"BENCHLAB_MAX_REPEATS": str(rounds)}
    with running_lab(tmp_path, env=limit) as lab, override_settings(BENCHLAB_MAX_REPEATS=rounds):
        host = lab.wait_registered()
        burn_s = tries * len(cases) * len(designs) * (minutes + 3) * 60
        load = burner(burn_s, seed=int(setting("SEED", "36")))
        with load if setting("BURN", "1") == "1" else contextlib.nullcontext():
            for attempt in range(1, tries + 1):
                for case in cases:
                    for design in designs:
                        data = {
                            "name": f"bench {case} {design} try {attempt}",
                            "execution": "rounds",
                            "repeats": 3,
                            "clients": [1],
                            "duration_s": 5,
                            "adaptive": True,
                            "max_rounds": rounds,
                            "max_hours": minutes / 60,
                            "margin_pct": 5.0,
                            "duet": design == "duet",
                            "hosts": [host],
                            "builds": [build],
                            "config_profiles": [profile],
                            "workloads": [reference, other[case]],
                        }
                        load_start = os.getloadavg()
                        cpu = agent_cpu_s(lab.agent.pid)
                        experiment = services.experiment_schedule(user, data, True).experiment

                        def ended(experiment: Experiment = experiment) -> bool:
                            experiment.refresh_from_db()
                            return bool(experiment.adaptive_state.get("ended"))

                        wait_for(ended, (minutes + 5) * 60, "the experiment to end", lab.logs, 5)
                        row = summary(experiment, design, case, lab.agent.pid, cpu)
                        row.update(attempt=attempt, load_avg_start=load_start, plant=plant)
                        with out.open("a") as file:
                            file.write(json.dumps(row) + "\n")
                        sys.stdout.write(json.dumps(row) + "\n")
