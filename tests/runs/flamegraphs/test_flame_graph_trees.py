"""Folded stacks as flame-graph trees and their differences, and the icicle figures drawn
from them (runs/flamegraphs/trees.py, runs/charts/flames.py)."""

import numpy as np
import pytest

from runs.charts.flames import diff_flame_figure, flame_figure
from runs.flamegraphs import changes
from runs.flamegraphs.changes import changed_frames, tree_changes
from runs.flamegraphs.trees import MIN_NODE_SHARE, flame_tree

BASE = "main;exec;scan 60\nmain;exec;sort 30\nmain;parse 10\n"
OTHER = "main;exec;scan 30\nmain;exec;hash 50\nmain;parse 20\n"
# A backend's time, as stacks and their shares.
STACK_SHARES = {
    "PostgresMain;exec;scan": 0.30,
    "PostgresMain;exec;hash": 0.20,
    "PostgresMain;exec;sort": 0.15,
    "PostgresMain;parse": 0.15,
    "PostgresMain;plan": 0.10,
    "PostgresMain;commit": 0.10,
}


def test_a_tree_holds_each_call_path_with_its_inclusive_share() -> None:
    tree = flame_tree(BASE)

    shares = {node.id: node.share for node in tree.nodes}
    assert tree.samples == 100
    assert shares == {
        "": 1.0,
        "main": 1.0,
        "main;exec": 0.9,
        "main;exec;scan": 0.6,
        "main;exec;sort": 0.3,
        "main;parse": 0.1,
    }
    assert {node.id: node.parent for node in tree.nodes}["main;exec;scan"] == "main;exec"


def test_paths_too_narrow_to_see_are_left_out() -> None:
    rare = int(1 / MIN_NODE_SHARE) * 10
    tree = flame_tree(f"main;hot {rare}\nmain;rare 1\n")
    assert "main;rare" not in {node.id for node in tree.nodes}


def test_a_difference_keeps_the_compared_shape_and_each_paths_baseline_share() -> None:
    tree = flame_tree(OTHER, BASE)

    by_id = {node.id: node for node in tree.nodes}
    assert set(by_id) == {"", "main", "main;exec", "main;exec;scan", "main;exec;hash", "main;parse"}
    scan = by_id["main;exec;scan"]
    assert (scan.share, scan.base_share) == (0.3, 0.6)
    assert by_id["main;exec;hash"].base_share == 0.0
    assert tree.base_samples == 100


def test_a_difference_keeps_the_baselines_paths_it_cannot_draw_outermost_only() -> None:
    tree = flame_tree(
        "main;exec;scan 700\nmain;parse 299\nmain;exec;sort 1\n",
        "main;exec;scan 40\nmain;exec;sort;qsort 30\nmain;exec;sort 10\nmain;parse 20\n",
    )

    gone = [(node.id, node.samples, node.base_count) for node in tree.gone]
    assert gone == [("main;exec;sort", 1, 40)]
    assert tree.gone[0].share == 0.001 and tree.gone[0].base_share == 0.4


def test_a_flame_graph_is_an_upward_icicle_with_numbered_ids() -> None:
    figure = flame_figure(flame_tree(BASE), "title", "name")

    [trace] = figure["data"]  # type: ignore[misc]
    assert trace["type"] == "icicle"
    assert trace["tiling"] == {"orientation": "v", "flip": "y"}
    assert trace["ids"] == [str(n) for n in range(6)]
    labels = dict(zip(trace["ids"], trace["labels"], strict=True))
    parents = dict(zip(trace["ids"], trace["parents"], strict=True))
    assert labels[parents[trace["ids"][trace["labels"].index("scan")]]] == "exec"
    assert trace["values"][trace["labels"].index("main")] == 100


def test_a_differential_flame_graph_colours_each_frame_by_its_change_in_share() -> None:
    # 100 samples a side: scan 60 -> 30 and hash 0 -> 50 are far beyond noise; parse
    # 10 -> 20 is not (two-proportion p = 0.08 before BH).
    tree = flame_tree(OTHER, BASE)
    figure = diff_flame_figure(tree, "16", "17", "title", "name", tree_changes(tree))

    [trace] = figure["data"]  # type: ignore[misc]
    colour = dict(zip(trace["labels"], trace["marker"]["colors"], strict=True))
    assert colour["scan"] == -30.0 and colour["hash"] == 50.0 and colour["parse"] == 0.0
    assert trace["marker"]["cmid"] == 0 and trace["marker"]["cmax"] == 50.0
    assert "17: %{customdata[0]}" in trace["hovertemplate"]
    hover = dict(zip(trace["labels"], trace["customdata"], strict=True))
    assert hover["parse"][2:4] == [10.0, "within noise"]
    assert hover["hash"][3] == "beyond noise"


