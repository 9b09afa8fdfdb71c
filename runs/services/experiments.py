"""Experiments: schedule (create, check once, start), estimate, and queue their runs.

Every cell's spec is validated once per action: `experiment_schedule` (the
form and the API) creates the experiment, checks each cell and, when asked,
queues the runs from the specs it just checked; `experiment_start` does the
check and the queueing for an experiment created as a draft.
"""

import copy
import itertools
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import transaction
from django.db.models import Model

from agents.contract.errors import JobError
from agents.contract.spec.document import (
    DEFAULTS,
    SPEC_VERSION,
    JobSpec,
    NetworkSpec,
    PostgresSpec,
    StorageSpec,
    SweepSpec,
)
from agents.contract.spec.fields import SWEEP, defaults
from agents.contract.vocabulary import Source
from runs.agentlink.execution import ROUNDS, execution_plan
from runs.agentlink.row_fields import EXPERIMENT_ROW_FIELDS, section_values
from runs.models import Experiment, Host, PgBuild, Run
from runs.services.adaptive import (
    adaptive_plan,
    require_adaptive_design,
)
from runs.services.capacity import (
    capacity_notes,
    capacity_queue_first,
    require_capacity_design,
)
from runs.services.duet import queue_duet_round, require_duet_design
from runs.services.errors import Conflict
from runs.services.estimating import Estimate, cells_estimate
from runs.services.history.imported import refuse_imported
from runs.services.hosts.capabilities import require_capable_hosts, require_client_host_reported
from runs.services.hosts.space import require_room
from runs.services.limits import require_queue_room, require_repeats_within_limit
from runs.services.queueing import Cell, CheckedCell, User, owner, queue_slot
from runs.services.retry import retry_on_conflict
from runs.services.spec_sections import workload_spec
from runs.services.validation import check_job_spec

logger = logging.getLogger(__name__)

DEFAULT_STORAGE_LAYOUT: StorageSpec = {"data": "default", "wal": None}

M2M_FIELDS = ("hosts", "builds", "config_profiles", "workloads")
STORAGE_ROLES = ("data", "wal")


@dataclass(frozen=True)
class Scheduled:
    """What `experiment_schedule` made: the experiment, its queued runs (none for a
    draft) and the notes of the check."""

    experiment: Experiment
    runs: list[Run]
    notes: list[str] = field(default_factory=list)


@retry_on_conflict
def experiment_schedule(user: User, data: dict[str, object], start: bool) -> Scheduled:
    """Create an experiment, validate every cell's spec once and, with `start`, queue its runs.

    `data` holds the Experiment fields plus `hosts`, `builds`,
    `config_profiles`, `workloads` (lists of model instances); `seed` may be
    left out and is then drawn. Raises JobError naming the field to fix;
    nothing is saved then.
    """
    with transaction.atomic():
        experiment = _experiment_create(user, data)
        checked = experiment_check(experiment)
        runs = _queue_runs(experiment, checked, user) if start else []
    logger.info(
        "experiment %s scheduled by %s: %s, %d runs queued",
        experiment.pk,
        user,
        experiment.execution,
        len(runs),
    )
    notes = sorted({note for item in checked for note in item.notes})
    return Scheduled(experiment, runs, notes)


@retry_on_conflict
def experiment_start(experiment: Experiment, user: User = None) -> list[Run]:
    """Expand a draft experiment into queued runs and send each job after the commit.

    Every cell is validated before any run is created; the first bad one
    raises JobError and nothing is queued. Raises Conflict when the
    experiment already has runs (its order is recorded once).
    """
    with transaction.atomic():
        locked = Experiment.objects.select_for_update(no_key=True).get(pk=experiment.pk)
        if locked.runs.exists():
            raise Conflict(
                f"experiment {locked.pk} is already started: re-run single runs from their "
                "pages, or schedule a new experiment"
            )
        runs = _queue_runs(locked, experiment_check(locked), user)
    logger.info("experiment %s started: %d runs queued", experiment.pk, len(runs))
    return runs


def _experiment_create(user: User, data: dict[str, object]) -> Experiment:
    values = {k: v for k, v in data.items() if k not in M2M_FIELDS}
    values.setdefault("storage_layouts", [dict(DEFAULT_STORAGE_LAYOUT)])
    if values.get("seed") is None:
        values.pop("seed", None)
    given = {name: list(cast(Iterable[Model], data.get(name, []))) for name in M2M_FIELDS}
    values["cell_order"] = {name: [item.pk for item in items] for name, items in given.items()}
    experiment = Experiment.objects.create(created_by=owner(user), **values)
    for name, items in given.items():
        getattr(experiment, name).set(items)
    return experiment


def experiment_cells(experiment: Experiment) -> list[Cell]:
    """The matrix hosts x builds x configs x storage layouts x workloads, hosts outermost,
    each axis in the order it was given (`Experiment.cell_order`): the first cell is the
    one the user put first, the reference of adaptive looks and the default baseline."""
    given = {axis: _in_given_order(experiment, axis) for axis in M2M_FIELDS}
    return _matrix(experiment, given)


