"""Comparison logic: statistics over repeats, deltas to a baseline, and what differs.

Pure functions over model instances already loaded; no queries of their own
beyond the ones the caller's prefetching answers.
"""

import json
import re
import statistics
from dataclasses import dataclass

from runs.models import Result, Run

METRICS = {
    "tps": "tps",
    "latency_avg_ms": "latency avg (ms)",
    "p95": "latency p95 (ms)",
}
# Larger is better for tps, smaller for latencies.
HIGHER_IS_BETTER = {"tps": True, "latency_avg_ms": False, "p95": False}
# A coefficient of variation above this across repeats marks a point unstable.
UNSTABLE_CV = 0.10
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


def metric_value(result: Result, metric: str) -> float | None:
    """One metric of a point: `tps`, `latency_avg_ms` or a percentile key such as `p95`."""
    if metric in ("tps", "latency_avg_ms"):
        return getattr(result, metric)
    return (result.percentiles or {}).get(metric)


@dataclass(frozen=True)
class Spread:
    """A metric at one client count over the repeats of a run."""

    n: int
    mean: float
    minimum: float
    maximum: float
    stddev: float | None

    @property
    def unstable(self) -> bool:
        """Repeats disagree by more than UNSTABLE_CV (only with two or more)."""
        return bool(self.stddev and self.mean and self.stddev / abs(self.mean) > UNSTABLE_CV)


def spread(values: list[float]) -> Spread | None:
    """Mean, range and sample standard deviation of the measured values (None: nothing)."""
    if not values:
        return None
    stddev = statistics.stdev(values) if len(values) > 1 else None
    return Spread(len(values), statistics.fmean(values), min(values), max(values), stddev)


def run_spreads(results: list[Result], metric: str) -> dict[int, Spread]:
    """Client count -> spread of `metric` over the repeats, in client order."""
    by_clients: dict[int, list[float]] = {}
    for result in results:
        value = metric_value(result, metric)
        if value is not None:
            by_clients.setdefault(result.clients, []).append(value)
    return {clients: spread(values) for clients, values in sorted(by_clients.items())}


def delta_percent(value: float | None, base: float | None) -> float | None:
    """(value - base) / base in percent; None when either is missing or base is 0."""
    if value is None or not base:
        return None
    return (value - base) / base * 100.0


def beyond_spread(one: Spread | None, other: Spread | None) -> bool | None:
    """Whether the ranges of the repeats do not overlap.

    None when either side has a single repeat: there is no spread to judge by.
    """
    if one is None or other is None or one.n < 2 or other.n < 2:
        return None
    return one.minimum > other.maximum or one.maximum < other.minimum


@dataclass(frozen=True)
class ComparedPoint:
    """One row of a comparison table: a run at a client count, against the baseline."""

    run: Run
    clients: int
    tps: Spread | None
    latency: Spread | None
    tps_delta: float | None
    latency_delta: float | None
    tps_beyond: bool | None
    latency_beyond: bool | None
    is_baseline: bool


def compare_points(runs: list[Run], baseline: Run, results: dict[int, list[Result]]) -> list:
    """Every (run, client count) with its deltas to the baseline at the same client count.

    `results` maps run id to its results. Deltas are None where the baseline
    has no point at that client count.
    """
    base_tps = run_spreads(results.get(baseline.pk, []), "tps")
    base_latency = run_spreads(results.get(baseline.pk, []), "latency_avg_ms")
    rows = []
    for run in runs:
        tps_by_clients = run_spreads(results.get(run.pk, []), "tps")
        latency_by_clients = run_spreads(results.get(run.pk, []), "latency_avg_ms")
        for clients in sorted(set(tps_by_clients) | set(latency_by_clients)):
            tps, latency = tps_by_clients.get(clients), latency_by_clients.get(clients)
            base_t, base_l = base_tps.get(clients), base_latency.get(clients)
            rows.append(
                ComparedPoint(
                    run=run,
                    clients=clients,
                    tps=tps,
                    latency=latency,
                    tps_delta=delta_percent(tps and tps.mean, base_t and base_t.mean),
                    latency_delta=delta_percent(latency and latency.mean, base_l and base_l.mean),
                    tps_beyond=beyond_spread(tps, base_t),
                    latency_beyond=beyond_spread(latency, base_l),
                    is_baseline=run.pk == baseline.pk,
                )
            )
    return rows


def _flatten(prefix: str, value, into: dict[str, str]) -> None:
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


def setting_text(setting, unit: str | None) -> str:
    """A pg_settings value with its unit as people write it: 16384 x 8kB -> `128MB`."""
    match = re.fullmatch(r"(\d*)(B|kB|MB|GB|TB)", unit or "")
    if not match or not re.fullmatch(r"\d+", str(setting)):
        return f"{setting} {unit}" if unit else str(setting)
    total = int(setting) * int(match[1] or 1) * MEMORY_UNITS[match[2]]
    for name in ("TB", "GB", "MB", "kB"):
        if total and total % MEMORY_UNITS[name] == 0:
            return f"{total // MEMORY_UNITS[name]}{name}"
    return f"{total}B"


def _effective_settings(run: Run) -> dict:
    """Settings as read back from the server, else as requested in the spec."""
    if run.effective_settings:
        return {
            row["name"]: setting_text(row.get("setting"), row.get("unit"))
            for row in run.effective_settings
            if isinstance(row, dict) and row.get("name") not in PER_CLUSTER_SETTINGS | {None}
        }
    return dict(run.spec.get("settings") or {})


def run_profile(run: Run) -> dict[str, str]:
    """Everything that describes how a run was made, flattened to `section.key` -> text."""
    spec, facts = run.spec or {}, run.facts or {}
    flat: dict[str, str] = {}
    sections = {
        "version": run.install.get("version") or run.build.version,
        "build": {"name": run.build.name, "source": run.install.get("source") or run.build.source},
        "config": run.config_profile.name,
        "settings": _effective_settings(run),
        "storage": {
            "data": run.storage_data,
            "wal": run.storage_wal or "(inside data)",
            "facts": run.storage_facts,
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
    profiles = [run_profile(run) for run in runs]
    keys = sorted(set().union(*profiles)) if profiles else []
    rows = []
    for key in keys:
        values = [profile.get(key) for profile in profiles]
        if len(set(values)) > 1:
            rows.append((key, values))
    return rows
