"""Capacity searches: probes queued in rounds until every cell's search ends by itself.

A capacity search is an experiment at one client count of one cell, or of several
whose capacities it compares against the first (runs/analysis/capacity_compare.py).
Starting it queues the first round: each cell's probe at the lowest rate of its range
(pgbench -R; with `capacity_skip_limit_ms`, -L too). When a round's runs are all final
the control worker takes a step (`capacity_step`, task runs.tasks.capacity_step: sent
when a run of it ends, and from the reaper's pass, so a lost message or a restarted
worker only delays it): it reads and decides each cell's probes
(runs/analysis/capacity.py), then queues the next round, a probe for every cell whose
search goes on at the rate it asks for, the cells in a seeded random order, so that
the cells' probes interleave and neither always runs first; or it ends the search
(every cell's search is done, its budget of probes spent, a run failed or was
cancelled, the owner's queue is full). `Experiment.capacity_state` records why each
cell's search ended, why the whole ended, and the answer.
"""

import copy
import logging
import math
import random
from collections.abc import Sequence
from functools import partial
from typing import cast

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from agents.contract.errors import JobError
from agents.contract.spec.document import JobSpec, StorageSpec
from benchlab.celery import app
from runs.agentlink import transport
from runs.agentlink.execution import ROUNDS, Slot, derived_seed
from runs.agentlink.transport import CONTROL_QUEUE
from runs.analysis.capacity_compare import capacity_comparison, comparison_answer
from runs.inference.capacity_search import next_step
from runs.inference.equivalence import MAX_MARGIN_PCT, MIN_MARGIN_PCT
from runs.models import Experiment, Run
from runs.services.errors import LimitReached
from runs.services.limits import require_queue_room
from runs.services.queueing import Cell, CheckedCell, User, queue_slot

logger = logging.getLogger(__name__)

CAPACITY_TASK = "runs.tasks.capacity_step"
CAPACITY_FIELDS = (
    "capacity",
    "capacity_percentile",
    "capacity_limit_ms",
    "capacity_skip_limit_ms",
    "capacity_max_skipped_pct",
    "capacity_low_tps",
    "capacity_high_tps",
    "capacity_probes",
)
# What a stored spec holds of its dispatch, not of its cell (runs.services.jobs.dispatch).
DISPATCH_KEYS = ("run_id", "token", "job_id")
MAX_PROBES = 50
# The cells one search compares: the baseline and up to three others.
MAX_CELLS = 4
HIGHEST_RATE_TPS = 10_000_000.0
# A probe's histogram holds latencies up to an hour (agents/pgbench/txlog.py HIGHEST_US).
LONGEST_LIMIT_MS = 3_600_000.0
# The workload latency logs that log single transactions, which a probe's interval reads.
LOGS_OF_TRANSACTIONS = ("sampled", "full")
ENDED_CANCELLED = "a probe was cancelled"
ENDED_LIMIT = "the owner's queue is full (fair use)"
# A probe that one stall of the host shorter than this fails at any rate measures the
# host's hiccups: on the 2-vCPU lab VM stalls of 60 to 130 ms failed p99 <= 20 ms in half
# the 5 s windows at 20,000 tps (docs/benchmarks.md, "A comparison tried as a user").
HICCUP_MS = 250.0


def capacity_notes(experiment: Experiment) -> list[str]:
    """What the schedule says of a search before it starts: a window so short that one
    stall of the host fails a probe whatever the rate. A stall of S delays about S / W of
    a window W's transactions by up to S, so a probe fails once S passes the limit plus
    the percentile's tail share of the window. Called after require_capacity_design, so
    the percentile is below 100 and the tail above 0."""
    window_s, limit_ms = experiment.duration_s, experiment.capacity_limit_ms
    if not experiment.capacity or not window_s or not limit_ms:
        return []
    tail = 1 - experiment.capacity_percentile / 100
    failing_stall_ms = limit_ms + tail * window_s * 1000
    if failing_stall_ms >= HICCUP_MS:
        return []
    longer_s = math.ceil((HICCUP_MS - limit_ms) / 1000 / tail)
    return [
        f"capacity search: at p{experiment.capacity_percentile:g} over {window_s} s probes, "
        f"one stall of the host longer than {failing_stall_ms:.0f} ms fails a probe at any "
        "rate, so on a shared VM the capacity measures the host's hiccups; probes of "
        f"{longer_s} s or more need a stall of {HICCUP_MS:.0f} ms"
    ]