def synthetic_folded(rng: np.random.Generator, shares: dict[str, float], samples: int) -> str:
    """Folded stacks of `samples` drawn at random from the stacks' `shares`."""
    counts = rng.multinomial(samples, list(shares.values()))
    return "".join(f"{stack} {n}\n" for stack, n in zip(shares, counts, strict=True) if n)


def grey_and_coloured(folded: str, base_folded: str) -> tuple[set[str], set[str]]:
    tree = flame_tree(folded, base_folded)
    figure = diff_flame_figure(tree, "B", "A", "t", "n", tree_changes(tree))
    [trace] = figure["data"]  # type: ignore[misc]
    frames = list(zip(trace["ids"], trace["marker"]["colors"], strict=True))[1:]  # no root
    labels = dict(zip(trace["ids"], trace["labels"], strict=True))
    grey = {labels[i] for i, value in frames if value == 0.0}
    return grey, {labels[i] for i, value in frames} - grey


@pytest.mark.parametrize("seed", range(5))
def test_an_a_a_difference_of_some_275_samples_a_side_draws_every_frame_grey(seed: int) -> None:
    # Two CPU profiles of the same server: frames move by several points on sampling alone.
    rng = np.random.default_rng(seed)
    grey, coloured = grey_and_coloured(
        synthetic_folded(rng, STACK_SHARES, 275), synthetic_folded(rng, STACK_SHARES, 280)
    )
    assert coloured == set() and "hash" in grey


def test_a_change_beyond_noise_is_coloured_and_the_rest_stays_grey() -> None:
    rng = np.random.default_rng(7)
    slower = {**STACK_SHARES, "PostgresMain;exec;hash": 0.45, "PostgresMain;exec;scan": 0.15}
    grey, coloured = grey_and_coloured(
        synthetic_folded(rng, slower, 275), synthetic_folded(rng, STACK_SHARES, 275)
    )
    assert {"hash", "scan"} <= coloured
    assert {"parse", "sort"} <= grey


def test_a_frame_only_the_baseline_has_is_tested_with_the_drawn_ones() -> None:
    rng = np.random.default_rng(11)
    flushing = {**STACK_SHARES, "PostgresMain;exec;scan": 0.15, "PostgresMain;commit;flush": 0.15}
    asynchronous = synthetic_folded(rng, STACK_SHARES, 275)

    tree = flame_tree(asynchronous, synthetic_folded(rng, flushing, 275))
    [flush] = tree.gone
    found = tree_changes(tree)
    [change] = found.gone
    assert flush.id == "PostgresMain;commit;flush" and flush.samples == 0
    assert change.beyond_noise and change.points == pytest.approx(-15, abs=5)
    assert changes.tested_frames(tree) == len(tree.nodes)  # the drawn ones but the root, and flush
    listed = changed_frames([*tree.nodes, *tree.gone], [*found.drawn, *found.gone])
    assert flush in [frame.node for frame in listed]
    assert [abs(frame.change.points) for frame in listed] == sorted(
        (abs(frame.change.points) for frame in listed), reverse=True
    )

    same = flame_tree(asynchronous, synthetic_folded(rng, STACK_SHARES, 280))
    assert same.gone == [] and not any(c.beyond_noise for c in tree_changes(same).drawn)


def test_the_graph_says_its_sample_counts_and_threshold() -> None:
    tree = flame_tree(OTHER, BASE)
    figure = diff_flame_figure(tree, "16", "17", "title", "name", tree_changes(tree))
    [note] = figure["layout"]["annotations"]  # type: ignore[index]
    assert note["text"].startswith("100 samples against the baseline's 100.")
    # 5 drawn frames and the baseline's sort, which the graph cannot draw.
    assert "q ≤ 0.05 over 6 frames); grey: within noise" in note["text"]


def test_stacks_start_at_postgres_innermost_main_so_versions_compare() -> None:
    pg16 = "_start;main;PostmasterMain;ServerLoop.isra.0;PostgresMain;exec_simple_query 8\n"
    pg17 = (
        "_start;main;PostmasterMain;ServerLoop.isra.0;postmaster_child_launch;BackendMain;"
        "PostgresMain;exec_simple_query 8\n"
        "_start;main;PostmasterMain;ServerLoop.isra.0;epoll_wait 2\n"
        "[unknown];PortalRun 1\n"
    )
    tree = flame_tree(pg17, pg16)

    by_id = {node.id: node for node in tree.nodes}
    assert by_id["PostgresMain;exec_simple_query"].base_share == 1.0
    assert "PostmasterMain;ServerLoop.isra.0;epoll_wait" in by_id
    assert "[unknown];PortalRun" in by_id
