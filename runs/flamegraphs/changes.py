"""Which frames of a differential flame graph changed beyond noise.

A CPU profile is a sample: a frame holding 20 % of 275 samples could as well have
held 15 % or 25 % (its share's standard error is sqrt(0.2 x 0.8 / 275), 2.4
points, and a difference of two such CPU profiles has 3.4). So each frame's change
of share is tested against that sampling error: a two-proportion z-test of its
samples in each CPU profile (pooled share under no change), the p-values of all the
drawn frames and of the baseline's frames the graph cannot draw (its `gone` paths)
adjusted together with Benjamini-Hochberg. A frame is beyond noise
when its q is at most FDR_Q; the others are drawn grey.
"""

import math
from dataclasses import dataclass

from scipy import special

from runs.flamegraphs.trees import FlameNode, FlameTree
from runs.inference import stats


@dataclass(frozen=True)
class FrameChange:
    """One frame's change of share in percentage points of all samples, its test's p and
    BH-adjusted q, and whether the change is beyond noise."""

    points: float
    p: float
    q: float

    @property
    def beyond_noise(self) -> bool:
        return self.q <= stats.FDR_Q


def two_proportion_p(count: int, total: int, base_count: int, base_total: int) -> float:
    """Two-sided p of a two-proportion z-test (pooled share): `count` of `total` against
    `base_count` of `base_total`."""
    if not total or not base_total:
        return 1.0
    pooled = (count + base_count) / (total + base_total)
    se = math.sqrt(pooled * (1 - pooled) * (1 / total + 1 / base_total))
    if se == 0:
        return 1.0
    z = (count / total - base_count / base_total) / se
    return float(2 * special.ndtr(-abs(z)))


def _p_of(node: FlameNode, tree: FlameTree) -> float:
    return two_proportion_p(node.samples, tree.samples, node.base_count, tree.base_samples)


@dataclass(frozen=True)
class TreeChanges:
    """Every tested frame's change in one Benjamini-Hochberg family: the drawn frames' (in
    `tree.nodes`' order) and the baseline's frames the graph cannot draw (`tree.gone`'s)."""

    drawn: list[FrameChange]
    gone: list[FrameChange]


@dataclass(frozen=True)
class FoundFrame:
    """A frame whose change is beyond noise."""

    node: FlameNode
    change: FrameChange


def tree_changes(tree: FlameTree) -> TreeChanges:
    """Each frame's change; the root's share is 1 in both CPU profiles and is no test, so it
    is never beyond noise and not counted in the family."""
    tested = _tested(tree)
    p_by_path = {node.id: _p_of(node, tree) for node in tested}
    q_by_path = dict(zip(p_by_path, stats.adjust_p_values(list(p_by_path.values())), strict=True))

    def change(node: FlameNode) -> FrameChange:
        points = (node.share - node.base_share) * 100
        if not node.id:
            return FrameChange(points, 1.0, 1.0)
        return FrameChange(points, p_by_path[node.id], q_by_path[node.id])

    return TreeChanges([change(node) for node in tree.nodes], [change(node) for node in tree.gone])


def changed_frames(nodes: list[FlameNode], changes: list[FrameChange]) -> list[FoundFrame]:
    """The frames of `nodes` (each with its change, in order) changed beyond noise, largest
    change first."""
    found = [
        FoundFrame(node, change)
        for node, change in zip(nodes, changes, strict=True)
        if change.beyond_noise
    ]
    return sorted(found, key=lambda frame: -abs(frame.change.points))


def _tested(tree: FlameTree) -> list[FlameNode]:
    return [node for node in tree.nodes if node.id] + tree.gone


def tested_frames(tree: FlameTree) -> int:
    """How many frames' p-values BH adjusts together (every drawn frame but the root, and
    the baseline's frames not drawn)."""
    return len(_tested(tree))
