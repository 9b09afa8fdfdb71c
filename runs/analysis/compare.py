"""Comparison logic: statistics per point, verdicts against a baseline, warnings, peaks
and what differs between runs: pure functions over model instances already loaded (the
numbers from runs.inference.stats, the warnings from runs.analysis.validity), no queries.
"""

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from agents.contract.builds.definition import BuildRecord
from runs.analysis import run_checks, verdicts
from runs.analysis import validity as checks
from runs.analysis.cells import share_rounds
from runs.analysis.outliers import outlier_warnings
from runs.analysis.validity import ValidityWarning
from runs.analysis.verdicts import Judgement, Question
from runs.inference import paired, stats
from runs.inference.equivalence import DEFAULT_MARGIN_PCT
from runs.inference.stats import Summary
from runs.models import Result, Run

METRICS = {
    "tps": "tps",
    "latency_avg_ms": "latency avg (ms)",
    "p95": "latency p95 (ms)",
}
# Larger is better for tps, smaller for latencies.
HIGHER_IS_BETTER = {"tps": True, "latency_avg_ms": False, "p95": False}
# The metrics a comparison table judges (each one a comparison per cell).
COMPARED_METRICS = ("tps", "latency_avg_ms")
# Settings every throw-away cluster has its own value for, and facts that move
# from one second to the next: they differ between any two runs and say nothing.
PER_CLUSTER_SETTINGS = {
    "config_file",
    "data_directory",
    "external_pid_file",
    "hba_file",
    "ident_file",
    "port",
    "unix_socket_directories",
}
NOISY_FACTS = {"collected_at", "mhz_current", "free_bytes", "used_bytes", "available_bytes"}
OS_FACTS = ("os", "sysctls", "limits")


def storage_place(run: Run, role: str, target: str) -> str:
    """`fast (/dev/nvme0n1p2, xfs)`: a storage target with the device and filesystem the
    agent found behind it, or its bare name when it found none."""
    found = (run.storage_facts or {}).get(role) or {}
    where = ", ".join(str(found[k]) for k in ("device", "filesystem") if found.get(k))
    return f"{target} ({where})" if where else target


def metric_value(result: Result, metric: str) -> float | None:
    """One metric of a point: `tps`, `latency_avg_ms` or a percentile key such as `p95`."""
    if metric in ("tps", "latency_avg_ms"):
        return getattr(result, metric)
    return (result.percentiles or {}).get(metric)


def repeat_values(results: Sequence[Result], metric: str) -> dict[int, list[float]]:
    """Client count -> the measured values of `metric` over the repeats, in client order."""
    by_clients: dict[int, list[float]] = {}
    for result in results:
        value = metric_value(result, metric)
        if value is not None:
            by_clients.setdefault(result.clients, []).append(value)
    return dict(sorted(by_clients.items()))


def run_summaries(results: Sequence[Result], metric: str) -> dict[int, Summary]:
    """Client count -> summary of `metric` over the repeats."""
    summaries = {c: stats.summarize(v) for c, v in repeat_values(results, metric).items()}
    return {c: s for c, s in summaries.items() if s is not None}


@dataclass(frozen=True)
class Peak:
    """The best mean of a metric over a run's client counts (highest tps, lowest latency)."""

    metric: str
    clients: int
    summary: Summary

    @property
    def word(self) -> str:
        return "peak" if HIGHER_IS_BETTER[self.metric] else "lowest"


def peak(summaries: dict[int, Summary], metric: str) -> Peak | None:
    """Where the run scales to: None without any point."""
    if not summaries:
        return None
    pick = max if HIGHER_IS_BETTER[metric] else min
    clients = pick(summaries, key=lambda c: summaries[c].mean)
    return Peak(metric, clients, summaries[clients])


def run_peaks(results: Sequence[Result], metrics: Sequence[str]) -> dict[str, Peak]:
    found = {m: peak(run_summaries(results, m), m) for m in metrics}
    return {m: p for m, p in found.items() if p is not None}


def point_warnings(
    results: Sequence[Result], in_samples: dict[tuple[int, int], list[ValidityWarning]]
) -> dict[tuple[int, int], list[ValidityWarning]]:
    """(run id, point index) -> the warnings of that measured point (run-wide ones apart);
    `in_samples` holds what each point's samples showed (runs.timelines.store digests)."""
    return {
        (r.run_id, r.index): checks.result_warnings(r, in_samples.get((r.run_id, r.index), []))
        for r in results
    }


