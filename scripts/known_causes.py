"""`scripts/bench causes`: known causes through the real agent and the lab's comparison.

A script, not a `manage.py` command: it runs the agent's jobs in this process, and the
lab's code (runs/) imports nothing of the agent but its contract.

Each case is two cells that differ in one setting: each cell one job of the real
agent (real PostgreSQL 16, real pgbench, `repeats` points of 2 clients with a
CHECKPOINT before each), or in rounds one job (its own cluster) a repeat, the two
cells in a random order each round, each round its own run as the lab's rounds
store them; the points stored as the control worker stores them, and the two
cells compared as the compare page compares them (its statistics, top movers
with BH across the cell's counters). Printed, per case: the top three movers
in words, the near ones, what could not be collected, and whether the cause's
counter came first with no false mover in the top three (docs/benchmarks.md,
"Known causes through the real lab").
"""

import argparse
import json
import os
import random
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchlab.settings")
django.setup()

from django.utils import timezone  # noqa: E402

from agents.config import AgentConfig  # noqa: E402
from agents.events import EventEmitter  # noqa: E402
from agents.job import run_job  # noqa: E402
from runs.management import synthetic  # noqa: E402
from runs.management.commands.bench_pages import (  # noqa: E402
    machine,
    require_throwaway_database,
)
from runs.models import Comparison, ConfigProfile, Experiment, Run  # noqa: E402
from runs.services.jobs.events import store_point  # noqa: E402
from runs.stats_tables import comparison_statistics  # noqa: E402

SELECT_ONLY = {"scripts": [{"builtin": "select-only", "weight": 1}]}
SORT = "SELECT aid FROM pgbench_accounts ORDER BY abalance, filler OFFSET 50000 LIMIT 1;\n"
SORTING = {"scripts": [{"name": "sort", "text": SORT, "weight": 1}]}
WAL_TRANSACTIONS = 1500
# The sort's points hold a fixed count too: each window also counts the system catalogs'
# rows pgbench's connections read, which per transaction follow how many a window holds.
SORTS = 30


@dataclass(frozen=True)
class Case:
    """Two cells differing in `baseline` against `other` settings; the counters the cause
    moves (`cause`: one of them must come first) and those that must not be in the top
    three (`false`); `sections` override the spec of both cells; `rounds`: always
    measured in rounds (a cause that only a fresh cluster shows in every repeat)."""

    name: str
    baseline: dict[str, str]
    other: dict[str, str]
    cause: tuple[str, ...]
    false: tuple[str, ...] = ()
    sections: dict[str, Any] = field(default_factory=dict)
    other_sections: dict[str, Any] = field(default_factory=dict)
    rounds: bool = False


def _fixed(transactions: int) -> dict[str, Any]:
    return {"sweep": {"duration_s": None, "transactions": transactions}}


CASES = (
    Case("A/A", {}, {}, (), sections=_fixed(WAL_TRANSACTIONS)),
    Case(
        "full_page_writes on → off",
        {},
        {"full_page_writes": "off"},
        ("wal.fpi", "wal.bytes"),
        sections=_fixed(WAL_TRANSACTIONS),
    ),
    Case(
        "synchronous_commit on → off",
        {},
        {"synchronous_commit": "off"},
        ("wal.syncs", "wal.sync_time_ms", "waits.io"),
        sections=_fixed(WAL_TRANSACTIONS),
    ),
    Case(
        "wal_compression off → on",
        {},
        {"wal_compression": "on"},
        ("wal.bytes",),
        sections=_fixed(WAL_TRANSACTIONS),
    ),
    Case(
        "shared_buffers 128MB → 128kB, select-only at scale 2",
        {"shared_buffers": "128MB"},
        {"shared_buffers": "128kB"},
        (
            "db.blks_read",
            "io.reads",
            "tables.heap_blks_read",
            "tables.idx_blks_read",
            "io.evictions",
            "bgwriter.buffers_alloc",
        ),
        sections={"workload": SELECT_ONLY, "dataset": {"scale": 2}},
    ),
    Case(
        "work_mem 64MB → 64kB, a sort",
        {"work_mem": "64MB"},
        {"work_mem": "64kB"},
        ("db.temp_files", "db.temp_bytes"),
        sections={"workload": SORTING, **_fixed(SORTS)},
    ),
    # At fillfactor 100 the first update of each accounts page goes to a new page and the
    # later ones stay on it (pruning leaves room): a one-off of the first pass over the
    # table, which repeats in one cluster count in their first point only. Each repeat in
    # a fresh cluster makes the pass again (rounds, as a rigorous experiment runs them).
    Case(
        "fillfactor 100 → 70, tpcb-like, in rounds",
        {},
        {},
        (
            "tables.accounts_newpage_updates",
            "tables.newpage_updates",
            "tables.accounts_hot_updates",
            "tables.hot_updates",
        ),
        sections={"dataset": {"fillfactor": 100}, **_fixed(WAL_TRANSACTIONS)},
        other_sections={"dataset": {"fillfactor": 70}},
        rounds=True,
    ),
    Case(
        "checkpoint_timeout 1h → 30s, points of 40 s",
        {"checkpoint_timeout": "1h"},
        {"checkpoint_timeout": "30s"},
        ("checkpoints.timed", "wal.fpi", "wal.bytes", "checkpoints.buffers_written"),
        false=("bgwriter.buffers_backend", "io.client_writes"),
        sections={"sweep": {"duration_s": 40}},
    ),
)


