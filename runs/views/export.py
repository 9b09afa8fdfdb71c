"""CSV and JSON exports of results: the stored numbers, unrounded, one row per point."""

import csv

from django.http import HttpResponse, JsonResponse

from runs import selectors
from runs.models import Result, Run

PERCENTILES = ("p50", "p90", "p95", "p99", "max")
COLUMNS = [
    "run_id",
    "experiment_id",
    "host",
    "build",
    "version",
    "config_profile",
    "workload",
    "storage_data",
    "storage_wal",
    "status",
    "point",
    "clients",
    "threads",
    "repeat",
    "tps",
    "latency_avg_ms",
    "latency_stddev_ms",
    *(f"latency_{p}_ms" for p in PERCENTILES),
    "transactions",
    "failed",
    "duration_s",
]


def run_fields(run: Run) -> dict:
    """What identifies a run in an export."""
    return {
        "run_id": run.pk,
        "experiment_id": run.experiment_id,
        "host": run.host.name,
        "build": run.build.name,
        "version": run.install.get("version") or run.build.version,
        "config_profile": run.config_profile.name,
        "workload": run.workload.name,
        "storage_data": run.storage_data,
        "storage_wal": run.storage_wal or None,
        "status": run.status,
    }


def point_fields(result: Result) -> dict:
    """One point's measured values as stored."""
    percentiles = result.percentiles or {}
    return {
        "point": result.index,
        "clients": result.clients,
        "threads": result.threads,
        "repeat": result.repeat,
        "tps": result.tps,
        "latency_avg_ms": result.latency_avg_ms,
        "latency_stddev_ms": result.latency_stddev_ms,
        **{f"latency_{p}_ms": percentiles.get(p) for p in PERCENTILES},
        "transactions": result.transactions,
        "failed": result.failed,
        "duration_s": result.duration_s,
    }


def export_response(runs: list[Run], fmt: str, filename: str) -> HttpResponse:
    """`fmt` is `csv` (one row per point) or `json` (runs with their points)."""
    results = selectors.results_by_run(runs)
    if fmt == "json":
        body = {
            "runs": [
                {**run_fields(run), "points": [point_fields(r) for r in results[run.pk]]}
                for run in runs
            ]
        }
        response = JsonResponse(body, json_dumps_params={"indent": 2})
    else:
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        writer = csv.DictWriter(response, fieldnames=COLUMNS)
        writer.writeheader()
        for run in runs:
            for result in results[run.pk]:
                writer.writerow({**run_fields(run), **point_fields(result)})
    response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    return response
