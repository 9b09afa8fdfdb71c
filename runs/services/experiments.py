"""Experiments: create, check, estimate and start (expand into runs and queue them)."""

import itertools
import logging
import secrets
import uuid
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from agents.errors import JobError
from agents.spec import SPEC_VERSION, sweep_points
from runs import transport
from runs.models import ConfigProfile, Experiment, Host, PgBuild, Run, Workload
from runs.services.specs import workload_spec
from runs.services.validation import check_job_spec

logger = logging.getLogger(__name__)

DEFAULT_STORAGE_LAYOUT = {"data": "default", "wal": None}
# Rough cost of one cluster lifecycle besides the measured points (initdb,
# start, pgbench -i at a small scale, stop); estimates say they are rough.
RUN_OVERHEAD_S = 30
SCALE_LOAD_S_PER_UNIT = 0.5

M2M_FIELDS = ("hosts", "builds", "config_profiles", "workloads")


@dataclass(frozen=True)
class Cell:
    """One cell of an experiment's matrix, in the order runs are created and queued."""

    host: Host
    build: PgBuild
    config_profile: ConfigProfile
    storage: dict
    workload: Workload


def experiment_create(user, data: dict) -> Experiment:
    """Create an experiment from plain values and model lists; check every cell's spec.

    `data` holds the Experiment fields plus `hosts`, `builds`,
    `config_profiles`, `workloads` (lists of model instances). Raises JobError
    naming the field to fix; nothing is saved then.
    """
    values = {k: v for k, v in data.items() if k not in M2M_FIELDS}
    values.setdefault("storage_layouts", [dict(DEFAULT_STORAGE_LAYOUT)])
    with transaction.atomic():
        experiment = Experiment.objects.create(created_by=user, **values)
        for name in M2M_FIELDS:
            getattr(experiment, name).set(data.get(name, []))
        experiment_check(experiment)
    logger.info("experiment %s created by %s", experiment.pk, user)
    return experiment


def experiment_cells(experiment: Experiment) -> list[Cell]:
    """The matrix hosts x builds x configs x storage layouts x workloads, hosts outermost."""
    product = itertools.product(
        experiment.hosts.order_by("name"),
        experiment.builds.order_by("name"),
        experiment.config_profiles.order_by("name"),
        experiment.storage_layouts or [DEFAULT_STORAGE_LAYOUT],
        experiment.workloads.order_by("name"),
    )
    return [Cell(*values) for values in product]


def build_job_spec(experiment: Experiment, cell: Cell) -> dict:
    """The job spec of one cell (docs/contracts.md, section 1), without run_id and token."""
    return {
        "version": SPEC_VERSION,
        "postgres": {"version": cell.build.version, "source": cell.build.source},
        "settings": cell.config_profile.effective_settings(),
        "storage": {"data": cell.storage.get("data"), "wal": cell.storage.get("wal") or None},
        **workload_spec(cell.workload),
        "sweep": {
            "clients": experiment.clients,
            "threads": experiment.threads,
            "duration_s": experiment.duration_s,
            "transactions": experiment.transactions,
            "repeats": experiment.repeats,
            "order": experiment.order,
            "warmup_s": experiment.warmup_s,
            "between_points": experiment.between_points,
        },
    }


def _describe(cell: Cell) -> str:
    return (
        f"host {cell.host.name}, build {cell.build.name}, config {cell.config_profile.name}, "
        f"workload {cell.workload.name}"
    )


def experiment_check(experiment: Experiment) -> list[tuple[Cell, dict, list[str]]]:
    """Build and validate the spec of every cell; return (cell, normalised spec, notes).

    Raises JobError naming the spec field to fix, its message saying which
    cell it is about.
    """
    cells = experiment_cells(experiment)
    if not cells:
        raise JobError(
            "invalid_spec",
            "choose at least one host, build, config profile and workload",
            field="matrix",
        )
    checked = []
    for cell in cells:
        try:
            spec, notes = check_job_spec(build_job_spec(experiment, cell))
        except JobError as exc:
            message = f"{exc.message} ({_describe(cell)})"
            raise JobError(exc.code, message, field=exc.field, category=exc.category) from exc
        checked.append((cell, spec, notes))
    return checked


def experiment_estimate(experiment: Experiment) -> dict:
    """How many runs and points starting would queue, and a rough wall-clock time.

    Hosts work in parallel and each runs its own runs one after another, so the
    estimate is the busiest host's total. Seconds are null for `transactions` sweeps.
    """
    cells = experiment_cells(experiment)
    sweep = {"clients": experiment.clients, "repeats": experiment.repeats, "order": "ascending"}
    points = len(sweep_points(sweep))
    per_host: dict[str, float] = {}
    for cell in cells:
        seconds = _run_seconds(experiment, cell.workload, points)
        if seconds is None:
            return {"runs": len(cells), "points": points * len(cells), "estimated_seconds": None}
        per_host[cell.host.name] = per_host.get(cell.host.name, 0) + seconds
    return {
        "runs": len(cells),
        "points": points * len(cells),
        "estimated_seconds": round(max(per_host.values(), default=0)),
    }


def _run_seconds(experiment: Experiment, workload: Workload, points: int) -> float | None:
    if experiment.duration_s is None:
        return None
    load = workload.scale * SCALE_LOAD_S_PER_UNIT
    return RUN_OVERHEAD_S + load + experiment.warmup_s + points * experiment.duration_s


def experiment_start(experiment: Experiment, user=None) -> list[Run]:
    """Expand the matrix into queued runs and send each job after the commit.

    Every cell is validated before any run is created; the first bad one
    raises JobError and nothing is queued. Each run gets a fresh token.
    """
    with transaction.atomic():
        checked = experiment_check(experiment)
        runs = [
            _create_run(experiment, cell, spec, position, user)
            for position, (cell, spec, _notes) in enumerate(checked)
        ]
    logger.info("experiment %s started: %d runs queued", experiment.pk, len(runs))
    return runs


def _create_run(experiment: Experiment, cell: Cell, spec: dict, position: int, user) -> Run:
    run = Run.objects.create(
        experiment=experiment,
        host=cell.host,
        build=cell.build,
        config_profile=cell.config_profile,
        workload=cell.workload,
        storage_data=spec["storage"]["data"],
        storage_wal=spec["storage"]["wal"] or "",
        position=position,
        created_by=user,
    )
    queue_run(run, spec)
    return run


def queue_run(run: Run, spec: dict) -> None:
    """Give the run its spec, token and task id, and send the job once the transaction commits."""
    run.token = secrets.token_urlsafe(24)
    run.celery_task_id = str(uuid.uuid4())
    run.spec = {**spec, "run_id": run.run_id, "token": run.token}
    run.queued_at = timezone.now()
    run.save(update_fields=["token", "celery_task_id", "spec", "queued_at"])
    job, host_name, task_id = run.spec, run.host.name, run.celery_task_id
    transaction.on_commit(lambda: transport.send_job(job, host_name, task_id))