def _spec(settings: dict[str, str], repeats: int, *overrides: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "version": 1,
        "run_id": "causes",
        "postgres": {"version": "16", "source": "prebuilt"},
        "storage": {"data": "data", "wal": "wal"},
        "dataset": {"scale": 1},
        "workload": {"scripts": [{"builtin": "tpcb-like", "weight": 1}]},
        "settings": settings,
        "sweep": {
            "clients": [2],
            "duration_s": 3,
            "warmup_s": 0,
            "repeats": repeats,
            "between_points": "checkpoint",
        },
    }
    for override in overrides:
        for section, value in override.items():
            spec[section] = {**spec[section], **value} if section in spec else value
    return spec


def _points(spec: dict[str, Any], storage: Path, name: str) -> list[Any]:
    """The points of one real job of `spec`."""
    config = AgentConfig(storage={"data": storage / "data", "wal": storage / "wal"})
    emitter = EventEmitter([lambda event: None], run_id="causes")
    document = run_job(spec, config, emitter, bool)
    if document["status"] != "succeeded":
        raise RuntimeError(f"{name}: the job failed: {document['error']}")
    points: list[Any] = document["points"]
    return points


def _stored(
    experiment: Experiment,
    spec: dict[str, Any],
    points: list[Any],
    cell: int,
    round_number: int | None,
) -> Run:
    """`points` stored in a new run of `experiment` (in rounds: of that cell and round)."""
    run = Run.objects.create(
        experiment=experiment,
        host=experiment.hosts.get(),
        build=experiment.builds.get(),
        config_profile=ConfigProfile.objects.create(name=f"cell{cell}-{secrets.token_hex(4)}"),
        workload=experiment.workloads.get(),
        storage_data="default",
        token=secrets.token_hex(16),
        status=Run.Status.SUCCEEDED,
        spec=spec,
        started_at=timezone.now(),
        finished_at=timezone.now(),
        cell=cell,
        round=round_number,
    )
    for point in points:
        store_point(run, point)
    return run


def _cells(
    experiment: Experiment, specs: list[dict[str, Any]], storage: Path, rounds: bool
) -> list[Run]:
    """The run standing for each cell of `specs`: one job a cell, or in rounds one job a
    repeat, the cells in a random order each round."""
    if not rounds:
        return [
            _stored(experiment, spec, _points(spec, storage, f"cell {cell}"), cell, None)
            for cell, spec in enumerate(specs)
        ]
    first: dict[int, Run] = {}
    for repeat in range(1, specs[0]["sweep"]["repeats"] + 1):
        for cell in random.sample(range(len(specs)), len(specs)):
            sweep = {**specs[cell]["sweep"], "repeats": 1, "first_repeat": repeat}
            spec = {**specs[cell], "sweep": sweep}
            points = _points(spec, storage, f"cell {cell}, round {repeat}")
            first.setdefault(cell, _stored(experiment, spec, points, cell, repeat))
    return [first[cell] for cell in range(len(specs))]


def _movers(baseline: Run, other: Run) -> dict[str, Any]:
    comparison = Comparison.objects.create(name="known cause", baseline=baseline)
    comparison.runs.set([baseline, other])
    statistics = comparison_statistics(comparison, min_effect_pct=1.0).document
    cells: list[dict[str, Any]] = statistics["top_movers"]  # type: ignore[assignment]
    return dict(cells[0])


def _verdict(case: Case, cell: dict[str, Any]) -> str:
    top = [[mover["counter"], *mover["copies"]] for mover in cell["movers"]]
    if not case.cause:
        return "met" if not top else "false mover"
    if not top or not set(top[0]) & set(case.cause):
        return "cause not first"
    if any(set(keys) & set(case.false) for keys in top):
        return "false mover in the top three"
    return "met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", help="run the cases whose name contains this")
    parser.add_argument("--json", type=Path, help="also write every case's movers here")
    parser.add_argument(
        "--rounds", action="store_true", help="every case in rounds (each repeat its own job)"
    )
    options = parser.parse_args()
    require_throwaway_database()
    say(machine())
    found: list[dict[str, Any]] = []
    for case in CASES:
        if options.only and options.only not in case.name:
            continue
        started = time.monotonic()
        experiment = synthetic.experiment(f"causes-{secrets.token_hex(4)}")
        with tempfile.TemporaryDirectory(prefix="causes-", dir="/var/tmp") as storage:
            root = Path(storage)
            root.chmod(0o755)
            specs = [
                _spec(case.baseline, options.repeats, case.sections),
                _spec(case.other, options.repeats, case.sections, case.other_sections),
            ]
            baseline, other = _cells(experiment, specs, root, options.rounds or case.rounds)
        cell = _movers(baseline, other)
        verdict = _verdict(case, cell)
        found.append({"case": case.name, "verdict": verdict, **cell})
        say(f"\n{case.name} ({time.monotonic() - started:.0f} s): {verdict}")
        for mover in cell["movers"]:
            say(f"  mover: {mover['words']}")
        if not cell["movers"]:
            say("  no counter moved beyond noise")
        for mover in cell["near"]:
            say(f"  near: {mover['words']} (p = {mover['p']:.3g})")
        if cell["not_collected"]:
            say("  not collected: " + "; ".join(cell["not_collected"]))
    if options.json:
        options.json.write_text(json.dumps(found, indent=1, default=str))


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
