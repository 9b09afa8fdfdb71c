"""One run of an experiment's cell queued for its slot in the execution order.

`runs.services.experiments` queues an experiment's planned rounds through it, and
`runs.services.adaptive` the rounds an adaptive experiment adds.
"""

import copy
from dataclasses import dataclass

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as DjangoUser

from agents.contract.spec.document import JobSpec, StorageSpec
from runs.agentlink.execution import Slot, derived_seed
from runs.models import ConfigProfile, Experiment, Host, PgBuild, Run, Workload
from runs.services.jobs.dispatch import run_dispatch

User = AbstractBaseUser | AnonymousUser | None


@dataclass(frozen=True)
class Cell:
    """One cell of an experiment's matrix; `index` is its place in matrix order."""

    index: int
    host: Host
    build: PgBuild
    config_profile: ConfigProfile
    storage: StorageSpec
    workload: Workload


@dataclass(frozen=True)
class CheckedCell:
    """A cell with its validated spec and the notes the check made (e.g. no catalogue)."""

    cell: Cell
    spec: JobSpec
    notes: list[str]


def slot_spec(experiment: Experiment, spec: JobSpec, slot: Slot) -> JobSpec:
    """The cell's spec for one run: the repeat it measures and its client-order seed."""
    for_slot = copy.deepcopy(spec)
    for_slot["sweep"]["first_repeat"] = slot.round or 1
    if for_slot["sweep"]["order"] == "random":
        for_slot["sweep"]["seed"] = derived_seed(experiment.seed, slot.position)
    return for_slot


def queue_slot(experiment: Experiment, checked: CheckedCell, slot: Slot, user: User) -> Run:
    """Create the run of `checked`'s cell for `slot` and send its job after the commit."""
    run, spec = create_slot_run(experiment, checked, slot, user)
    run_dispatch(run, spec)
    return run


def create_slot_run(
    experiment: Experiment, checked: CheckedCell, slot: Slot, user: User
) -> tuple[Run, JobSpec]:
    """The run of `checked`'s cell for `slot`, created, and the spec to dispatch it with."""
    cell, spec = checked.cell, slot_spec(experiment, checked.spec, slot)
    run = Run.objects.create(
        experiment=experiment,
        host=cell.host,
        build=cell.build,
        config_profile=cell.config_profile,
        workload=cell.workload,
        storage_data=spec["storage"]["data"],
        storage_wal=spec["storage"]["wal"] or "",
        position=slot.position,
        cell=slot.cell,
        round=slot.round,
        created_by=owner(user),
        client_host=experiment.client_host,
    )
    return run, spec


def owner(user: User) -> DjangoUser | None:
    """The owner to record: the signed-in user, none for an anonymous or absent one."""
    return user if isinstance(user, DjangoUser) else None