def cell_warnings(
    results: Sequence[Result],
    by_point: dict[tuple[int, int], list[ValidityWarning]],
    summaries: dict[str, Summary | None],
) -> list[ValidityWarning]:
    """A cell's warnings: its repeats' (one per code, naming the repeats) and its own."""
    merged = checks.merge_repeats(
        {r.repeat: by_point.get((r.run_id, r.index), []) for r in results}
    )
    codes = {w.code for w in merged}
    for metric, summary in summaries.items():
        values = [v for r in results if (v := metric_value(r, metric)) is not None]
        for warning in [*checks.cell_warnings(summary), *outlier_warnings(values)]:
            if warning.code not in codes:
                codes.add(warning.code)
                merged.append(ValidityWarning(warning.code, f"{METRICS[metric]}: {warning.detail}"))
    return merged


@dataclass(frozen=True)
class MetricCell:
    """One metric of a table row: its summary and, against the baseline, its judgement."""

    metric: str
    summary: Summary | None
    judgement: Judgement | None = None
    mde_pct: float | None = None

    @property
    def difference(self) -> stats.Difference | None:
        return self.judgement.difference if self.judgement else None

    @property
    def verdict(self) -> str:
        return str(self.judgement.verdict) if self.judgement and self.judgement.verdict else ""


@dataclass
class PointRow:
    """One row of a statistics table: a run at a client count."""

    run: Run
    clients: int
    is_baseline: bool
    cells: dict[str, MetricCell]
    warnings: list[ValidityWarning] = field(default_factory=list)

    @property
    def tps(self) -> MetricCell:
        return self.cells["tps"]

    @property
    def latency(self) -> MetricCell:
        return self.cells["latency_avg_ms"]

    @property
    def warning_codes(self) -> list[str]:
        return [w.code for w in self.warnings]


@dataclass
class StatsTable:
    """Rows with their verdicts; `comparisons` is the size of the BH family."""

    rows: list[PointRow]
    metrics: tuple[str, ...]
    min_effect_pct: float
    comparisons: int
    peaks: dict[int, dict[str, Peak]]
    point_warnings: dict[tuple[int, int], list[ValidityWarning]]
    fdr_q: float = stats.FDR_Q
    margin_pct: float = DEFAULT_MARGIN_PCT

    def checks_present(self) -> list[checks.Check]:
        """The checks some row of the table failed, in their defined order (the legend)."""
        codes = {w.code for row in self.rows for w in row.warnings}
        return [check for code, check in checks.CHECKS.items() if code in codes]

    def findings(self) -> list[tuple[checks.Check, list[tuple[PointRow, str]]]]:
        """Each failed check with the rows that failed it and what was seen there."""
        found = []
        for check in self.checks_present():
            rows = [(r, w.detail) for r in self.rows for w in r.warnings if w.code == check.code]
            found.append((check, rows))
        return found

    def cell_warnings(self) -> dict[tuple[int, int], list[ValidityWarning]]:
        """(run id, clients) -> the row's warnings, for the charts."""
        return {(row.run.pk, row.clients): row.warnings for row in self.rows}


Results = dict[int, list[Result]]
# Run id -> the round it measured (runs in rounds only).
RoundOf = dict[int, int]
PointWarnings = dict[tuple[int, int], list[ValidityWarning]]


def _rows(
    runs: list[Run],
    baseline: Run | None,
    results: Results,
    in_samples: PointWarnings,
    metrics: Sequence[str],
) -> tuple[list[PointRow], PointWarnings]:
    rows: list[PointRow] = []
    by_run_point: PointWarnings = {}
    for run in runs:
        run_results = results.get(run.pk, [])
        by_point = point_warnings(run_results, in_samples)
        by_run_point |= by_point
        run_wide = run_checks.run_warnings(run, run_results)
        summaries = {m: run_summaries(run_results, m) for m in metrics}
        for clients in sorted({r.clients for r in run_results}):
            at = [r for r in run_results if r.clients == clients]
            cell_summaries = {m: summaries[m].get(clients) for m in metrics}
            row = PointRow(
                run=run,
                clients=clients,
                is_baseline=baseline is not None and run.pk == baseline.pk,
                cells={
                    m: MetricCell(m, s, mde_pct=s.mde_pct if s else None)
                    for m, s in cell_summaries.items()
                },
                warnings=[*run_wide, *cell_warnings(at, by_point, cell_summaries)],
            )
            rows.append(row)
    return rows, by_run_point


def _cell_mde(one: Summary | None, other: Summary | None, judgement: Judgement) -> float | None:
    """MDE of this comparison at 80 % power: of its paired rounds' log ratios where they
    answered, else from both sides' log spreads."""
    if judgement.design in (paired.PAIRED, paired.DUET):
        return judgement.paired_mde_pct
    if not one or not other or one.log_sd is None or other.log_sd is None:
        return None
    return stats.detectable_effect_pct(one.log_sd, one.n, other.log_sd, other.n)


