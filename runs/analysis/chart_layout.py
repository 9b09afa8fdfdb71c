"""The chart layout of a comparison: which dimensions vary between its cells, which one is the
x axis, which one the colour, which ones the small-multiple facets, and which value
every other varying dimension is filtered to.

A dimension is something a cell (a run, or the runs of one cell measured in rounds)
has one value of (version, config, storage, workload, host, client host), or the
client count, which varies inside a run. The default layout follows what varies, not a
preset's name (docs/decisions.md): the dimension with the most values is the x axis
(the client count wins a tie: a sweep reads best as lines), the version (else the
config) the colour, hosts, storage and workloads the facets. Labels name only the
dimensions that vary. Pure functions over runs already loaded.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from runs.analysis.run_checks import stated_settings
from runs.models import Run, imported_file

CLIENTS = "clients"
RUN = "run"
TITLES = {
    "version": "version",
    "config": "config",
    "storage": "storage",
    "workload": "workload",
    "host": "host",
    "client_host": "client host",
    CLIENTS: "clients",
    RUN: "run",
}
# Ties for the x axis go to the first of these; then the colour, then the facets.
X_PREFERENCE = (CLIENTS, "config", "version", "host", "client_host", "workload", "storage", RUN)
COLOUR_PREFERENCE = ("version", "config", RUN, "client_host", "host")
FACET_PREFERENCE = ("host", "storage", "workload", "config", "version", "client_host", RUN)
LABEL_ORDER = ("version", "config", "storage", "workload", "host", "client_host", RUN)
SLOTS = ("x", "colour", "facet_col", "facet_row")
SLOT_TITLES = {"x": "x axis", "colour": "colour", "facet_col": "facets", "facet_row": "facet rows"}
FILTER_PREFIX = "only_"
NONE = "none"


@dataclass(frozen=True)
class Dimension:
    """One way the compared cells differ: its values in display order and each cell's."""

    key: str
    title: str
    values: tuple[str, ...]
    of_run: dict[int, str] = field(default_factory=dict)

    @property
    def varies(self) -> bool:
        return len(self.values) > 1


@dataclass(frozen=True)
class ChartLayout:
    """Where each varying dimension goes: a slot of the chart or a filter to one value."""

    x: str
    colour: str | None = None
    facet_col: str | None = None
    facet_row: str | None = None
    filters: dict[str, str] = field(default_factory=dict)

    def slot(self, name: str) -> str | None:
        return getattr(self, name)

    @property
    def placed(self) -> list[str]:
        """The dimensions drawn, x first."""
        return [d for d in (self.x, self.colour, self.facet_col, self.facet_row) if d]

    def query(self) -> dict[str, str]:
        """The layout as the comparison URL's query parameters."""
        params = {slot: self.slot(slot) or NONE for slot in SLOTS}
        return params | {FILTER_PREFIX + key: value for key, value in self.filters.items()}


def storage_value(run: Run) -> str:
    """`default`, or `default, WAL on wal` when the WAL has a target of its own."""
    return f"{run.storage_data}, WAL on {run.storage_wal}" if run.storage_wal else run.storage_data


def cell_name(run: Run) -> str:
    """What tells two otherwise equal cells apart: `e7 cell 2` in rounds, `#31 c8.log` for
    an import (its file), else `#12`."""
    if run.round is not None:
        return f"e{run.experiment_id} cell {run.cell + 1}"
    file_name = imported_file(run)
    return f"#{run.pk} {file_name}" if file_name else f"#{run.pk}"


def _config_values(runs: list[Run]) -> tuple[str, dict[int, str]]:
    """(title, value per run) of the config dimension: named after the one setting the
    profiles differ in when there is one (`wal_sync_method`: `fsync`), else by profile."""
    by_profile = {
        run.config_profile.name: dict(run.spec.get("settings") or stated_settings(run))
        for run in runs
    }
    keys = {k for settings in by_profile.values() for k in settings}
    differing = [k for k in sorted(keys) if len({str(s.get(k)) for s in by_profile.values()}) > 1]
    names = {run.pk: run.config_profile.name for run in runs}
    if len(by_profile) > 1 and len(differing) == 1:
        key = differing[0]
        values = {
            name: str(settings.get(key, "(default)")) for name, settings in by_profile.items()
        }
        if len(set(values.values())) == len(values):
            return key, {pk: values[name] for pk, name in names.items()}
    return TITLES["config"], names


