"""Import raw pgbench outputs as runs marked "imported" (README, "History").

Each uploaded file becomes one succeeded run of one new experiment per batch,
with one point per pgbench run the file holds (a sweep written to one log
gives several points) and a `Provenance` row: file name, sha256, who, when,
and what the file said about the host and programs. The parser is the
agent's own (`agents.contract.pgbench_parse`, docs/decisions.md). A file that
cannot be read is reported by name and line; the other files still import.
"""

import hashlib
import re
from dataclasses import dataclass, field
from typing import cast

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from agents.contract.pgbench_output import PgbenchOutput
from agents.contract.pgbench_parse import PgbenchParseError, parse_output
from agents.contract.results import PointResult
from runs.models import ConfigProfile, Experiment, Host, PgBuild, Provenance, Run, Workload
from runs.services.events import store_point
from runs.services.runs import digest_build_after_commit

IMPORTED_STORAGE = "imported"
UNNAMED_MACHINE = "unknown machine"
BUILTIN_NAMES = {
    "<builtin: TPC-B (sort of)>": "tpcb-like",
    "<builtin: simple update>": "simple-update",
    "<builtin: select only>": "select-only",
}
# A line that begins the next pgbench run of a log once a summary has ended.
RUN_START = re.compile(r"(pgbench \(|starting vacuum|progress[: ]|transaction type:|\$ )")
SUMMARY_START = "transaction type:"
SUMMARY_END = re.compile(r"tps = ")


@dataclass(frozen=True)
class UploadedOutput:
    """One file of a batch: its name as uploaded and its bytes."""

    name: str
    content: bytes


@dataclass(frozen=True)
class ImportDetails:
    """What the user adds to every file of a batch (all optional)."""

    command_line: str = ""
    pg_version: str = ""
    notes: str = ""
    host_name: str = ""


@dataclass
class ImportOutcome:
    """The experiment holding the imported runs, and one message per file refused."""

    experiment: Experiment | None = None
    runs: list[Run] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class FileRefused(ValueError):
    """A file of the batch that cannot be imported; the message names file and line."""


def pgbench_import(
    user: User, files: list[UploadedOutput], details: ImportDetails
) -> ImportOutcome:
    """Import every readable file; each unreadable one adds a message naming it and its line."""
    outcome = ImportOutcome()
    for upload in files:
        try:
            points = parse_points(upload)
        except FileRefused as refused:
            outcome.errors.append(str(refused))
            continue
        with transaction.atomic():
            if outcome.experiment is None:
                outcome.experiment = _batch_experiment(user, len(files))
            outcome.runs.append(_imported_run(user, outcome.experiment, upload, points, details))
    return outcome


def parse_points(upload: UploadedOutput) -> list[PgbenchOutput]:
    """The pgbench runs in one file, in order; FileRefused names the file and the line."""
    try:
        text = upload.content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileRefused(f"{upload.name}: not UTF-8 text (byte {error.start})") from error
    lines = text.split("\n")
    points = []
    for first, last in run_chunks(lines):
        points.append(_parse_chunk(upload.name, lines, first, last))
    return points


def run_chunks(lines: list[str]) -> list[tuple[int, int]]:
    """(first, end) line ranges of each pgbench run in a log, split between summaries."""
    summaries = [i for i, line in enumerate(lines) if line.startswith(SUMMARY_START)]
    starts = [0]
    for previous, following in zip(summaries, summaries[1:], strict=False):
        starts.append(_next_run_start(lines, previous, following))
    return list(zip(starts, [*starts[1:], len(lines)], strict=True))


def _next_run_start(lines: list[str], previous: int, following: int) -> int:
    tps_lines = [i for i in range(previous, following) if SUMMARY_END.match(lines[i])]
    after = tps_lines[-1] + 1 if tps_lines else previous + 1
    return next((i for i in range(after, following) if RUN_START.match(lines[i])), following)


def _parse_chunk(name: str, lines: list[str], first: int, end: int) -> PgbenchOutput:
    try:
        parsed = parse_output("\n".join(lines[first:end]))
    except PgbenchParseError as error:
        if error.line_no is None:
            raise FileRefused(f"{name}: lines {first + 1}-{end}: {error}") from error
        line_no = first + error.line_no
        raise FileRefused(f'{name}: line {line_no}: cannot read "{error.line}"') from error
    if parsed["tps"] is None or parsed["clients"] is None:
        raise FileRefused(
            f"{name}: lines {first + 1}-{end}: no pgbench summary (no 'number of clients' "
            "and 'tps =' lines); upload what pgbench printed, stdout and stderr"
        )
    return parsed


def _batch_experiment(user: User, files: int) -> Experiment:
    when = timezone.now()
    return Experiment.objects.create(
        name=f"Import of {files} file{'s' if files != 1 else ''} {when:%Y-%m-%d %H:%M}",
        description="pgbench outputs imported from files (runs marked imported).",
        storage_layouts=[{"data": IMPORTED_STORAGE, "wal": None}],
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
    run = _run_row(user, experiment, points, details)
    for index, parsed in enumerate(points):
        store_point(run, _as_point(index, parsed, points[:index], details.command_line))
    Provenance.objects.create(
        run=run,
        file_name=upload.name,
        sha256=hashlib.sha256(upload.content).hexdigest(),
        command_line=details.command_line,
        pg_version=details.pg_version,
        notes=details.notes,
        file_said=_file_said(points),
        imported_by=user,
        imported_at=run.queued_at,
    )
    digest_build_after_commit(run)
    return run


def _run_row(
    user: User, experiment: Experiment, points: list[PgbenchOutput], details: ImportDetails
) -> Run:
    first = points[0]
    version = details.pg_version or first["server_version"] or first["pgbench_version"] or "unknown"
    host = _import_host(details.host_name)
    build = _import_build(version)
    config, _ = ConfigProfile.objects.get_or_create(
        name="imported (settings unknown)",
        defaults={"description": "Runs imported from pgbench outputs: settings not recorded."},
    )
    workload = _import_workload(first)
    _add_to_matrix(experiment, host, build, config, workload, points)
    now = timezone.now()
    position = experiment.runs.count()
    return Run.objects.create(
        experiment=experiment,
        host=host,
        build=build,
        config_profile=config,
        workload=workload,
        storage_data=IMPORTED_STORAGE,
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
        name=f"imported: {name or UNNAMED_MACHINE}"[:100],
        defaults={
            "enrollment": Host.Enrollment.REVOKED,
            "notes": "Holds runs imported from pgbench outputs; no agent runs here.",
        },
    )
    return host


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
) -> None:
    experiment.hosts.add(host)
    experiment.builds.add(build)
    experiment.config_profiles.add(config)
    experiment.workloads.add(workload)
    clients = sorted({*experiment.clients, *(p["clients"] or 0 for p in points)})
    Experiment.objects.filter(pk=experiment.pk).update(clients=clients)


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


def _file_said(points: list[PgbenchOutput]) -> dict[str, object]:
    """What the file itself tells about the host and programs (first run of the file)."""
    first = points[0]
    return {
        "pgbench_version": first["pgbench_version"],
        "server_version": first["server_version"],
        "transaction_type": first["transaction_type"],
        "scale": first["scale"],
        "query_mode": first["query_mode"],
        "clients": [p["clients"] for p in points],
        "threads": [p["threads"] for p in points],
        "runs_in_file": len(points),
    }
