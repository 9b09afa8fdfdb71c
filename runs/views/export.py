"""CSV and JSON exports: the stored numbers, unrounded, and their statistics.

- CSV `?rows=points` (default): one row per measured point, with the codes of
  its own validity warnings and its run's (a window shorter than checkpoint_timeout
  holds for each of its points); never its cell's, which merge the other repeats'
  warnings and the cell's spread: those are in `?rows=stats`.
- CSV `?rows=stats`: one row per run, client count and metric: n, mean,
  median, sd, 95 % CI (`ci_level`), MDE and, against a baseline (comparisons), the
  difference with its CI, p, q (Benjamini-Hochberg) and the verdict: its words,
  method, "same" interval, rounds still needed and rank-based answer.
- CSV `?rows=seconds`: one row per second of each point (its timeline), with
  the logged transactions it rests on (`sampled`), the sampling rate and the
  second's latency percentiles.
- JSON: the runs with their points (each with its seconds and its `counters`)
  and warnings, each run's CPU-profile pass apart (`cpu_profiles`, `measured: false`:
  folded stacks, never a point), the statistics rows, and what every warning
  code means.

A point's counters per transaction (agents/contract/reports/counters.py) are
CSV columns `per_transaction.<key>`, one for every counter the lab knows
(empty where the point's server had none).

A point says what its percentiles rest on (`latency_sampled_transactions`,
`latency_sampling_rate`).
"""

import csv
from collections.abc import Mapping

from django.http import HttpResponse, JsonResponse

from agents.contract.reports.counter_catalogue import COUNTERS
from runs.analysis import run_checks
from runs.analysis import validity as checks
from runs.analysis.compare import COMPARED_METRICS, StatsTable, cell_record
from runs.analysis.verdicts import VERDICT_DEFAULTS
from runs.counters.points import per_transaction
from runs.flamegraphs.pages import cpu_profile_exports
from runs.models import ProgressSample, Result, Run
from runs.stats_tables import StatsInputs, load_inputs, statistics_document, table_of
from runs.views.content.context import margin_from, min_effect_from

PERCENTILES = ("p50", "p90", "p95", "p99", "max")
RUN_COLUMNS = [
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
]
COLUMNS = [
    *RUN_COLUMNS,
    "point",
    "clients",
    "threads",
    "repeat",
    "tps",
    "latency_avg_ms",
    "latency_stddev_ms",
    *(f"latency_{p}_ms" for p in PERCENTILES),
    "latency_sampled_transactions",
    "latency_sampling_rate",
    "transactions",
    "failed",
    "duration_s",
    "started_epoch",
    "ended_epoch",
    "pgbench_cpu_s",
    "agent_cpu_s",
    "cpu_steal_percent",
    "foreign_cpu_percent",
    *(f"per_transaction.{key}" for key in COUNTERS),
    "warnings",
]
STATS_COLUMNS = [
    *RUN_COLUMNS,
    "clients",
    "metric",
    "is_baseline",
    "n",
    "mean",
    "mean_method",
    "arithmetic_mean",
    "median",
    "sd",
    "ci_low",
    "ci_high",
    "mde_pct",
    "ci_level",
    "diff_pct",
    "diff_ci_low_pct",
    "diff_ci_high_pct",
    "p",
    "q",
    "verdict",
    "verdict_note",
    *VERDICT_DEFAULTS,
    "warnings",
]
SECOND_COLUMNS = [*RUN_COLUMNS, *ProgressSample.SHOWN_FIELDS]
ROW_KINDS = ("points", "stats", "seconds")


def run_fields(run: Run) -> dict[str, object]:
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


def point_fields(result: Result) -> dict[str, object]:
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
        "latency_sampled_transactions": percentiles.get("sampled_transactions"),
        "latency_sampling_rate": percentiles.get("sampling_rate"),
        "transactions": result.transactions,
        "failed": result.failed,
        "duration_s": result.duration_s,
        "started_epoch": result.started_epoch,
        "ended_epoch": result.ended_epoch,
        "pgbench_cpu_s": result.pgbench_cpu_s,
        "agent_cpu_s": result.agent_cpu_s,
        "cpu_steal_percent": result.cpu_steal_percent,
        "foreign_cpu_percent": result.foreign_cpu_percent,
    }


def counter_fields(result: Result) -> dict[str, object]:
    """A point's counters per transaction as `per_transaction.<key>` columns."""
    values = per_transaction(result)
    return {f"per_transaction.{key}": values.get(key) for key in COUNTERS}


def second_fields(sample: ProgressSample) -> dict[str, object]:
    """One second of a point's timeline as stored, with what it rests on."""
    return {name: getattr(sample, name) for name in ProgressSample.SHOWN_FIELDS}