def require_capacity_design(experiment: Experiment, cells: Sequence[Cell]) -> None:
    """Raise JobError naming the field to fix when a capacity search cannot run as one."""
    if not experiment.capacity:
        return
    refusals: list[tuple[bool, str, str]] = [
        (
            experiment.adaptive,
            "a capacity search decides its own probes: untick adaptive",
            "adaptive",
        ),
        (
            experiment.duet,
            "a capacity search interleaves its cells' probes in rounds: untick duet",
            "duet",
        ),
        (
            experiment.execution != ROUNDS,
            "a capacity search runs in rounds: choose rounds",
            "execution",
        ),
        (
            not 1 <= len(cells) <= MAX_CELLS,
            f"a capacity search probes one cell, or compares up to {MAX_CELLS} (the first "
            f"is the baseline): the hosts, builds, config profiles, storage layouts and "
            f"workloads picked make {len(cells)}",
            "capacity",
        ),
        (
            len(cells) > 1 and not MIN_MARGIN_PCT <= experiment.margin_pct <= MAX_MARGIN_PCT,
            f"a comparison of capacities calls them the same within a margin between "
            f"{MIN_MARGIN_PCT:g} and {MAX_MARGIN_PCT:g} (percent)",
            "margin_pct",
        ),
        (
            any(cell.workload.processes for cell in cells),
            "a capacity search offers its rate to one pgbench process (each of several "
            "would get the whole -R): pick a workload without several processes",
            "workload.processes",
        ),
        (
            any(cell.workload.latency_log not in LOGS_OF_TRANSACTIONS for cell in cells),
            "a capacity search decides each probe from its logged transactions: pick a "
            "workload whose latency log is sampled or full",
            "workload.latency_log",
        ),
        (
            len(experiment.clients) != 1,
            "a capacity search offers its rates at one client count: give one, e.g. 4",
            "sweep.clients",
        ),
        (
            experiment.repeats != 1,
            "a capacity search repeats its probes where it needs to: give 1 repeat",
            "repeats",
        ),
        (
            not experiment.duration_s,
            "a capacity search's probes run for a duration: give "
            "one in seconds, not a transaction count",
            "sweep.duration_s",
        ),
        (
            not 0 < experiment.capacity_percentile < 100,
            "give the percentile of the objective between 0 and 100, e.g. 99",
            "capacity_percentile",
        ),
        (
            not 0 < (experiment.capacity_limit_ms or 0) <= LONGEST_LIMIT_MS,
            "give the latency limit of the objective in ms, above 0 and at most an hour "
            f"({LONGEST_LIMIT_MS:,.0f})",
            "capacity_limit_ms",
        ),
        (
            experiment.capacity_skip_limit_ms is not None
            and not 0 < experiment.capacity_skip_limit_ms <= LONGEST_LIMIT_MS,
            f"give the skip limit (-L) in ms above 0 and at most {LONGEST_LIMIT_MS:,.0f}, or none",
            "capacity_skip_limit_ms",
        ),
        (
            not 0 <= experiment.capacity_max_skipped_pct <= 100,
            "give the share of transactions that may be skipped between 0 and 100 (%)",
            "capacity_max_skipped_pct",
        ),
        (
            not 0 < (experiment.capacity_low_tps or 0) < HIGHEST_RATE_TPS,
            "give the lowest rate to offer in tps, above 0",
            "capacity_low_tps",
        ),
        (
            not (experiment.capacity_low_tps or 0)
            < (experiment.capacity_high_tps or 0)
            <= HIGHEST_RATE_TPS,
            "give the highest rate to offer in tps, above the lowest",
            "capacity_high_tps",
        ),
        (
            not 2 <= experiment.capacity_probes <= MAX_PROBES,
            f"give the most probes from 2 to {MAX_PROBES} (the range's two ends come first)",
            "capacity_probes",
        ),
    ]
    for refused, message, field in refusals:
        if refused:
            raise JobError("invalid_spec", message, field)


def probe_spec(experiment: Experiment, spec: JobSpec, rate_tps: float) -> JobSpec:
    """The cell's spec for one probe: the offered rate, and the search's skip limit."""
    probe = cast(JobSpec, {k: copy.deepcopy(v) for k, v in spec.items() if k not in DISPATCH_KEYS})
    probe["workload"]["rate_tps"] = rate_tps
    probe["workload"]["latency_limit_ms"] = experiment.capacity_skip_limit_ms
    return probe


def capacity_queue_first(
    experiment: Experiment, checked: Sequence[CheckedCell], user: User
) -> list[Run]:
    """Start a search: its state, and its first round, each cell's probe at the range's
    lowest rate, in the round's seeded order."""
    experiment.capacity_state = {"ended": "", "answer": "", "cells": {}}
    experiment.save(update_fields=["capacity_state"])
    rate = experiment.capacity_low_tps or 0.0
    queued = []
    for position, index in enumerate(round_order(experiment, 1, len(checked)), start=1):
        first = checked[index]
        probe = CheckedCell(first.cell, probe_spec(experiment, first.spec, rate), first.notes)
        queued.append(queue_slot(experiment, probe, Slot(position, first.cell.index, 1), user))
    return queued


def round_order(experiment: Experiment, number: int, count: int) -> list[int]:
    """The order of `count` cells' probes in round `number`, drawn from the experiment's
    seed (recorded, so a search's order can be told again)."""
    order = list(range(count))
    random.Random(derived_seed(experiment.seed, -number)).shuffle(order)
    return order


