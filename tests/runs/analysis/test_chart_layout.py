"""The chart layout of a comparison from what varies (runs/analysis/chart_layout.py), its
labels, and the chart drawn from it (runs/charts/laid_out.py), on runs built in memory
like the presets'."""

import itertools

from runs.analysis.chart_layout import (
    ChartLayout,
    cell_labels,
    default_layout,
    dimensions,
    layout_from_query,
    point_values,
)
from runs.analysis.pivot import PlacedPoint
from runs.charts.laid_out import laid_out_figure
from runs.inference.stats import summarize
from runs.models import ConfigProfile, Host, PgBuild, Run, Workload

HOSTS = {name: Host(name=name) for name in ("alpha", "beta")}


def cell(pk: int, version="PostgreSQL 16", config="defaults", storage=("default", ""),
         workload="TPC-B", host="alpha", settings=None) -> Run:  # fmt: skip
    """A run of cell `pk` as the comparison reads it (nothing saved)."""
    run = Run(
        pk=pk,
        experiment_id=1,
        cell=pk,
        build=PgBuild(name=version),
        config_profile=ConfigProfile(name=config),
        workload=Workload(name=workload),
        host=HOSTS[host],
        storage_data=storage[0],
        storage_wal=storage[1],
        spec={"settings": settings or {}},
    )
    run._state.fields_cache["provenance"] = None  # not imported (pages join it: selectors)
    return run


def matrix(**values: list) -> list[Run]:
    """One run per combination of the given dimension values, in matrix order."""
    keys = list(values)
    combos = itertools.product(*(values[k] for k in keys))
    return [cell(n, **dict(zip(keys, combo, strict=True))) for n, combo in enumerate(combos, 1)]


def test_preset_1_draws_configs_as_grouped_bars_per_version_a_facet_per_storage():
    runs = matrix(
        version=["PostgreSQL 16", "PostgreSQL 17"],
        config=["defaults", "tuning 1: WAL", "tuning 2: memory", "tuning 3: more memory"],
        storage=[("default", ""), ("default", "wal")],
    )
    dims = dimensions(runs, [10, 20])
    chart_layout = default_layout(dims)
    assert chart_layout == ChartLayout("config", "version", "storage", None, {"clients": "20"})
    assert dims["storage"].values == ("default", "default, WAL on wal")
    labels = cell_labels(runs, dims)
    assert labels[runs[1].pk] == "PostgreSQL 16 · defaults · default, WAL on wal"
    assert len(set(labels.values())) == 16


def test_preset_2_names_the_config_by_the_setting_it_varies_a_facet_per_storage():
    runs = [
        cell(n, config=f"wal_sync_method={m}", storage=(s, ""), settings={"wal_sync_method": m})
        for n, (s, m) in enumerate(
            itertools.product(["pcie", "sata", "sas"], ["fdatasync", "fsync", "open_sync"]), 1
        )
    ]
    dims = dimensions(runs, [8])
    assert dims["config"].title == "wal_sync_method"
    assert dims["config"].values == ("fdatasync", "fsync", "open_sync")
    assert default_layout(dims) == ChartLayout("config", None, "storage", None, {})


def test_preset_3_draws_tps_against_clients_a_line_per_version_a_facet_per_workload():
    runs = matrix(
        version=["PostgreSQL 16", "PostgreSQL 17"],
        workload=["select-only", "update by key", "TPC-B"],
    )
    chart_layout = default_layout(dimensions(runs, [1, 4, 16]))
    assert chart_layout == ChartLayout("clients", "version", "workload", None, {})


def test_preset_4_draws_a_line_per_memory_profile_a_facet_per_host():
    runs = matrix(
        config=["memory: does not fit", "memory: fits"],
        workload=["select-only", "TPC-B"],
        host=["alpha", "beta"],
    )
    chart_layout = default_layout(dimensions(runs, [1, 4, 8, 16]))
    assert chart_layout == ChartLayout("clients", "config", "host", "workload", {})


def test_an_a_a_comparison_tells_its_cells_apart_by_run():
    runs = [cell(1), cell(2)]
    dims = dimensions(runs, [4])
    assert dims["run"].values == ("#1", "#2")
    assert default_layout(dims) == ChartLayout("run", None, None, None, {})
    assert cell_labels(runs, dims) == {1: "#1", 2: "#2"}


def test_labels_name_only_what_differs_storage_included():
    runs = [cell(1), cell(2, storage=("default", "wal"))]
    assert cell_labels(runs, dimensions(runs, [4])) == {1: "default", 2: "default, WAL on wal"}


def test_the_query_moves_dimensions_and_filters_the_rest():
    runs = matrix(version=["16", "17"], workload=["ro", "rw", "mix"])
    dims = dimensions(runs, [1, 4, 16])
    chart_layout, errors = layout_from_query(
        dims, {"x": "version", "colour": "clients", "only_ro": "x"}
    )
    assert errors == []
    # The workload keeps its facet; nothing is left to filter.
    assert chart_layout == ChartLayout("version", "clients", "workload", None, {})
    chart_layout, errors = layout_from_query(dims, {"facet_col": "none", "only_workload": "rw"})
    assert chart_layout == ChartLayout("clients", "version", None, None, {"workload": "rw"})
    asked = {"x": "host", "colour": "version", "facet_col": "version"}
    chart_layout, errors = layout_from_query(dims, asked)
    assert errors == [
        "x axis: 'host' is not a dimension that varies here; choose clients, version, workload.",
        "facets: version is already drawn; pick another dimension.",
    ]
    assert chart_layout == ChartLayout("clients", "version", "workload", None, {})


def points_of(runs: list[Run], dims, means: dict[int, float]) -> list[PlacedPoint]:
    return [
        PlacedPoint(run, 4, point_values(run, 4, dims), summarize([m * 0.99, m, m * 1.01]), [], [])
        for run in runs
        for m in [means[run.pk]]
    ]


def test_facets_ten_times_apart_get_their_own_y_axis_and_one_legend_entry_per_colour():
    runs = matrix(config=["small", "large"], workload=["TPC-B", "select-only"])
    dims = dimensions(runs, [4])
    chart_layout = default_layout(dims)
    assert chart_layout == ChartLayout("config", None, "workload", None, {})
    chart_layout = ChartLayout("workload", "config", None, None, {})
    means = {1: 1000.0, 2: 20000.0, 3: 1100.0, 4: 21000.0}
    figure = laid_out_figure(points_of(runs, dims, means), chart_layout, dims, "tps", "c")
    shown = [t["name"] for t in figure["data"] if t["showlegend"]]
    assert shown == ["small", "large"]
    assert figure["layout"]["yaxis"]["type"] == "log"  # one facet holding 1k and 20k tps
    chart_layout = ChartLayout("config", None, "workload", None, {})
    figure = laid_out_figure(points_of(runs, dims, means), chart_layout, dims, "tps", "c")
    assert "matches" not in figure["layout"]["yaxis2"]  # 1k beside 20k: each its own y
    assert figure["layout"]["yaxis2"]["rangemode"] == "tozero"
    assert figure["config"]["displaylogo"] is False
    assert figure["config"]["toImageButtonOptions"]["filename"] == "c-tps-by-config"