def _matrix(experiment: Experiment, given: Mapping[str, list[Any]]) -> list[Cell]:
    """The cells of the hosts, builds, configs and workloads given, in that order, with the
    experiment's storage layouts between configs and workloads."""
    product = itertools.product(
        given["hosts"],
        given["builds"],
        given["config_profiles"],
        experiment.storage_layouts or [DEFAULT_STORAGE_LAYOUT],
        given["workloads"],
    )
    return [Cell(index, *values) for index, values in enumerate(product)]


def _in_given_order(experiment: Experiment, axis: str) -> list[Any]:
    """One axis's members in the order given; any not recorded (experiments made before
    the order was kept) after them, by name."""
    given: list[int] = (experiment.cell_order or {}).get(axis, [])
    place = {pk: position for position, pk in enumerate(given)}
    members = list(getattr(experiment, axis).order_by("name"))
    return sorted(members, key=lambda member: place.get(member.pk, len(place)))


def postgres_spec(build: PgBuild) -> PostgresSpec:
    """The job spec's `postgres` section; a source build carries its whole definition."""
    definition = build.definition if build.source == PgBuild.Source.BUILD else None
    return {"version": build.version, "source": cast(Source, build.source), "build": definition}


def build_job_spec(experiment: Experiment, cell: Cell) -> JobSpec:
    """The job spec of one cell (docs/contracts.md, section 1), without run_id and token.

    In rounds each run measures one repeat, so the cell's sweep has one.
    """
    return {
        "version": SPEC_VERSION,
        "run_id": None,
        "token": None,
        "job_id": None,
        "postgres": postgres_spec(cell.build),
        "settings": cell.config_profile.effective_settings(),
        "storage": {"data": cell.storage.get("data", ""), "wal": cell.storage.get("wal") or None},
        **workload_spec(cell.workload),
        "sweep": job_sweep(experiment),
        "network": _network(experiment),
    }


def job_sweep(experiment: Experiment) -> SweepSpec:
    """The sweep of each of the experiment's jobs: the row's fields and the declared defaults
    of the others (those set for each job). In rounds each job measures one repeat."""
    sweep = {**defaults(SWEEP), **section_values(EXPERIMENT_ROW_FIELDS, experiment)}
    if experiment.execution == ROUNDS:
        sweep["repeats"] = 1
    return cast(SweepSpec, sweep)


def _network(experiment: Experiment) -> NetworkSpec:
    """The spec's `network` section: the server half naming the client host, if there is one."""
    network = cast(NetworkSpec, copy.deepcopy(DEFAULTS["network"]))
    if experiment.client_host is not None:
        network["role"], network["peer"] = "server", experiment.client_host.name
    return network


def _describe(cell: Cell) -> str:
    return (
        f"host {cell.host.name}, build {cell.build.name}, config {cell.config_profile.name}, "
        f"workload {cell.workload.name}"
    )


def experiment_check(experiment: Experiment) -> list[CheckedCell]:
    """Build and validate the spec of every cell, once each, in matrix order.

    Raises JobError naming the spec field to fix, its message saying which
    cell it is about.
    """
    require_repeats_within_limit(experiment.repeats)
    _require_one_stop_condition(experiment)
    _require_a_matrix(experiment)
    refuse_imported(experiment)
    _require_approved_hosts(experiment)
    require_client_host_reported(experiment)
    require_capable_hosts(experiment)
    _require_storage_targets(experiment)
    cells = experiment_cells(experiment)
    require_adaptive_design(experiment, len(cells))
    require_capacity_design(experiment, cells)
    duet_notes = require_duet_design(experiment, cells)
    checked = [_check_cell(experiment, cell) for cell in cells]
    _require_room(checked)
    checked[0].notes.extend(duet_notes + capacity_notes(experiment))
    return checked


def _require_room(checked: list[CheckedCell]) -> None:
    """Each cell's dataset fits its targets' last reported free space (runs.services.hosts.space);
    a cell's notes say where no figure was reported yet."""
    for item in checked:
        try:
            item.notes.extend(require_room([(item.cell.host, item.spec)]))
        except JobError as exc:
            message = f"{exc.message} ({_describe(item.cell)})"
            raise JobError(exc.code, message, field=exc.field) from exc


def _require_one_stop_condition(experiment: Experiment) -> None:
    """Points run for a duration or a transaction count: exactly one (a question about the
    experiment, asked once rather than as each cell's spec check)."""
    if experiment.duration_s and experiment.transactions:
        message = "give a duration or a transaction count, not both"
        raise JobError("invalid_spec", message, field="sweep.transactions")
    if not experiment.duration_s and not experiment.transactions:
        message = "give a duration in seconds or a transaction count"
        raise JobError("invalid_spec", message, field="sweep.duration_s")


