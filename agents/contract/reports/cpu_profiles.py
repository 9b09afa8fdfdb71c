"""The CPU-profile pass's documents: the server's stacks during one pgbench run, folded.

A job whose sweep asks for a CPU profile runs one more pass over its client counts
after the measured points, with `perf` recording the server's processes
(agents/observe/cpu_profile.py). Its points are not measured results: they travel
as `cpu_profile` events and the result document's `cpu_profiles`, never as `point`s,
so verdicts, statistics, movers and the measured exports never see them.

`folded` is the usual folded-stacks text: one line per distinct stack, frames
from the outermost to the innermost joined by `;`, a space, then how many
samples had that stack. It is bounded: stacks under `MIN_STACK_SHARE` of the
samples are dropped and at most `MAX_STACK_LINES` lines are kept (`samples`
counts all of them, `kept_samples` those left in `folded`).
"""

from typing import TypedDict

# Stacks under this share of a CPU profile's samples are dropped from its folded text.
MIN_STACK_SHARE = 0.0005
# The most distinct stacks a CPU profile keeps (the heaviest).
MAX_STACK_LINES = 600
# The most frames of one stack kept (the outermost: the innermost are cut).
MAX_STACK_DEPTH = 80


class CpuProfileResult(TypedDict):
    """One point of the CPU-profile pass.

    `tps` is pgbench's throughput under `perf`, shown as context and never as a
    measured result. `error` says why there is no CPU profile (perf missing, not
    allowed, failed); then `clients` may be None and `folded` is empty.
    """

    index: int
    clients: int | None
    tps: float | None
    seconds: float
    frequency_hz: int
    event: str
    call_graph: str
    samples: int
    kept_samples: int
    folded: str
    argv: list[str]
    error: str | None


def parse_folded(text: str) -> dict[str, int]:
    """The stacks of a folded text and their sample counts; a malformed line raises
    ValueError naming it."""
    stacks: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            raise ValueError(f"folded stacks line {number} is not 'frames count': {line[:80]!r}")
        stacks[stack] = stacks.get(stack, 0) + int(count)
    return stacks
