"""Import raw pgbench outputs as runs marked "imported" (README, "History").

Each uploaded file becomes one succeeded run of one new experiment per batch,
with one point per pgbench run the file holds (a sweep written to one log
gives several points) and a `Provenance` row: file name, sha256, who, when,
and what the file said about the host and programs. What the user states of a
file (runs.services.history.import_description: its host, storage, version and
settings, per file or by a pattern on its name) places its run in the matrix:
storage as the run's data storage, settings as a config profile of their own. Reading a file is
runs.services.history.import_reading; a file that cannot be read is reported
by name and line, and the other files still import. A file whose content an
earlier import already holds imports again and is flagged with that run.
"""

import hashlib
from dataclasses import dataclass, field
from typing import cast

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from agents.contract.pgbench_output.documents import PgbenchOutput
from agents.contract.reports.results import PointResult
from runs.models import ConfigProfile, Experiment, Host, PgBuild, Provenance, Result, Run, Workload
from runs.models.catalogue import IMPORTED_HOST_PREFIX
from runs.services.history.import_description import FileDescription, ImportDescription
from runs.services.history.import_reading import (
    FileRefused,
    UploadedOutput,
    derived_latency_ms,
    file_text,
    parse_points,
    stated_version,
)
from runs.services.jobs.events import store_point
from runs.services.runs import digest_build_after_commit

IMPORTED_STORAGE = "imported"
# ConfigProfile.name's length.
NAME_CHARS = 100
UNNAMED_MACHINE = "unknown machine"
# The built-in scripts as `transaction type:` names them, 9.6+ and 9.2 - 9.5.
BUILTIN_NAMES = {
    "<builtin: TPC-B (sort of)>": "tpcb-like",
    "<builtin: simple update>": "simple-update",
    "<builtin: select only>": "select-only",
    "TPC-B (sort of)": "tpcb-like",
    "Update only pgbench_accounts": "simple-update",
    "SELECT only": "select-only",
}


@dataclass(frozen=True)
class ImportDetails:
    """What the user adds to every file of a batch (all optional)."""

    command_line: str = ""
    pg_version: str = ""
    notes: str = ""
    host_name: str = ""
    description: ImportDescription = field(default_factory=ImportDescription)


@dataclass
class ImportOutcome:
    """The experiment holding the imported runs, one message per file refused and one per
    file imported before."""

    experiment: Experiment | None = None
    runs: list[Run] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # One message per imported file whose content an earlier import holds.
    duplicates: list[str] = field(default_factory=list)
    # One message per line of the description that matched no file of the batch.
    unmatched: list[str] = field(default_factory=list)


def pgbench_import(
    user: User, files: list[UploadedOutput], details: ImportDetails
) -> ImportOutcome:
    """Import every readable file; each unreadable one adds an error naming it and its line,
    each whose content an earlier import holds a duplicate message naming that run."""
    outcome = ImportOutcome(unmatched=details.description.unmatched([f.name for f in files]))
    for upload in files:
        try:
            points = parse_points(upload)
        except FileRefused as refused:
            outcome.errors.append(str(refused))
            continue
        sha256 = hashlib.sha256(upload.content).hexdigest()
        earlier = Provenance.objects.filter(sha256=sha256).order_by("run_id").first()
        with transaction.atomic():
            if outcome.experiment is None:
                outcome.experiment = _batch_experiment(user, len(files))
            run = _imported_run(user, outcome.experiment, upload, points, details)
        outcome.runs.append(run)
        if earlier is not None:
            outcome.duplicates.append(
                f"{upload.name}: same output as run {earlier.run_id} "
                f"({earlier.file_name}, imported {earlier.imported_at:%Y-%m-%d %H:%M})"
            )
    return outcome


def _batch_experiment(user: User, files: int) -> Experiment:
    when = timezone.now()
    return Experiment.objects.create(
        name=f"Import of {files} file{'s' if files != 1 else ''} {when:%Y-%m-%d %H:%M}",
        description="pgbench outputs imported from files (runs marked imported).",
        storage_layouts=[],
        created_by=user,
    )


def _imported_run(
    user: User,
    experiment: Experiment,
    upload: UploadedOutput,
    points: list[PgbenchOutput],
    details: ImportDetails,
) -> Run:
    """One succeeded run holding the file's points, with the file's provenance."""
    version = stated_version(points[0], file_text(upload))
    described = details.description.of(upload.name)
    run = _run_row(user, experiment, points, details, described, version)
    for index, parsed in enumerate(points):
        result = store_point(run, _as_point(index, parsed, points[:index], details.command_line))
        _derive_latency(result, parsed)
    Provenance.objects.create(
        run=run,
        file_name=upload.name,
        sha256=hashlib.sha256(upload.content).hexdigest(),
        command_line=details.command_line,
        pg_version=details.pg_version,
        notes=details.notes,
        file_said=_file_said(points, version),
        imported_by=user,
        imported_at=run.queued_at,
    )
    digest_build_after_commit(run)
    return run


def _derive_latency(result: Result, parsed: PgbenchOutput) -> None:
    """Store the latency pgbench did not print (9.2, 9.3), marked derived."""
    latency = derived_latency_ms(parsed)
    if latency is not None:
        result.latency_avg_ms, result.latency_derived = latency, True
        result.save(update_fields=["latency_avg_ms", "latency_derived"])