def _require_a_matrix(experiment: Experiment) -> None:
    """Every axis of the matrix needs an entry; the first empty one is the field to fix."""
    for axis in M2M_FIELDS:
        if not getattr(experiment, axis).exists():
            what = axis.replace("_", " ").removesuffix("s")
            raise JobError("empty_matrix", f"choose at least one {what}", field=axis)


def _require_approved_hosts(experiment: Experiment) -> None:
    """Jobs go to approved hosts only: no other agent shares a secret with the lab."""
    others = experiment.hosts.exclude(enrollment=Host.Enrollment.APPROVED).order_by("name")
    names = [host.name for host in others]
    if names:
        raise JobError(
            "host_not_approved",
            f"host {', '.join(names)} is not approved; an administrator approves a new agent "
            "on the hosts page",
            field="hosts",
        )
    _require_usable_client_host(experiment)


def _require_usable_client_host(experiment: Experiment) -> None:
    """A client host is approved and is not one of the server hosts."""
    client = experiment.client_host
    if client is None:
        return
    if not client.is_approved:
        raise JobError(
            "host_not_approved",
            f"client host {client.name} is not approved; an administrator approves a new agent "
            "on the hosts page",
            field="client_host",
        )
    if experiment.hosts.filter(pk=client.pk).exists():
        raise JobError(
            "invalid_spec",
            f"{client.name} is a server host of this experiment: pick another client host, or "
            "none to run pgbench on each server host",
            field="client_host",
        )


def _require_storage_targets(experiment: Experiment) -> None:
    """Every target a layout names exists on each host that reported its targets.

    The agent refuses the others as well, but only when their run's turn comes.
    """
    layouts = experiment.storage_layouts or [DEFAULT_STORAGE_LAYOUT]
    named = [(role, lay[role]) for lay in layouts for role in STORAGE_ROLES if lay.get(role)]
    for host in experiment.hosts.prefetch_related("storage_targets").order_by("name"):
        known = {target.name for target in host.storage_targets.all()}
        for role, name in named:
            if known and name not in known:
                raise JobError(
                    "storage_unknown",
                    f"host {host.name} has no storage target “{name}” "
                    f"(it has: {', '.join(sorted(known))})",
                    field=f"storage.{role}",
                )


def _check_cell(experiment: Experiment, cell: Cell) -> CheckedCell:
    try:
        spec, notes = check_job_spec(build_job_spec(experiment, cell))
    except JobError as exc:
        message = f"{exc.message} ({_describe(cell)})"
        raise JobError(exc.code, message, field=exc.field) from exc
    return CheckedCell(cell, spec, notes)


def experiment_estimate(experiment: Experiment) -> Estimate:
    """How many runs and points starting would queue, and a rough wall-clock time."""
    return cells_estimate(experiment, experiment_cells(experiment), job_sweep(experiment))


def draft_estimate(data: dict[str, object]) -> Estimate:
    """The estimate of an experiment not saved yet, from the values `experiment_schedule`
    takes (the schedule form's, as the user fills it in): the same rule as a saved one's,
    with nothing written. Raises JobError naming the field to fix when the experiment's
    shape is one scheduling refuses (too many repeats, an adaptive design that cannot run)."""
    values = {key: value for key, value in data.items() if key not in M2M_FIELDS}
    values.setdefault("storage_layouts", [dict(DEFAULT_STORAGE_LAYOUT)])
    draft = Experiment(**{key: value for key, value in values.items() if value is not None})
    given = {name: list(cast(Iterable[Model], data.get(name, []))) for name in M2M_FIELDS}
    cells = _matrix(draft, given)
    require_repeats_within_limit(draft.repeats)
    require_adaptive_design(draft, len(cells))
    require_capacity_design(draft, cells)
    return cells_estimate(draft, cells, job_sweep(draft))


def _queue_runs(experiment: Experiment, checked: list[CheckedCell], user: User) -> list[Run]:
    """Create and queue the runs in the experiment's execution order (runs/agentlink/execution.py).

    Jobs are sent after the commit in this order, one queue per host, and an
    agent takes one job at a time from its queue, oldest first: each host
    runs its runs in the recorded order. Raises LimitReached when the user
    would have more runs queued than fair use allows (runs.services.limits).
    """
    if experiment.capacity:
        require_queue_room(user, len(checked))
        return capacity_queue_first(experiment, checked, user)
    plan = execution_plan(len(checked), experiment.repeats, experiment.execution, experiment.seed)
    require_queue_room(user, len(plan))
    if experiment.adaptive:
        experiment.adaptive_state = adaptive_plan(experiment)
        experiment.save(update_fields=["adaptive_state"])
    if experiment.duet:
        rounds = itertools.groupby(plan, key=lambda slot: slot.round)
        return [
            run
            for _round, slots in rounds
            for run in queue_duet_round(
                experiment, [(checked[slot.cell], slot) for slot in slots], user
            )
        ]
    return [queue_slot(experiment, checked[slot.cell], slot, user) for slot in plan]
