"""Which profiles the pages draw: a run's own, and a compared cell's against the baseline's.

A cell measured in rounds has its profile on the run of its first round (only that job
profiles), so a cell's profiles are looked up among all of the compared runs of the cell.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from runs.models import Profile, Run


@dataclass(frozen=True)
class ProfilePair:
    """A compared cell's profile and the baseline's, at the same client count."""

    base: Profile
    other: Profile
    cell: Run


def run_profiles(run: Run) -> list[Profile]:
    """The run's profiled points in the order they ran (those without stacks say why)."""
    return list(run.profiles.order_by("index"))


# What an export says of each profile (the folded stacks as they came).
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


def profile_exports(runs: Iterable[Run]) -> dict[int, list[dict[str, object]]]:
    """run id -> its profiled repeat as an export carries it, apart from its measured points
    and marked `measured: false` (one query for all `runs`)."""
    found: dict[int, list[dict[str, object]]] = {run.pk: [] for run in runs}
    for profile in Profile.objects.filter(run_id__in=found).order_by("run_id", "index"):
        exported = {name: getattr(profile, name) for name in EXPORTED_FIELDS}
        found[profile.run_id].append({**exported, "measured": False})
    return found


def _members(cell: Run, runs: Iterable[Run]) -> list[int]:
    """The ids of the runs of `cell` (the run itself, or every round of its cell)."""
    if cell.round is None:
        return [cell.pk]
    return [
        run.pk for run in runs if run.experiment_id == cell.experiment_id and run.cell == cell.cell
    ] or [cell.pk]


def profile_pairs(cells: list[Run], baseline: Run, runs: list[Run]) -> list[ProfilePair]:
    """For each compared cell with a profile, it and the baseline's at the highest client
    count both profiled; cells without one (or a baseline without one) have none."""
    members = {cell.pk: _members(cell, [*runs, *cells]) for cell in cells}
    wanted = {pk for pks in members.values() for pk in pks}
    by_run: dict[int, dict[int, Profile]] = {}
    for profile in Profile.objects.filter(run_id__in=wanted, clients__isnull=False):
        if profile.folded and profile.clients is not None:
            by_run.setdefault(profile.run_id, {})[profile.clients] = profile

    def of_cell(cell: Run) -> dict[int, Profile]:
        found: dict[int, Profile] = {}
        for pk in members[cell.pk]:
            found.update(by_run.get(pk, {}))
        return found

    base = of_cell(baseline)
    pairs = []
    for cell in cells:
        other = of_cell(cell)
        common = sorted(set(base) & set(other))
        if cell.pk != baseline.pk and common:
            pairs.append(ProfilePair(base[common[-1]], other[common[-1]], cell))
    return pairs