def _run_row(
    user: User,
    experiment: Experiment,
    points: list[PgbenchOutput],
    details: ImportDetails,
    described: FileDescription,
    stated: str | None,
) -> Run:
    """The run: what the user stated of the file first, then what was typed for the whole
    batch, then (the version) what the file states."""
    first = points[0]
    host = _import_host(described.host or details.host_name)
    build = _import_build(described.version or details.pg_version or stated or "unknown")
    config = _import_config(described.settings)
    workload = _import_workload(first)
    storage = described.storage[:100] or IMPORTED_STORAGE
    _add_to_matrix(experiment, host, build, config, workload, points, storage)
    now = timezone.now()
    position = experiment.runs.count()
    return Run.objects.create(
        experiment=experiment,
        host=host,
        build=build,
        config_profile=config,
        workload=workload,
        storage_data=storage,
        position=position,
        cell=position,
        status=Run.Status.SUCCEEDED,
        queued_at=now,
        started_at=now,
        finished_at=now,
        created_by=user,
    )


def _import_host(name: str) -> Host:
    """`imported: NAME`: a name no agent can have (agents' names have no spaces or
    colons), so an import never attaches to, or blocks, an agent's host."""
    host, _ = Host.objects.get_or_create(
        name=f"{IMPORTED_HOST_PREFIX}{name or UNNAMED_MACHINE}"[:100],
        defaults={
            "enrollment": Host.Enrollment.REVOKED,
            "notes": "Holds runs imported from pgbench outputs; no agent runs here.",
        },
    )
    return host


def _import_config(settings: dict[str, str]) -> ConfigProfile:
    """The settings stated for a file as a config profile of their own (one per set);
    `imported (settings unknown)` when none were stated."""
    if not settings:
        config, _ = ConfigProfile.objects.get_or_create(
            name="imported (settings unknown)",
            defaults={"description": "Runs imported from pgbench outputs: settings not recorded."},
        )
        return config
    stated = ", ".join(f"{name}={value}" for name, value in sorted(settings.items()))
    name = f"imported: {stated}"
    if len(name) > NAME_CHARS:
        # Cut names would let two different sets share one profile: a digest keeps them apart.
        digest = hashlib.sha256(stated.encode()).hexdigest()[:12]
        name = f"{name[: NAME_CHARS - 15]}… #{digest}"
    config, _ = ConfigProfile.objects.get_or_create(
        name=name,
        defaults={
            "description": "Settings stated when importing pgbench outputs (not read back).",
            "settings": dict(sorted(settings.items())),
        },
    )
    return config


def _import_build(version: str) -> PgBuild:
    build, _ = PgBuild.objects.get_or_create(
        name=f"imported {version}"[:100],
        defaults={"version": version[:20], "notes": "Version of runs imported from files."},
    )
    return build


def _import_workload(parsed: PgbenchOutput) -> Workload:
    builtin = BUILTIN_NAMES.get(parsed["transaction_type"] or "")
    scripts = [{"builtin": builtin, "weight": 1}] if builtin else []
    label = builtin or parsed["transaction_type"] or "unknown script"
    query_mode = parsed["query_mode"] or "simple"
    workload, _ = Workload.objects.get_or_create(
        name=f"imported {label}, scale {parsed['scale']}, {query_mode}"[:100],
        defaults={
            "description": "The workload an imported pgbench output names.",
            "scale": parsed["scale"] or 1,
            "scripts": scripts,
            "query_mode": query_mode,
        },
    )
    return workload


def _add_to_matrix(
    experiment: Experiment,
    host: Host,
    build: PgBuild,
    config: ConfigProfile,
    workload: Workload,
    points: list[PgbenchOutput],
    storage: str,
) -> None:
    experiment.hosts.add(host)
    experiment.builds.add(build)
    experiment.config_profiles.add(config)
    experiment.workloads.add(workload)
    clients = sorted({*experiment.clients, *(p["clients"] or 0 for p in points)})
    layouts = experiment.storage_layouts
    if {"data": storage, "wal": None} not in layouts:
        layouts = [*layouts, {"data": storage, "wal": None}]
    Experiment.objects.filter(pk=experiment.pk).update(clients=clients, storage_layouts=layouts)
    experiment.storage_layouts = layouts


def _as_point(
    index: int, parsed: PgbenchOutput, earlier: list[PgbenchOutput], command_line: str
) -> PointResult:
    """The point as an agent would have sent it; repeats count earlier runs at these clients."""
    repeat = 1 + sum(1 for p in earlier if p["clients"] == parsed["clients"])
    point: dict[str, object] = {
        **parsed,
        "index": index,
        "repeat": repeat,
        "clients": parsed["clients"] or 0,
        "argv": command_line.split() if command_line else [],
        "exit_code": None,
        "stdout": "",
        "stderr": "",
        "host_samples": [],
        "server_samples": [],
        "latency_percentiles_ms": None,
    }
    return cast(PointResult, point)


def _file_said(points: list[PgbenchOutput], version: str | None) -> dict[str, object]:
    """What the file itself tells about the host and programs (first run of the file)."""
    first = points[0]
    return {
        "version": version,
        "pgbench_version": first["pgbench_version"],
        "server_version": first["server_version"],
        "transaction_type": first["transaction_type"],
        "scale": first["scale"],
        "query_mode": first["query_mode"],
        "clients": [p["clients"] for p in points],
        "threads": [p["threads"] for p in points],
        "runs_in_file": len(points),
    }
