"""The order an experiment's runs execute in (docs/decisions.md).

Two modes, named for what they do:

- rounds: each repeat of each cell is its own cluster lifecycle (one run);
  round 1 runs every cell once, then round 2, and so on; inside each round
  the cells go in a random order drawn from the experiment's seed. Anything
  that drifts over time (page cache, heat, neighbours) is then spread over
  every cell instead of reading as a difference between them.
- blocks: one run per cell holds all its repeats in one cluster; the cells
  run one after another in matrix order. Fast, and what the lab did first.

Pure functions: the same seed always gives the same order.
"""

import hashlib
import random
import secrets
from dataclasses import dataclass

ROUNDS = "rounds"
BLOCKS = "blocks"
# Seeds are shown to people and typed back in: keep them short.
SEED_LIMIT = 2**31


@dataclass(frozen=True)
class Slot:
    """One run of the plan: its place in the queue, its matrix cell and its round.

    `round` is None in blocks mode, where one run holds every repeat of its cell.
    """

    position: int
    cell: int
    round: int | None


def draw_seed() -> int:
    """A fresh seed for an experiment that was given none."""
    return secrets.randbelow(SEED_LIMIT)


def execution_plan(cells: int, repeats: int, execution: str, seed: int) -> list[Slot]:
    """Every run of an experiment in the order it is queued (per host: the order it runs)."""
    if execution == BLOCKS:
        return [Slot(position=cell, cell=cell, round=None) for cell in range(cells)]
    rng = random.Random(seed)
    order = [
        (round_number, cell)
        for round_number in range(1, repeats + 1)
        for cell in rng.sample(range(cells), cells)
    ]
    return [
        Slot(position, cell, round_number) for position, (round_number, cell) in enumerate(order)
    ]


def derived_seed(seed: int, position: int) -> int:
    """The seed of one run's own random choices (its client order), fixed by the experiment's.

    A hash rather than `seed + position`, so that neighbouring experiment seeds
    do not share most of their runs' seeds.
    """
    digest = hashlib.sha256(f"{seed}:{position}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % SEED_LIMIT