def capacity_step_after_commit(run: Run) -> None:
    """When the run's experiment is a capacity search, have the control worker take its
    next step once the caller commits."""
    if not run.experiment.capacity:
        return
    step = partial(capacity_step_send, run.experiment_id)
    transport.send_after_commit(run.pk, "capacity step", step)


def capacity_step_send(experiment_pk: int) -> None:
    app.send_task(CAPACITY_TASK, args=[experiment_pk], queue=CONTROL_QUEUE)


def capacity_steps_due() -> int:
    """Take the step of every capacity search not ended whose runs are all final (the
    reaper's pass). Returns how many stepped."""
    waiting = (
        Experiment.objects.filter(capacity=True, capacity_state__ended="", runs__isnull=False)
        .exclude(runs__status__in=Run.ACTIVE_STATES)
        .distinct()
    )
    return sum(capacity_step(pk) for pk in waiting.values_list("pk", flat=True))


def capacity_step(experiment_pk: int) -> bool:
    """Queue the next probe, or end the search, once its latest probe is final.

    Idempotent: a step while a probe still runs, or after the end, changes nothing
    (False). Holds the experiment's row lock, so two steps never queue a probe twice.
    """
    with transaction.atomic():
        experiment = (
            Experiment.objects.select_for_update(no_key=True)
            .filter(pk=experiment_pk, capacity=True)
            .first()
        )
        if experiment is None or experiment.capacity_state.get("ended", "") != "":
            return False
        runs = experiment.runs.filter(round__isnull=False)
        if not runs.exists() or runs.filter(status__in=Run.ACTIVE_STATES).exists():
            return False
        state = experiment.capacity_state
        ended = _take_step(experiment, state)
        if ended:
            state["ended"], state["ended_at"] = ended, timezone.now().isoformat()
        experiment.capacity_state = state
        experiment.save(update_fields=["capacity_state"])
    logger.info("experiment %s: capacity step: %s", experiment_pk, ended or "probe queued")
    return True


def _take_step(experiment: Experiment, state: dict[str, object]) -> str:
    """Queue the round the cells' searches ask for next; return why the search ends
    instead, or "". Records each cell's end and the answer in `state`."""
    # Read once: the probes this step queues have no result to change the reading.
    compared = capacity_comparison(experiment)
    state["answer"] = comparison_answer(compared)
    runs = experiment.runs.filter(round__isnull=False)
    if runs.filter(status=Run.Status.CANCELLED).exists():
        return ENDED_CANCELLED
    failed = runs.exclude(status=Run.Status.SUCCEEDED).order_by("round").first()
    if failed is not None:
        return f"probe {failed.round} (run {failed.pk}) {failed.status}: {failed.error_message}"
    nexts: dict[int, float] = {}
    ends: dict[str, str] = {}
    for item in compared:
        step = next_step(item.reading.plan, item.reading.objective, item.reading.outcomes)
        if step.next_tps is None:
            ends[str(item.cell)] = str(step.ended)
        else:
            nexts[item.cell] = step.next_tps
    state["cells"] = ends
    if not nexts:
        return "; ".join(dict.fromkeys(ends.values()))
    try:
        _queue_round(experiment, nexts)
    except LimitReached as exc:
        logger.warning("experiment %s: no next probe: %s", experiment.pk, exc.message)
        return ENDED_LIMIT
    return ""


def _queue_round(experiment: Experiment, rates: dict[int, float]) -> list[Run]:
    """Queue the next round: each cell of `rates` probed at its rate (the cell's first
    probe's spec at that rate), in the round's seeded order."""
    require_queue_room(experiment.created_by, len(rates))
    latest = experiment.runs.aggregate(round=Max("round"), position=Max("position"))
    number, position = (latest["round"] or 0) + 1, latest["position"] or 0
    cells = sorted(rates)
    queued = []
    for index in round_order(experiment, number, len(cells)):
        position += 1
        queued.append(_queue_probe(experiment, cells[index], rates[cells[index]], position, number))
    return queued


def _queue_probe(
    experiment: Experiment, cell_index: int, rate_tps: float, position: int, number: int
) -> Run:
    """Queue a probe of a cell at `rate_tps`: its first probe's cell and spec at that rate."""
    first = experiment.runs.filter(round=1, cell=cell_index).order_by("pk").first()
    if first is None:
        raise ValueError(f"experiment {experiment.pk} has no first probe of cell {cell_index}")
    storage: StorageSpec = {"data": first.storage_data, "wal": first.storage_wal or None}
    cell = Cell(first.cell, first.host, first.build, first.config_profile, storage, first.workload)
    spec = probe_spec(experiment, cast(JobSpec, first.spec), rate_tps)
    slot = Slot(position, first.cell, number)
    return queue_slot(experiment, CheckedCell(cell, spec, []), slot, experiment.created_by)
