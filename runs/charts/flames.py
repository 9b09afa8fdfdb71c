"""Flame graphs of a run's CPU profile, and differential ones between two runs' CPU profiles.

plotly's icicle trace drawn upwards (`tiling: orientation v, flip y`) is a flame
graph: the root at the bottom, callees above their callers, each frame as wide
as its share of the samples; a click zooms into a frame. Nodes come from
runs/flamegraphs/trees.py and are numbered here, so the figure does not carry each
call path (up to 80 frames) as its id.
"""

import math
import zlib

from runs.charts.figures import PlotlyJson, figure_json
from runs.flamegraphs.changes import FrameChange, TreeChanges, tested_frames
from runs.flamegraphs.trees import FlameTree
from runs.inference import stats

# How tall one stack level is drawn, and the figure's bounds.
LEVEL_PX = 17
MIN_HEIGHT, MAX_HEIGHT = 320, 1100
# A difference's colour scale: blue where the share fell, red where it rose, beyond noise;
# a grey band around 0 for the frames within noise (drawn at 0). A change beyond noise is
# drawn at least GREY_BAND x 1.5 of the scale's half from 0, so it never looks grey.
GREY = "#bdbdbd"
GREY_BAND = 0.02
DIFF_SCALE = [
    [0.0, "#2166ac"],
    [0.5 - GREY_BAND / 2, "#d1e5f0"],
    [0.5 - GREY_BAND / 2, GREY],
    [0.5 + GREY_BAND / 2, GREY],
    [0.5 + GREY_BAND / 2, "#fddbc7"],
    [1.0, "#b2182b"],
]
# The margin above a differential graph: its title, then the note on noise (two lines).
NOTED_TOP = 100
# The colour scale's ends at least this far from 0, in percentage points.
MIN_DIFF_RANGE = 1.0


def _warm(label: str) -> str:
    """The classic flame palette: a warm colour fixed by the frame's name, so a function
    keeps its colour in every graph."""
    digest = zlib.crc32(label.encode())
    red = 205 + digest % 50
    green = 60 + (digest >> 8) % 150
    blue = (digest >> 16) % 55
    return f"rgb({red},{green},{blue})"


def _icicle(tree: FlameTree) -> PlotlyJson:
    """The trace's shape: numbered ids and parents, labels, inclusive samples."""
    number = {node.id: str(index) for index, node in enumerate(tree.nodes)}
    return {
        "type": "icicle",
        "ids": list(number.values()),
        "labels": [node.label for node in tree.nodes],
        "parents": ["" if not node.id else number[node.parent] for node in tree.nodes],
        "values": [node.samples for node in tree.nodes],
        "branchvalues": "total",
        "tiling": {"orientation": "v", "flip": "y"},
        "textinfo": "label",
        "insidetextfont": {"size": 11},
        "pathbar": {"visible": True, "side": "top"},
        "sort": False,
    }


def _layout(tree: FlameTree, title: str, top: int = 60) -> PlotlyJson:
    """Title and size; `top`: the margin above the graph (room for a note under the title)."""
    height = min(MAX_HEIGHT, max(MIN_HEIGHT, 30 + top + LEVEL_PX * _depth(tree)))
    return {
        "title": {
            "text": title,
            "x": 0,
            "xanchor": "left",
            "y": 1,
            "yref": "container",
            "yanchor": "top",
            "pad": {"t": 12},
            "font": {"size": 14},
        },
        "height": height,
        "margin": {"l": 10, "r": 10, "t": top, "b": 10},
    }


def _depth(tree: FlameTree) -> int:
    return max((node.id.count(";") + 2 for node in tree.nodes if node.id), default=1)


def flame_figure(tree: FlameTree, title: str, filename: str) -> PlotlyJson:
    """A CPU profile's flame graph: width is the share of samples, colour only tells frames
    apart."""
    trace = {
        **_icicle(tree),
        "marker": {"colors": [_warm(node.label) for node in tree.nodes]},
        "customdata": [round(node.share * 100, 2) for node in tree.nodes],
        "hovertemplate": "<b>%{label}</b><br>%{value} samples, %{customdata} % of all"
        "<extra></extra>",
    }
    return figure_json([trace], _layout(tree, title), filename)


def _colour_value(change: FrameChange, reach: float) -> float:
    """Where a frame sits on the colour scale: 0 (grey) within noise, else its change, kept
    clear of the grey band."""
    if not change.beyond_noise:
        return 0.0
    least = GREY_BAND * 1.5 * reach
    return math.copysign(max(abs(change.points), least), change.points)


def noise_note(tree: FlameTree) -> str:
    """What the colours rest on, written on the graph: the samples and the threshold."""
    return (
        f"{tree.samples:,} samples against the baseline's {tree.base_samples:,}.<br>Coloured: "
        "a frame whose share changed beyond sampling noise (two-proportion z-test per frame, "
        f"Benjamini–Hochberg q ≤ {stats.FDR_Q:g} over {tested_frames(tree)} frames); grey: "
        "within noise"
    )


def diff_flame_figure(
    tree: FlameTree,
    base_label: str,
    label: str,
    title: str,
    filename: str,
    changes: TreeChanges,
) -> PlotlyJson:
    """The compared CPU profile's flame graph coloured by how each frame's share of the samples
    changed from the baseline's (`changes`: `tree_changes(tree)`) where the change is beyond
    sampling noise: red hotter, blue cooler; grey within noise."""
    drawn = changes.drawn
    beyond = [abs(change.points) for change in drawn if change.beyond_noise]
    reach = max([MIN_DIFF_RANGE, *beyond])
    trace = {
        **_icicle(tree),
        "marker": {
            "colors": [_colour_value(change, reach) for change in drawn],
            "colorscale": DIFF_SCALE,
            "cmin": -reach,
            "cmax": reach,
            "cmid": 0,
            "showscale": True,
            "colorbar": {"title": {"text": "change<br>(points)"}, "thickness": 12},
        },
        "customdata": [
            [
                round(node.share * 100, 2),
                round(node.base_share * 100, 2),
                round(change.points, 2),
                "beyond noise" if change.beyond_noise else "within noise",
                f"{change.q:.2g}",
            ]
            for node, change in zip(tree.nodes, drawn, strict=True)
        ],
        "hovertemplate": f"<b>%{{label}}</b><br>{label}: %{{customdata[0]}} % of samples"
        f"<br>{base_label}: %{{customdata[1]}} %<br>change: %{{customdata[2]:+}} points, "
        "%{customdata[3]} (q = %{customdata[4]})<extra></extra>",
    }
    layout = _layout(tree, title, top=NOTED_TOP)
    layout["annotations"] = [
        {
            "text": noise_note(tree),
            "xref": "paper",
            "yref": "paper",
            "x": 0,
            "y": 1,
            "yanchor": "bottom",
            "yshift": 6,
            "xanchor": "left",
            "showarrow": False,
            "font": {"size": 11},
            "align": "left",
        }
    ]
    return figure_json([trace], layout, filename)
