"""Flame graphs of a run's profile, and differential ones between two runs' profiles.

plotly's icicle trace drawn upwards (`tiling: orientation v, flip y`) is a flame
graph: the root at the bottom, callees above their callers, each frame as wide
as its share of the samples; a click zooms into a frame. Nodes come from
runs/profiles/trees.py and are numbered here, so the figure does not carry each
call path (up to 80 frames) as its id.
"""

import zlib

from runs.charts.figures import PlotlyJson, figure_json
from runs.profiles.trees import FlameTree

# How tall one stack level is drawn, and the figure's bounds.
LEVEL_PX = 17
MIN_HEIGHT, MAX_HEIGHT = 320, 1100
# A difference's colour scale: blue where the share fell, red where it rose.
DIFF_SCALE = [[0.0, "#2166ac"], [0.5, "#f7f7f7"], [1.0, "#b2182b"]]
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


def _layout(tree: FlameTree, title: str) -> PlotlyJson:
    height = min(MAX_HEIGHT, max(MIN_HEIGHT, 90 + LEVEL_PX * _depth(tree)))
    return {
        "title": {"text": title, "x": 0, "xanchor": "left", "font": {"size": 14}},
        "height": height,
        "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
    }


def _depth(tree: FlameTree) -> int:
    return max((node.id.count(";") + 2 for node in tree.nodes if node.id), default=1)


def flame_figure(tree: FlameTree, title: str, filename: str) -> PlotlyJson:
    """A profile's flame graph: width is the share of samples, colour only tells frames
    apart."""
    trace = {
        **_icicle(tree),
        "marker": {"colors": [_warm(node.label) for node in tree.nodes]},
        "customdata": [round(node.share * 100, 2) for node in tree.nodes],
        "hovertemplate": "<b>%{label}</b><br>%{value} samples, %{customdata} % of all"
        "<extra></extra>",
    }
    return figure_json([trace], _layout(tree, title), filename)


def diff_flame_figure(
    tree: FlameTree, base_label: str, label: str, title: str, filename: str
) -> PlotlyJson:
    """The compared profile's flame graph coloured by how each frame's share of the samples
    changed from the baseline's: red hotter, blue cooler, white unchanged."""
    changes = [round((node.share - node.base_share) * 100, 2) for node in tree.nodes]
    reach = max([MIN_DIFF_RANGE, *(abs(change) for change in changes)])
    trace = {
        **_icicle(tree),
        "marker": {
            "colors": changes,
            "colorscale": DIFF_SCALE,
            "cmin": -reach,
            "cmax": reach,
            "cmid": 0,
            "showscale": True,
            "colorbar": {"title": {"text": "change<br>(points)"}, "thickness": 12},
        },
        "customdata": [
            [round(node.share * 100, 2), round(node.base_share * 100, 2), change]
            for node, change in zip(tree.nodes, changes, strict=True)
        ],
        "hovertemplate": f"<b>%{{label}}</b><br>{label}: %{{customdata[0]}} % of samples"
        f"<br>{base_label}: %{{customdata[1]}} %<br>change: %{{customdata[2]:+}} points"
        "<extra></extra>",
    }
    return figure_json([trace], _layout(tree, title), filename)
