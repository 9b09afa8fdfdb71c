"""The report's JSON document, from the statistics the API answers (runs/stats_tables.py):
the setup, each compared cell's tps against the baseline's at the same client count, the
top movers, the flame-graph frames that changed beyond noise, the warnings, the outcome.

Every number in it is copied from the statistics document (`statistics`, included whole)
or from the flame-graph difference the comparison page draws; nothing is computed again.
An adaptive experiment stopped by looking at its rounds: a test run again on them at 95 %
would not keep the error rates the looks kept (nor the share of them a patch try's
experiments split), so each compared cell's change, interval and verdict are its last
look's (the experiment API's `adaptive_state`, `points[].shown`), and the row says so.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

from runs.analysis.capacity_compare import capacity_comparison
from runs.analysis.cells import standing_for
from runs.analysis.chart_layout import cell_labels, dimensions
from runs.flamegraphs.changes import changed_frames, tree_changes
from runs.flamegraphs.pages import cpu_profile_pairs
from runs.flamegraphs.trees import flame_tree
from runs.models import Comparison, Experiment, PgBuild, Run
from runs.stats_tables import Statistics, comparison_statistics, experiment_statistics
from runs.verdict_report.outcome import outcome_of

REPORT_VERSION = 1
METRIC = "tps"
MOVERS_PER_CELL = 3
FRAMES_PER_CELL = 5
# A capacity search's tps rows are probes at the rates it offered, not its answer.
CAPACITY_NOTE = (
    "capacity search: the tps rows compare probes at the rates offered, not capacities; "
    "the answer is each cell's capacity and its ratio to the baseline (the next lines)"
)


def experiment_report(
    experiment: Experiment, query: Mapping[str, Any], link: str
) -> dict[str, object]:
    """The report of an experiment's cells against its first cell; `query` is the statistics
    API's validated query (min_effect, margin, keep_unsettled), `link` the page's URL."""
    found = experiment_statistics(
        experiment, query["min_effect"], query["margin"], query["keep_unsettled"]
    )
    notes = []
    ended = (experiment.adaptive_state or {}).get("ended")
    if experiment.adaptive and ended:
        notes.append(f"adaptive rounds ended: {ended}")
    capacity = _capacity(experiment) if experiment.capacity else None
    if capacity is not None:
        notes.append(CAPACITY_NOTE)
        notes.extend(f"capacity of {item['cell']}: {item['sentence']}" for item in capacity)
        notes.extend(
            f"capacity of {item['cell']} against the baseline: {item['ratio']['sentence']}"
            for item in capacity
            if item["ratio"]
        )
    reproduce = f"benchlab run --experiment {experiment.pk}"
    report = _report("experiment", experiment.pk, experiment.name, found, link, reproduce, notes)
    if experiment.adaptive:
        _answer_by_looks(report, experiment, found)
    if capacity is not None:
        report["capacity"] = capacity
    return report


def _answer_by_looks(report: dict[str, Any], experiment: Experiment, found: Statistics) -> None:
    """Give each compared cell of an adaptive experiment its last look's change, interval
    (at the look's level) and verdict, and the outcome they add up to."""
    points = {
        (point["cell"], point["clients"]): point
        for point in (experiment.adaptive_state or {}).get("points", [])
    }
    cell_of = {run.pk: run.cell for run in found.loaded["cells"]}
    rows: list[dict[str, Any]] = report["cells"]
    for row in rows:
        point = points.get((cell_of.get(row["run_id"]), row["clients"]))
        shown = point.get("shown") if point is not None else None
        if point is None or shown is None:
            continue
        row.update(
            diff_pct=shown["pct"],
            diff_ci_low_pct=shown["low"],
            diff_ci_high_pct=shown["high"],
            interval_level_pct=shown["level"],
            verdict=point["verdict"],
            answered_by=f"adaptive look after {point['rounds']} rounds"
            + (f", {point['design']}" if point.get("design") else ""),
        )
    report["outcome"] = outcome_of(row["verdict"] for row in rows).value


def _capacity(experiment: Experiment) -> list[dict[str, Any]]:
    """Each searched cell's capacity and, compared, its ratio to the baseline's."""
    return [
        {
            "cell": item.label,
            "found": str(item.reading.capacity.found),
            "estimate_tps": item.reading.capacity.estimate,
            "lower_tps": item.reading.capacity.lower,
            "upper_tps": item.reading.capacity.upper,
            "sentence": item.reading.capacity.sentence,
            "ratio": dataclasses.asdict(item.ratio) if item.ratio else None,
        }
        for item in capacity_comparison(experiment)
    ]


def comparison_report(
    comparison: Comparison, query: Mapping[str, Any], link: str
) -> dict[str, object]:
    """The report of a saved comparison against its baseline (as `experiment_report`)."""
    found = comparison_statistics(
        comparison, query["min_effect"], query["margin"], query["keep_unsettled"]
    )
    experiments = sorted({run.experiment_id for run in found.runs if run.experiment_id})
    reproduce = " && ".join(f"benchlab run --experiment {pk}" for pk in experiments)
    return _report("comparison", comparison.pk, comparison.name, found, link, reproduce, [])


def _report(
    kind: str,
    pk: int,
    title: str,
    found: Statistics,
    link: str,
    reproduce: str,
    notes: list[str],
) -> dict[str, object]:
    cells = found.loaded["cells"]
    counts = {r.clients for rs in found.loaded["results"].values() for r in rs}
    labels = cell_labels(cells, dimensions(cells, counts)) if cells else {}
    rows = _compared_rows(found.document, labels)
    return {
        "version": REPORT_VERSION,
        "kind": kind,
        "id": pk,
        "title": title,
        "url": link,
        "setup": _setup(cells),
        "metric": METRIC,
        "min_effect_pct": found.document["min_effect_pct"],
        "margin_pct": found.document["margin_pct"],
        "confidence": found.document["confidence"],
        "cells": rows,
        "top_movers": _movers(found.document, labels),
        "flame_changes": _flame_changes(found, labels),
        "warnings": [*notes, *_warnings(found.document)],
        "outcome": outcome_of(row["verdict"] for row in rows).value,
        "reproduce": reproduce,
        "statistics": found.document,
    }


def _records(document: Mapping[str, object]) -> list[dict[str, Any]]:
    rows = document["rows"]
    assert isinstance(rows, list)
    return [row for row in rows if row["metric"] == METRIC]


def _compared_rows(document: Mapping[str, object], labels: dict[int, str]) -> list[dict[str, Any]]:
    """Each compared cell's tps at each client count beside the baseline's at that count."""
    records = _records(document)
    base = {row["clients"]: row for row in records if row["is_baseline"]}
    compared = []
    for row in records:
        if row["is_baseline"] or row["clients"] not in base:
            continue
        of_base = base[row["clients"]]
        compared.append(
            {
                "cell": labels.get(row["run_id"], f"run {row['run_id']}"),
                "run_id": row["run_id"],
                "baseline_run_id": of_base["run_id"],
                "clients": row["clients"],
                "baseline_mean": of_base["mean"],
                "baseline_n": of_base["n"],
                "mean": row["mean"],
                "n": row["n"],
                "diff_pct": row["diff_pct"],
                "diff_ci_low_pct": row["diff_ci_low_pct"],
                "diff_ci_high_pct": row["diff_ci_high_pct"],
                "verdict": row["verdict"],
            }
        )
    return compared


def _setup(cells: list[Run]) -> dict[str, object]:
    """Hosts (with their CPU threads), builds (source, ref, patches and their size),
    config profiles and workloads of the compared cells, each named once."""
    hosts = {run.host.name: _threads(run.host.facts) for run in cells if run.host}
    builds = {run.build.name: _build(run.build) for run in cells if run.build}
    return {
        "hosts": [{"name": name, "cpu_threads": threads} for name, threads in hosts.items()],
        "builds": list(builds.values()),
        "config_profiles": sorted({run.config_profile.name for run in cells if run.config_profile}),
        "workloads": sorted({run.workload.name for run in cells if run.workload}),
    }


def _threads(facts: Mapping[str, Any]) -> int | None:
    cpu = facts.get("cpu") if isinstance(facts, Mapping) else None
    threads = cpu.get("threads") if isinstance(cpu, Mapping) else None
    return threads if isinstance(threads, int) else None


def _build(build: PgBuild) -> dict[str, object]:
    definition = build.definition or {}
    source = definition.get("source") or {}
    return {
        "name": build.name,
        "version": build.version,
        "source": source.get("location") or build.source,
        "ref": source.get("ref"),
        "patches": [
            {"name": patch["name"], "bytes": len(patch["diff"].encode())}
            for patch in definition.get("patches") or []
        ],
    }


def _movers(document: Mapping[str, object], labels: dict[int, str]) -> list[dict[str, object]]:
    """Each compared cell's strongest counter changes (the statistics' `top_movers`)."""
    found = document["top_movers"]
    assert isinstance(found, list)
    return [
        {
            "cell": labels.get(cell["run_id"], f"run {cell['run_id']}"),
            "clients": cell["clients"],
            "movers": [
                {
                    key: mover[key]
                    for key in ("label", "diff_pct", "diff_ci_low_pct", "diff_ci_high_pct")
                }
                for mover in cell["movers"][:MOVERS_PER_CELL]
            ],
        }
        for cell in found
        if cell["movers"]
    ]


def _flame_changes(found: Statistics, labels: dict[int, str]) -> list[dict[str, object]]:
    """The frames whose share of CPU changed beyond noise, largest first, per compared cell
    with a CPU profile (runs/flamegraphs/changes.py, as the comparison page draws them)."""
    cells = found.loaded["cells"]
    if found.baseline is None or not cells:
        return []
    baseline = standing_for(found.baseline, cells)
    changes: list[dict[str, object]] = []
    for pair in cpu_profile_pairs(cells, baseline, found.runs):
        tree = flame_tree(pair.other.folded, pair.base.folded)
        found_changes = tree_changes(tree)
        found_frames = changed_frames(
            [*tree.nodes, *tree.gone], [*found_changes.drawn, *found_changes.gone]
        )
        beyond = [
            {"frame": frame.node.label, "points": frame.change.points, "q": frame.change.q}
            for frame in found_frames
        ]
        if beyond:
            changes.append(
                {
                    "cell": labels.get(pair.cell.pk, f"run {pair.cell.pk}"),
                    "clients": pair.other.clients,
                    "frames": beyond[:FRAMES_PER_CELL],
                }
            )
    return changes


def _warnings(document: Mapping[str, object]) -> list[str]:
    """Each distinct warning of the statistics' rows, by its title, with the runs it is on."""
    runs_of: dict[str, list[int]] = {}
    for row in _records(document):
        for warning in row["warnings"]:
            on = runs_of.setdefault(warning["title"], [])
            if row["run_id"] not in on:
                on.append(row["run_id"])
    return [
        f"{title} (run{'s' if len(on) > 1 else ''} {', '.join(map(str, on))})"
        for title, on in runs_of.items()
    ]
