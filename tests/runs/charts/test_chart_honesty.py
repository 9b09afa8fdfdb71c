"""Charts that do not exaggerate, read from the figure JSON the pages draw: no bar stands
on a log axis or on a y range that does not start at zero, every trace of a chart of up
to 24 (and more) traces is told apart, overlaid timelines included, peak labels stop past
a few runs, a legend's height is counted in its figure, and hover text is never drawn
inside a bar. The presets' chart layouts on runs built in memory
(tests/runs/analysis/test_chart_layout.py)."""

import itertools
import math

import pytest

from runs.analysis.chart_layout import ChartLayout, cell_labels, dimensions, point_values
from runs.analysis.compare import METRICS, run_peaks
from runs.analysis.pivot import PlacedPoint
from runs.charts.clients import PEAK_ANNOTATIONS_MAX, clients_figure
from runs.charts.figures import COLORS, DASHES, legend_space, trace_style
from runs.charts.laid_out import OWN_Y_NOTE, laid_out_figure
from runs.charts.timelines import overlaid_server, overlaid_timelines
from runs.inference.stats import summarize
from runs.models import Result, Run
from runs.timelines.store import Digest
from tests.runs.analysis.test_chart_layout import matrix

VERSIONS = ["PostgreSQL 16", "PostgreSQL 17"]
LADDER = ["defaults", "tuning 1: WAL", "tuning 2: memory", "tuning 3: more memory"]
STORAGE = [("default", ""), ("default", "wal")]
WORKLOADS = ["select-only", "update by key", "single-table inserts"]


def preset_1_runs() -> list[Run]:
    return matrix(version=VERSIONS, config=LADDER, storage=STORAGE)


def points_of(runs: list[Run], dims, tps_of) -> list[PlacedPoint]:
    """Three repeats 1 % apart at each client count, their mean `tps_of(run, clients)`."""
    clients = [int(c) for c in dims["clients"].values]
    return [
        PlacedPoint(run, c, point_values(run, c, dims), summarize([m * 0.99, m, m * 1.01]), [], [])
        for run in runs
        for c in clients
        for m in [tps_of(run, c)]
    ]


def results_of(runs: list[Run], clients: list[int]) -> dict[int, list[Result]]:
    """Three repeats per run and client count, each run a little faster than the one before."""
    return {
        run.pk: [
            Result(
                run=run,
                index=n,
                clients=c,
                repeat=r,
                tps=(1000 + 10 * run.pk) * c * f,
                latency_avg_ms=1.0 / f,
                exit_code=0,
            )  # fmt: skip
            for n, (c, (r, f)) in enumerate(
                itertools.product(clients, enumerate((0.99, 1.0, 1.01), 1))
            )
        ]
        for run in runs
    }


def experiment_figure(count: int, clients: list[int]) -> dict:
    runs = matrix(config=[f"profile {n}" for n in range(count)])
    results = results_of(runs, clients)
    labels = cell_labels(runs, dimensions(runs, clients))
    peaks = {run.pk: run_peaks(results[run.pk], ["tps"])["tps"] for run in runs}
    return clients_figure(runs, results, "tps", labels, "e1", peaks=peaks)


def y_axis_of(figure: dict, trace: dict) -> dict:
    return figure["layout"]["yaxis" + trace.get("yaxis", "y").removeprefix("y")]


def assert_bars_stand_on_zero(figure: dict) -> None:
    for trace in figure["data"]:
        if trace["type"] == "bar":
            axis = y_axis_of(figure, trace)
            assert axis.get("type", "linear") == "linear", axis
            starts = axis.get("range", [0])[0] == 0 or axis.get("rangemode") == "tozero"
            assert starts, axis


def assert_no_text_in_bars(figure: dict) -> None:
    for trace in figure["data"]:
        assert "text" not in trace, trace["name"]
        assert "%{text}" not in trace.get("hovertemplate", "")
        if trace["type"] == "bar":
            assert trace["textposition"] == "none"