def _question(
    run: Run, baseline: Run, results: Results, metric: str, clients: int, round_of: RoundOf
) -> Question | None:
    """One compared cell; where both cells share rounds (cells.share_rounds), with the
    round of each repeat."""
    sides = [
        [
            (r, v)
            for r in results.get(pk, [])
            if r.clients == clients and (v := metric_value(r, metric)) is not None
        ]
        for pk in (run.pk, baseline.pk)
    ]
    if not sides[0] or not sides[1]:
        return None
    values, base = ([v for _r, v in side] for side in sides)
    question = Question(values, base, HIGHER_IS_BETTER[metric])
    if not share_rounds(run, baseline):
        return question
    if any(r.run_id not in round_of for side in sides for r, _v in side):
        return question
    rounds, base_rounds = ([round_of[r.run_id] for r, _v in side] for side in sides)
    simultaneous = run.experiment.duet
    return replace(question, rounds=rounds, baseline_rounds=base_rounds, simultaneous=simultaneous)


def _judge_rows(
    rows: list[PointRow],
    baseline: Run,
    results: Results,
    metrics: Sequence[str],
    margins: tuple[float, float],
    round_of: RoundOf,
) -> int:
    """Fill each non-baseline cell's judgement; returns the number of tested comparisons.
    `margins`: (minimum effect, equivalence margin) in percent."""
    base_summaries = {m: run_summaries(results.get(baseline.pk, []), m) for m in metrics}
    targets, questions = [], []
    for row in rows:
        if row.is_baseline:
            continue
        for metric in metrics:
            question = _question(row.run, baseline, results, metric, row.clients, round_of)
            if question is not None:
                targets.append((row, metric, base_summaries[metric].get(row.clients)))
                questions.append(question)
    judgements = verdicts.judge(questions, *margins)
    for (row, metric, base_summary), judgement in zip(targets, judgements, strict=True):
        summary = row.cells[metric].summary
        mde = _cell_mde(summary, base_summary, judgement)
        row.cells[metric] = MetricCell(metric, summary, judgement, mde)
    return sum(1 for j in judgements if j.q is not None)


def _settled(results: Results, by_point: PointWarnings) -> Results:
    """`results` without the points whose tps never settled (check never_settled)."""
    out = {key for key, found in by_point.items() if any(w.code == "never_settled" for w in found)}
    return {pk: [r for r in rs if (r.run_id, r.index) not in out] for pk, rs in results.items()}


def stats_table(
    runs: list[Run],
    baseline: Run | None,
    results: dict[int, list[Result]],
    in_samples: dict[tuple[int, int], list[ValidityWarning]],
    min_effect_pct: float = stats.DEFAULT_MIN_EFFECT_PCT,
    metrics: Sequence[str] = COMPARED_METRICS,
    margin_pct: float = DEFAULT_MARGIN_PCT,
    keep_unsettled: bool = False,
    round_of: RoundOf | None = None,
) -> StatsTable:
    """Every (run, client count) with its statistics, warnings and, if a baseline is
    given, its difference, q-value and verdict against the baseline at the same clients.
    `in_samples`: (run id, point) -> what the point's samples showed (runs.timelines.store).
    Verdicts leave out points that never settled, unless `keep_unsettled`. `round_of`
    (run id -> round, runs/analysis/cells.py) pairs the repeats of cells that share
    rounds; without it every comparison is unpaired."""
    rows, by_point = _rows(runs, baseline, results, in_samples, metrics)
    judged = results if keep_unsettled else _settled(results, by_point)
    margins = (min_effect_pct, margin_pct)
    comparisons = (
        _judge_rows(rows, baseline, judged, metrics, margins, round_of or {}) if baseline else 0
    )
    peaks = {run.pk: run_peaks(results.get(run.pk, []), metrics) for run in runs}
    return StatsTable(
        rows, tuple(metrics), min_effect_pct, comparisons, peaks, by_point, margin_pct=margin_pct
    )


def _number(value: float | None) -> float | None:
    return None if value is None else float(value)


SUMMARY_FIELDS = ("mean", "arithmetic_mean", "median", "sd", "ci_low", "ci_high")
DIFFERENCE_FIELDS = {
    "diff_pct": "pct",
    "diff_ci_low_pct": "ci_low_pct",
    "diff_ci_high_pct": "ci_high_pct",
    "p": "p",
}