def _run_values(run: Run) -> dict[str, str]:
    return {
        "version": run.build.name,
        "storage": storage_value(run),
        "workload": run.workload.name,
        "host": run.host.name,
        "client_host": run.client_host.name if run.client_host else "(server host)",
    }


def _ordered(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def dimensions(runs: list[Run], client_counts: Iterable[int]) -> dict[str, Dimension]:
    """Every dimension of these cells (one run stands for each), varying or not; `run` is
    added as a varying dimension only when the others leave two cells alike (an A/A test)."""
    runs = sorted(runs, key=lambda run: (run.experiment_id, run.cell, run.pk))  # matrix order
    per_run = {run.pk: _run_values(run) for run in runs}
    config_title, configs = _config_values(runs)
    found = {"config": Dimension("config", config_title, _ordered(configs.values()), configs)}
    for key in ("version", "storage", "workload", "host", "client_host"):
        of_run = {pk: values[key] for pk, values in per_run.items()}
        found[key] = Dimension(key, TITLES[key], _ordered(of_run.values()), of_run)
    counts = tuple(str(c) for c in sorted(set(client_counts)))
    found[CLIENTS] = Dimension(CLIENTS, TITLES[CLIENTS], counts)
    found = _merge_alike(sorted(found.values(), key=lambda d: rank(d.key, LABEL_ORDER)), runs)
    apart = [d for d in found.values() if d.varies and d.of_run]
    signatures = {tuple(d.of_run[run.pk] for d in apart) for run in runs}
    if len(signatures) < len(runs):
        names = {run.pk: cell_name(run) for run in runs}
        found[RUN] = Dimension(RUN, TITLES[RUN], _ordered(names.values()), names)
    return dict(sorted(found.items(), key=lambda item: rank(item[0], X_PREFERENCE)))


def rank(key: str, preference: tuple[str, ...]) -> int:
    """A dimension's place in a preference order (a merged one: its best part's)."""
    return min(
        preference.index(part) if part in preference else len(preference) for part in key.split("+")
    )


def _merge_alike(found: list[Dimension], runs: list[Run]) -> dict[str, Dimension]:
    """Varying dimensions that split the cells the same way become one (`version+config`,
    values `PostgreSQL 17 · tuned`): two runs that differ in four things are two cells,
    not four dimensions of which three would be filtered."""
    groups: dict[tuple[int, ...], list[Dimension]] = {}
    kept: dict[str, Dimension] = {}
    for dim in found:
        if dim.varies and dim.of_run:
            first_seen = {v: n for n, v in enumerate(dim.values)}
            groups.setdefault(tuple(first_seen[dim.of_run[run.pk]] for run in runs), []).append(dim)
        else:
            kept[dim.key] = dim
    for alike in groups.values():
        if len(alike) == 1:
            kept[alike[0].key] = alike[0]
            continue
        key = "+".join(d.key for d in alike)
        of_run = {run.pk: " · ".join(d.of_run[run.pk] for d in alike) for run in runs}
        title = " · ".join(d.title for d in alike)
        kept[key] = Dimension(key, title, _ordered(of_run.values()), of_run)
    return kept


def varying(dims: Mapping[str, Dimension]) -> list[str]:
    return [key for key, dim in dims.items() if dim.varies]


def _first(preference: tuple[str, ...], among: list[str], taken: list[str]) -> str | None:
    """The most preferred of `among` not taken; None when none is in `preference`."""
    free = [key for key in among if key not in taken and rank(key, preference) < len(preference)]
    return min(free, key=lambda key: rank(key, preference), default=None)


def default_filter(dim: Dimension) -> str:
    """The value a dimension left off the chart is filtered to: the most clients, else
    the first value."""
    return dim.values[-1] if dim.key == CLIENTS else dim.values[0]


def default_layout(dims: Mapping[str, Dimension]) -> ChartLayout:
    """The layout that reads best for what varies (see the module docstring)."""
    keys = varying(dims) or [CLIENTS]
    x = max(keys, key=lambda k: (len(dims[k].values), -rank(k, X_PREFERENCE)))
    colour = _first(COLOUR_PREFERENCE, keys, [x])
    taken = [x, colour] if colour else [x]
    facet_col = _first(FACET_PREFERENCE, keys, taken)
    facet_row = _first(FACET_PREFERENCE, keys, [*taken, facet_col]) if facet_col else None
    return _with_filters(ChartLayout(x, colour, facet_col, facet_row), dims, {})


def _determined(key: str, placed: list[str], dims: Mapping[str, Dimension]) -> bool:
    """Whether the drawn dimensions already fix this one's value for every cell (it then
    needs no filter: filtering it would only hide cells)."""
    of_run = dims[key].of_run
    drawn = [dims[k].of_run for k in placed if dims[k].of_run]
    if not of_run or not drawn:
        return False
    seen: dict[tuple[str, ...], str] = {}
    for pk, value in of_run.items():
        if seen.setdefault(tuple(d[pk] for d in drawn), value) != value:
            return False
    return True


def _with_filters(
    layout: ChartLayout, dims: Mapping[str, Dimension], asked: Mapping[str, str]
) -> ChartLayout:
    filters = {}
    for key in varying(dims):
        if key not in layout.placed and not _determined(key, layout.placed, dims):
            value = asked.get(key)
            filters[key] = value if value in dims[key].values else default_filter(dims[key])
    return ChartLayout(layout.x, layout.colour, layout.facet_col, layout.facet_row, filters)


def _choice_error(slot: str, asked: str, dims: Mapping[str, Dimension]) -> str:
    choices = ", ".join(varying(dims)) or CLIENTS
    extra = "" if slot == "x" else f" or {NONE}"
    what = f"{SLOT_TITLES[slot]}: {asked!r} is not a dimension that varies here"
    return f"{what}; choose {choices}{extra}."


def layout_from_query(
    dims: Mapping[str, Dimension], query: Mapping[str, str]
) -> tuple[ChartLayout, list[str]]:
    """The layout the URL asks for, slot by slot over the default, with an error naming
    each slot that asked for something impossible (that slot keeps its default)."""
    default, errors = default_layout(dims), []
    keys = varying(dims) or [CLIENTS]
    chosen: dict[str, str | None] = {}
    for slot in SLOTS:
        asked = query.get(slot)
        if asked is None or asked == "":
            continue
        if asked == NONE and slot != "x":
            chosen[slot] = None
        elif asked not in keys:
            errors.append(_choice_error(slot, asked, dims))
        elif asked in chosen.values():
            errors.append(f"{SLOT_TITLES[slot]}: {asked} is already drawn; pick another dimension.")
        else:
            chosen[slot] = asked
    taken = [key for key in chosen.values() if key]
    slots = {
        slot: chosen[slot] if slot in chosen else _unless_taken(default.slot(slot), taken)
        for slot in SLOTS
    }
    x = slots["x"] or next(k for k in keys if k not in taken)
    layout = ChartLayout(x, slots["colour"], slots["facet_col"], slots["facet_row"])
    asked_filters = {
        key.removeprefix(FILTER_PREFIX): value
        for key, value in query.items()
        if key.startswith(FILTER_PREFIX)
    }
    return _with_filters(layout, dims, asked_filters), errors


def _unless_taken(key: str | None, taken: list[str]) -> str | None:
    return None if key in taken else key


def cell_labels(runs: list[Run], dims: Mapping[str, Dimension]) -> dict[int, str]:
    """Run id -> its cell's values of the dimensions that vary between cells, joined:
    `PostgreSQL 17 · tuning 2: memory · default, WAL on wal`."""
    shown = [d for d in dims.values() if d.varies and d.of_run]
    shown.sort(key=lambda d: rank(d.key, LABEL_ORDER))
    labels = {run.pk: " · ".join(d.of_run[run.pk] for d in shown) for run in runs}
    return {pk: label or cell_name_of(runs, pk) for pk, label in labels.items()}


def cell_name_of(runs: list[Run], pk: int) -> str:
    return next(cell_name(run) for run in runs if run.pk == pk)


def point_values(run: Run, clients: int, dims: Mapping[str, Dimension]) -> dict[str, str]:
    """One measured point's value of every dimension."""
    values = {key: dim.of_run[run.pk] for key, dim in dims.items() if dim.of_run}
    return values | {CLIENTS: str(clients)}


def kept(values: Mapping[str, str], layout: ChartLayout) -> bool:
    """Whether a point passes the layout's filters."""
    return all(values.get(key) == value for key, value in layout.filters.items())