def assert_legend_fits(figure: dict, entries: list[str]) -> None:
    """The legend's room is below the plot, inside the figure, and no taller than the plot."""
    layout = figure["layout"]
    space = legend_space(entries, bool(layout["legend"]["title"]["text"]))
    margin = layout["margin"]
    plot = layout["height"] - margin["t"] - margin["b"]
    assert margin["b"] >= space.height_px + 40
    assert space.height_px <= plot
    assert layout["legend"]["orientation"] == "h" and layout["legend"]["y"] < 0


def styles(figure: dict) -> list[tuple]:
    """Each legend entry's (colour, dash, marker) as drawn."""
    return [
        (t["marker"]["color"], t.get("line", {}).get("dash"), t["marker"].get("symbol", [None])[0])
        for t in figure["data"]
        if t.get("showlegend", True)
    ]


@pytest.mark.parametrize("count", [16, 24, 64])
def test_traces_are_told_apart_by_colour_dash_and_marker(count):
    drawn = [trace_style(n) for n in range(count)]
    assert len({(s.color, s.dash, s.symbol) for s in drawn}) == count
    if count <= len(COLORS) * len(DASHES):
        # Lines, points and bars each on their own stay apart: no two alike in colour
        # and dash, colour and marker, or colour and bar pattern.
        for pair in (("color", "dash"), ("color", "symbol"), ("color", "pattern")):
            assert len({tuple(getattr(s, key) for key in pair) for s in drawn}) == count


@pytest.mark.parametrize("count", [16, 24])
def test_an_experiment_of_many_cells_draws_each_apart_with_its_peaks_in_the_table(count):
    figure = experiment_figure(count, [1, 2, 4, 8])
    drawn = styles(figure)
    assert len(drawn) == count and len(set(drawn)) == count
    assert figure["layout"]["annotations"] == []  # listed in the peaks table instead
    assert_legend_fits(figure, [t["name"] for t in figure["data"]])
    assert_no_text_in_bars(figure)


def test_a_few_cells_keep_their_peak_labels_stacked_where_they_share_a_client_count():
    figure = experiment_figure(PEAK_ANNOTATIONS_MAX, [1, 2, 4, 8])
    annotations = figure["layout"]["annotations"]
    # On a log x axis plotly places a label by the log10 of its x.
    assert figure["layout"]["xaxis"]["type"] == "log"
    assert [a["x"] for a in annotations] == [math.log10(8)] * PEAK_ANNOTATIONS_MAX
    assert len({a["ay"] for a in annotations}) == PEAK_ANNOTATIONS_MAX
    assert experiment_figure(PEAK_ANNOTATIONS_MAX + 1, [1, 2])["layout"]["annotations"] == []


def test_one_client_count_draws_bars_from_zero_with_the_hover_outside_them():
    figure = experiment_figure(16, [20])
    assert {t["type"] for t in figure["data"]} == {"bar"}
    assert_bars_stand_on_zero(figure)
    assert_no_text_in_bars(figure)
    patterns = [(t["marker"]["color"], t["marker"]["pattern"]["shape"][0]) for t in figure["data"]]
    assert len(set(patterns)) == 16