def cell_record(row: PointRow, cell: MetricCell) -> dict[str, object]:
    """One (run, clients, metric) of a table as plain JSON-able values (API, exports)."""
    summary, difference, judgement = cell.summary, cell.difference, cell.judgement
    return {
        "run_id": row.run.pk,
        "clients": row.clients,
        "metric": cell.metric,
        "is_baseline": row.is_baseline,
        "n": summary.n if summary else 0,
        **{name: _number(getattr(summary, name, None)) for name in SUMMARY_FIELDS},
        "mean_method": summary.method if summary else None,
        "mde_pct": _number(cell.mde_pct),
        "ci_level": stats.CONFIDENCE * 100.0,
        **{k: _number(getattr(difference, v, None)) for k, v in DIFFERENCE_FIELDS.items()},
        "q": _number(judgement.q if judgement else None),
        "verdict": cell.verdict or None,
        "verdict_note": judgement.explanation if judgement else "",
        **verdicts.record_fields(judgement),
        "warnings": [w.as_dict() for w in row.warnings],
    }


def table_records(table: StatsTable) -> list[dict[str, object]]:
    """Every cell of the table, row by row, metric by metric."""
    return [cell_record(row, row.cells[m]) for row in table.rows for m in table.metrics]


def _flatten(prefix: str, value: object, into: dict[str, str]) -> None:
    if isinstance(value, dict) and value:
        for key in sorted(value):
            if key in NOISY_FACTS:
                continue
            _flatten(f"{prefix}.{key}" if prefix else str(key), value[key], into)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for position, item in enumerate(value):
            _flatten(f"{prefix}[{position}]", item, into)
    elif value not in (None, "", [], {}):
        into[prefix] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)


MEMORY_UNITS = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


def setting_text(setting: str | int | None, unit: str | None) -> str:
    """A pg_settings value with its unit as people write it: 16384 x 8kB -> `128MB`."""
    match = re.fullmatch(r"(\d*)(B|kB|MB|GB|TB)", unit or "")
    if not match or not re.fullmatch(r"\d+", str(setting)):
        return f"{setting} {unit}" if unit else str(setting)
    total = int(str(setting)) * int(match[1] or 1) * MEMORY_UNITS[match[2]]
    for name in ("TB", "GB", "MB", "kB"):
        if total and total % MEMORY_UNITS[name] == 0:
            return f"{total // MEMORY_UNITS[name]}{name}"
    return f"{total}B"


def _effective_settings(run: Run) -> dict[str, object]:
    """Settings as read back from the server, else as requested in the spec."""
    if run.effective_settings:
        return {
            name: setting_text(setting, unit)
            for name, (setting, unit) in run_checks.run_settings(run).items()
            if name not in PER_CLUSTER_SETTINGS
        }
    return dict(run.spec.get("settings") or {})


def source_build_description(record: BuildRecord) -> dict[str, object]:
    """What decides a source build, as "what differs" lists it: source, flags, patches, compiler."""
    if not record:
        return {}
    definition = record.get("definition") or {}
    source = definition.get("source") or {}
    where = source.get("location", "")
    return {
        "from": f"{where} @ {source['ref']}" if source.get("ref") else where,
        "configure_flags": " ".join(definition.get("configure_flags") or []) or "(none)",
        "patches": {p["name"]: p["sha256"][:12] for p in record.get("patches") or []} or "(none)",
        "cflags": definition.get("cflags"),
        "compiler": record.get("compiler"),
        "key": record.get("key"),
    }


def run_description(run: Run) -> dict[str, str]:
    """Everything that describes how a run was made, flattened to `section.key` -> text."""
    spec, facts = run.spec or {}, run.facts or {}
    flat: dict[str, str] = {}
    sections = {
        "version": run.install.get("version") or run.build.version,
        "build": {
            "name": run.build.name,
            "source": run.install.get("source") or run.build.source,
            **source_build_description(run.build_record),
        },
        "compiled": run.compiled_settings,
        "config": run.config_profile.name,
        "settings": _effective_settings(run),
        "storage": {
            "data": storage_place(run, "data", run.storage_data),
            "wal": storage_place(run, "wal", run.storage_wal)
            if run.storage_wal
            else "(inside data)",
            "mount_options": {
                role: found.get("mount_options") for role, found in run.storage_facts.items()
            },
        },
        "host": run.host.name,
        "hardware": {k: v for k, v in facts.items() if k not in OS_FACTS},
        "os": {k: facts.get(k) for k in OS_FACTS},
        "workload": {"name": run.workload.name, **(spec.get("workload") or {})},
        "dataset": spec.get("dataset") or {},
        "sweep": spec.get("sweep") or {},
    }
    for section, value in sections.items():
        _flatten(section, value, flat)
    return flat


def differences(runs: list[Run]) -> list[tuple[str, list[str | None]]]:
    """Only the keys whose values differ between the runs: (key, value per run)."""
    descriptions = [run_description(run) for run in runs]
    keys = sorted(set().union(*descriptions)) if descriptions else []
    rows = []
    for key in keys:
        values = [description.get(key) for description in descriptions]
        if len(set(values)) > 1:
            rows.append((key, values))
    return rows