def seconds_by_point(runs: list[Run]) -> dict[tuple[int, int], list[ProgressSample]]:
    """(run id, point) -> its seconds in time order, for all `runs` in one query."""
    found: dict[tuple[int, int], list[ProgressSample]] = {}
    rows = ProgressSample.objects.filter(run__in=runs).order_by("run_id", "point", "t", "pk")
    for sample in rows:
        found.setdefault((sample.run_id, sample.point), []).append(sample)
    return found


def point_warning_codes(table: StatsTable, run_wide: list[str], result: Result) -> list[str]:
    """The codes of a point's own warnings, then its run's (`run_wide`), once each.

    Never the cell's: a cell's warnings merge every repeat's, so a clean repeat would
    carry a sibling's fault; they belong to the statistics rows.
    """
    own = table.point_warnings.get((result.run_id, result.index), [])
    return list(dict.fromkeys([w.code for w in own] + run_wide))


def run_wide_codes(run: Run, results: list[Result]) -> list[str]:
    """The codes of the warnings about the whole run (they hold for each of its points)."""
    return [w.code for w in run_checks.run_warnings(run, results)]


def _json_body(
    runs: list[Run], loaded: StatsInputs, table: StatsTable, baseline: Run | None
) -> dict[str, object]:
    results = loaded["own_results"]
    run_wide = {run.pk: run_wide_codes(run, results[run.pk]) for run in runs}
    seconds = seconds_by_point(runs)
    cpu_profiles = cpu_profile_exports(runs)
    return {
        "runs": [
            {
                **run_fields(run),
                "points": [
                    {
                        **point_fields(r),
                        "counters": r.counters or {},
                        "warnings": point_warning_codes(table, run_wide[run.pk], r),
                        "seconds": [second_fields(s) for s in seconds.get((run.pk, r.index), [])],
                    }
                    for r in results[run.pk]
                ],
                "cpu_profiles": cpu_profiles[run.pk],
            }
            for run in runs
        ],
        "statistics": statistics_document(table, baseline, loaded["results"]),
        "warning_codes": {
            code: {"title": check.title, "why": check.why} for code, check in checks.CHECKS.items()
        },
    }


def _csv_points(
    response: HttpResponse, runs: list[Run], loaded: StatsInputs, table: StatsTable
) -> None:
    writer = csv.DictWriter(response, fieldnames=COLUMNS)
    writer.writeheader()
    for run in runs:
        results = loaded["own_results"][run.pk]
        run_wide = run_wide_codes(run, results)
        for result in results:
            codes = " ".join(point_warning_codes(table, run_wide, result))
            fields = {**run_fields(run), **point_fields(result), **counter_fields(result)}
            writer.writerow({**fields, "warnings": codes})


def _csv_seconds(response: HttpResponse, runs: list[Run]) -> None:
    writer = csv.DictWriter(response, fieldnames=SECOND_COLUMNS)
    writer.writeheader()
    identity = {run.pk: run_fields(run) for run in runs}
    for (run_pk, _point), samples in seconds_by_point(runs).items():
        writer.writerows({**identity[run_pk], **second_fields(s)} for s in samples)


def _csv_stats(response: HttpResponse, cells: list[Run], table: StatsTable) -> None:
    by_pk = {run.pk: run for run in cells}
    writer = csv.DictWriter(response, fieldnames=STATS_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for row in table.rows:
        codes = " ".join(w.code for w in row.warnings)
        for metric in table.metrics:
            record = cell_record(row, row.cells[metric])
            writer.writerow({**run_fields(by_pk[row.run.pk]), **record, "warnings": codes})


def export_response(
    runs: list[Run],
    fmt: str,
    filename: str,
    query: Mapping[str, str] | None = None,
    baseline: Run | None = None,
) -> HttpResponse:
    """`fmt` is `csv` or `json`; `query` may hold `rows` (CSV), `min_effect` and `margin`
    (percent)."""
    query = query or {}
    rows = query.get("rows") or "points"
    min_effect, error = min_effect_from(query.get("min_effect"))
    margin, margin_error = margin_from(query.get("margin"))
    error = error or margin_error
    if rows not in ROW_KINDS or error:
        message = error or f"rows must be one of {', '.join(ROW_KINDS)}, not {rows!r}"
        return JsonResponse({"error": message}, status=400)
    loaded = load_inputs(runs)
    keep_unsettled = query.get("keep_unsettled") == "1"
    table = table_of(loaded, baseline, min_effect, COMPARED_METRICS, margin, keep_unsettled)
    response: HttpResponse
    if fmt == "json":
        body = _json_body(runs, loaded, table, baseline)
        response = JsonResponse(body, json_dumps_params={"indent": 2})
    else:
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        if rows == "stats":
            _csv_stats(response, loaded["cells"], table)
        elif rows == "seconds":
            _csv_seconds(response, runs)
        else:
            _csv_points(response, runs, loaded, table)
        filename = filename if rows == "points" else f"{filename}-{rows}"
    response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    return response