def test_preset_1_layout_draws_bars_from_zero_one_shared_axis_and_a_legend_in_the_figure():
    runs = preset_1_runs()
    dims = dimensions(runs, [10, 20])
    chart_layout = ChartLayout("config", "version", "storage", None, {"clients": "20"})
    tps = {run.pk: 450 * (1 + 0.6 * (run.pk % 8 // 2)) for run in runs}
    figure = laid_out_figure(
        points_of(runs, dims, lambda r, c: tps[r.pk]), chart_layout, dims, "tps", "s"
    )
    assert {t["type"] for t in figure["data"]} == {"bar"}
    assert_bars_stand_on_zero(figure)
    assert_no_text_in_bars(figure)
    assert figure["layout"]["yaxis2"]["matches"] == "y"
    assert OWN_Y_NOTE not in figure["layout"]["title"]["text"]
    assert_legend_fits(figure, VERSIONS)


def test_fsync_beside_fdatasync_on_a_log_axis_is_drawn_as_points_not_bars():
    runs = matrix(config=["fdatasync", "fsync", "open_sync"], storage=STORAGE)
    dims = dimensions(runs, [8])
    chart_layout = ChartLayout("config", None, "storage", None, {})
    # One panel holds 14,400 and 1,055 tps: a log axis, where a bar's length means nothing.
    tps = {1: 14400.0, 2: 14400.0, 3: 1055.0, 4: 671.0, 5: 684.0, 6: 680.0}
    figure = laid_out_figure(
        points_of(runs, dims, lambda r, c: tps[r.pk]), chart_layout, dims, "tps", "d"
    )
    assert figure["layout"]["yaxis"]["type"] == "log"
    assert {t["type"] for t in figure["data"]} == {"scatter"}
    assert {t["mode"] for t in figure["data"]} == {"markers"}
    assert all(t["error_y"]["visible"] for t in figure["data"])
    assert figure["layout"]["scattermode"] == "group"
    assert_no_text_in_bars(figure)


def test_preset_3_facets_five_times_apart_get_their_own_y_axis_said_in_the_title():
    runs = matrix(version=VERSIONS, workload=WORKLOADS)
    dims = dimensions(runs, [1, 4, 16])
    chart_layout = ChartLayout("clients", "version", "workload", None, {})
    # Preset 3 as measured: select-only near 35k, updates by key and inserts at 1k to 4k.
    base = {"select-only": 35000.0, "update by key": 4000.0, "single-table inserts": 3500.0}

    def tps(run: Run, clients: int) -> float:
        return base[run.workload.name] * (1 + 0.1 * clients)

    figure = laid_out_figure(points_of(runs, dims, tps), chart_layout, dims, "tps", "s3")
    layout = figure["layout"]
    assert OWN_Y_NOTE in layout["title"]["text"]
    assert all("matches" not in layout[f"yaxis{n}"] for n in ("", "2", "3"))
    assert all(layout[f"yaxis{n}"]["rangemode"] == "tozero" for n in ("", "2", "3"))
    assert {t["type"] for t in figure["data"]} == {"scatter"}
    assert len(set(styles(figure))) == len(VERSIONS)
    dashes = {t["name"]: t["line"]["dash"] for t in figure["data"]}
    assert dashes == dict.fromkeys(VERSIONS, "solid")  # two colours already tell them apart
    assert_legend_fits(figure, VERSIONS)
    assert_no_text_in_bars(figure)
    # Within fivefold: one axis for all.
    base = dict.fromkeys(base, 2000.0) | {"select-only": 9000.0}
    figure = laid_out_figure(points_of(runs, dims, tps), chart_layout, dims, "tps", "s3")
    assert OWN_Y_NOTE not in figure["layout"]["title"]["text"]
    assert figure["layout"]["yaxis3"]["matches"] == "y"


def test_a_legend_of_long_labels_takes_fewer_columns_and_the_figure_grows_by_it():
    short = legend_space(["PostgreSQL 16", "PostgreSQL 17"], titled=True)
    long = legend_space([f"PostgreSQL 17 · tuning {n}: more memory · default, WAL on wal"
                         for n in range(24)], titled=False)  # fmt: skip
    assert (short.columns, short.rows) == (2, 1)
    assert long.columns < 4 and long.rows == 24 // long.columns
    small, large = experiment_figure(2, [1, 2]), experiment_figure(24, [1, 2])
    grown = large["layout"]["height"] - small["layout"]["height"]
    rooms = [legend_space([t["name"] for t in f["data"]], False) for f in (small, large)]
    assert grown == rooms[1].height_px - rooms[0].height_px > 0
    assert METRICS["tps"] in large["layout"]["title"]["text"]


def test_overlaid_timelines_of_24_cells_draw_each_cell_its_own_way():
    runs = matrix(config=[f"profile {n}" for n in range(24)])
    digests = {run.pk: Digest({}, [], {}, {}) for run in runs}
    labels = cell_labels(runs, dimensions(runs, [1]))
    for figure in overlaid_timelines(runs, digests, labels, "c").values():
        lines = [(t["line"]["color"], t["line"]["dash"]) for t in figure["data"] if t["showlegend"]]
        assert len(lines) == 24 and len(set(lines)) == 24
    server = overlaid_server(runs, digests, labels, "c")["data"]
    lines = [
        (t["line"]["color"], t["line"]["dash"])
        for t in server
        if t["type"] == "scatter" and "line" in t
    ]
    assert len(set(lines)) == 24
