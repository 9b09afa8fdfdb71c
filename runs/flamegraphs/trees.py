"""Folded stacks as the trees a flame graph draws, and the difference of two.

Stacks are drawn from their innermost PostgreSQL `...Main` frame up (`rooted`): the
process start below it says nothing and differs between versions. The folded text
stored and exported keeps every frame.

A node is a call path (`main;PostgresMain;exec_simple_query`): its samples are
those of every stack starting with that path (inclusive), its share those
samples over the CPU profile's. Nodes narrower than `MIN_NODE_SHARE` are left out
of the drawing (a few pixels wide at most).

A difference keeps the shape of the compared CPU profile (widths: its shares) and
gives each node the change of its share from the baseline CPU profile, in
percentage points of all samples (Brendan Gregg's differential flame graph,
normalised so that CPU profiles of different lengths compare). Paths the baseline
draws and the compared CPU profile lacks (or holds too narrow to draw) have no width
there: they are the difference's `gone` paths, the outermost of each such branch,
tested and listed beside the graph (`synchronous_commit = off` against on: the
commit's XLogFlush).
"""

from dataclasses import dataclass, field

from agents.contract.reports.cpu_profiles import parse_folded

# The narrowest node drawn: 0.2 % of the samples (2 px of a 1,000 px wide graph).
MIN_NODE_SHARE = 0.002


@dataclass
class FlameNode:
    """One call path: `samples` inclusive, `share` of the CPU profile's samples (0-1)."""

    # The call path ("" for the root), its innermost frame, and its parent's path.
    id: str
    label: str
    parent: str
    samples: int = 0
    share: float = 0.0
    # The baseline's share of the same path, in a difference (0 when it lacks it), and
    # its samples there.
    base_share: float = 0.0
    base_count: int = 0


@dataclass
class FlameTree:
    """A CPU profile's call paths from the root (id "") down, and what they rest on."""

    nodes: list[FlameNode] = field(default_factory=list)
    samples: int = 0
    # A difference: the baseline's samples, and its drawn paths this CPU profile does not
    # draw (the outermost of each such branch; their `samples` and `share` are this CPU
    # profile's, maybe 0).
    base_samples: int = 0
    gone: list[FlameNode] = field(default_factory=list)


def path_samples(stacks: dict[str, int]) -> dict[str, int]:
    """Every call path's inclusive samples (root-first paths, `;`-joined)."""
    paths: dict[str, int] = {}
    for stack, count in stacks.items():
        frames = stack.split(";")
        for depth in range(1, len(frames) + 1):
            path = ";".join(frames[:depth])
            paths[path] = paths.get(path, 0) + count
    return paths


def rooted(stacks: dict[str, int]) -> dict[str, int]:
    """Each stack from its innermost PostgreSQL `...Main` frame up (PostgresMain for a
    backend, CheckpointerMain, WalWriterMain...; PostmasterMain for the postmaster itself).

    What lies below differs between versions (16 forks a backend from ServerLoop, 17 from
    postmaster_child_launch and BackendMain), and a difference by call path would show
    every backend frame as new. A stack with no such frame (an unwinding cut short) stays.
    """
    trimmed: dict[str, int] = {}
    for stack, count in stacks.items():
        frames = stack.split(";")
        mains = [
            i for i, frame in enumerate(frames) if frame.endswith("Main") and frame[0].isupper()
        ]
        key = ";".join(frames[mains[-1] :]) if mains else stack
        trimmed[key] = trimmed.get(key, 0) + count
    return trimmed


def flame_tree(folded: str, base_folded: str | None = None) -> FlameTree:
    """The tree of `folded` (its stacks `rooted`); with `base_folded`, each node also holds
    the baseline's share."""
    stacks = rooted(parse_folded(folded))
    base_stacks = rooted(parse_folded(base_folded or ""))
    total, base_total = sum(stacks.values()), sum(base_stacks.values())
    tree = FlameTree(samples=total, base_samples=base_total)
    if not total:
        return tree
    base = path_samples(base_stacks)
    tree.nodes.append(FlameNode("", "all", "", total, 1.0, 1.0 if base_total else 0.0, base_total))
    for path, count in path_samples(stacks).items():
        if count / total < MIN_NODE_SHARE:
            continue
        parent, _, label = path.rpartition(";")
        base_count = base.get(path, 0)
        base_share = base_count / base_total if base_total else 0.0
        tree.nodes.append(
            FlameNode(path, label, parent, count, count / total, base_share, base_count)
        )
    tree.gone = _gone(tree, path_samples(stacks), base)
    return tree


def _gone(tree: FlameTree, paths: dict[str, int], base: dict[str, int]) -> list[FlameNode]:
    """The baseline's paths wide enough to draw that `tree` does not draw, whose parent it
    draws (below them, every path is gone too)."""
    drawn = {node.id for node in tree.nodes}
    gone = []
    for path, base_count in base.items():
        parent, _, label = path.rpartition(";")
        if path in drawn or parent not in drawn or base_count / tree.base_samples < MIN_NODE_SHARE:
            continue
        count = paths.get(path, 0)
        gone.append(
            FlameNode(
                path, label, parent, count, count / tree.samples,
                base_count / tree.base_samples, base_count,
            )
        )  # fmt: skip
    return gone
