"""Which CPU profiles the pages draw: a run's own, and a compared cell's against the baseline's.

A cell measured in rounds has its CPU profile on the run of its first round (only that job
records one), so a cell's CPU profiles are looked up among all of the compared runs of the cell.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from runs.models import CpuProfile, Run


@dataclass(frozen=True)
class CpuProfilePair:
    """A compared cell's CPU profile and the baseline's, at the same client count."""

    base: CpuProfile
    other: CpuProfile
    cell: Run


def run_cpu_profiles(run: Run) -> list[CpuProfile]:
    """The points of the run's CPU-profile pass in the order they ran (those without stacks
    say why)."""
    return list(run.cpu_profiles.order_by("index"))


# What an export says of each CPU profile (the folded stacks as they came).
EXPORTED_FIELDS = (
    "index",
    "clients",
    "tps",
    "seconds",
    "frequency_hz",
    "event",
    "call_graph",
    "samples",
    "kept_samples",
    "folded",
    "argv",
    "error",
)


def cpu_profile_exports(runs: Iterable[Run]) -> dict[int, list[dict[str, object]]]:
    """run id -> its CPU-profile pass as an export carries it, apart from its measured points
    and marked `measured: false` (one query for all `runs`)."""
    found: dict[int, list[dict[str, object]]] = {run.pk: [] for run in runs}
    for cpu_profile in CpuProfile.objects.filter(run_id__in=found).order_by("run_id", "index"):
        exported = {name: getattr(cpu_profile, name) for name in EXPORTED_FIELDS}
        found[cpu_profile.run_id].append({**exported, "measured": False})
    return found


def _members(cell: Run, runs: Iterable[Run]) -> list[int]:
    """The ids of the runs of `cell` (the run itself, or every round of its cell)."""
    if cell.round is None:
        return [cell.pk]
    return [
        run.pk for run in runs if run.experiment_id == cell.experiment_id and run.cell == cell.cell
    ] or [cell.pk]


def cpu_profile_pairs(cells: list[Run], baseline: Run, runs: list[Run]) -> list[CpuProfilePair]:
    """For each compared cell with a CPU profile, it and the baseline's at the highest client
    count both have; cells without one (or a baseline without one) have none."""
    members = {cell.pk: _members(cell, [*runs, *cells]) for cell in cells}
    wanted = {pk for pks in members.values() for pk in pks}
    by_run: dict[int, dict[int, CpuProfile]] = {}
    for cpu_profile in CpuProfile.objects.filter(run_id__in=wanted, clients__isnull=False):
        if cpu_profile.folded and cpu_profile.clients is not None:
            by_run.setdefault(cpu_profile.run_id, {})[cpu_profile.clients] = cpu_profile

    def of_cell(cell: Run) -> dict[int, CpuProfile]:
        found: dict[int, CpuProfile] = {}
        for pk in members[cell.pk]:
            found.update(by_run.get(pk, {}))
        return found

    base = of_cell(baseline)
    pairs = []
    for cell in cells:
        other = of_cell(cell)
        common = sorted(set(base) & set(other))
        if cell.pk != baseline.pk and common:
            pairs.append(CpuProfilePair(base[common[-1]], other[common[-1]], cell))
    return pairs
