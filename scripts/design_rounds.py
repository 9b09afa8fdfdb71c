"""The fewest rounds, and the machine time, each design needs for the calibration's rates.

On the simulated noisy host of tests/runs/inference/test_paired_calibration.py (the
unpaired and the paired designs) and test_duet_calibration.py (the duet), with the
verdicts of runs/analysis/verdicts.py: for each design the fewest rounds at which A/A
cells are falsely faster or slower at most 5 % of the time (plus the tests' allowance),
"same within ±5 %" at least 80 % of the decided A/A cells, and a 5 % shift either way
gets its direction at least 90 % of the time. Machine time in windows: two a round
unpaired and paired, one a duet round. Printed as JSON, one line per design. Usage:
.venv/bin/python scripts/design_rounds.py [largest rounds tried]
"""

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import django
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchlab.settings")
django.setup()

from runs.analysis.sequential import look_rounds, simulate  # noqa: E402
from runs.analysis.verdicts import Verdict  # noqa: E402
from tests.runs.inference.test_duet_calibration import (  # noqa: E402
    UNEVEN_CHANCE,
    WINDOWS_PER_ROUND,
    duet_rounds,
    duet_verdicts,
)
from tests.runs.inference.test_paired_calibration import (  # noqa: E402
    ADAPTIVE_BUDGET,
    ALLOWANCE,
    CELLS,
    DIRECTIONS,
    MARGIN_PCT,
    MIN_EFFECT_PCT,
    simulated_rounds,
    simulated_verdicts,
)

Draw = Callable[[int, int, float], list[Verdict]]
DRAWS: dict[str, Draw] = {
    "unpaired": lambda seed, rounds, shift: simulated_verdicts(seed, rounds, shift, False),
    "paired": lambda seed, rounds, shift: simulated_verdicts(seed, rounds, shift, True),
    "duet": duet_verdicts,
    "duet, uneven rounds": lambda seed, rounds, shift: duet_verdicts(
        seed, rounds, shift, UNEVEN_CHANCE
    ),
}


def rates(draw: Draw, rounds: int) -> dict[str, float]:
    same = draw(1000 + rounds, rounds, 0.0)
    decided = [v for v in same if v is not Verdict.UNDECIDED]
    faster = draw(2000 + rounds, rounds, 0.05)
    slower = draw(3000 + rounds, rounds, -0.05)
    return {
        "false_direction": sum(v in DIRECTIONS for v in same) / len(same),
        "same_of_decided": sum(v is Verdict.SAME for v in decided) / max(1, len(decided)),
        "faster_at_plus_5": sum(v is Verdict.FASTER for v in faster) / len(faster),
        "slower_at_minus_5": sum(v is Verdict.SLOWER for v in slower) / len(slower),
    }


def meets(found: dict[str, float]) -> bool:
    return (
        found["false_direction"] <= 0.05 + ALLOWANCE
        and found["same_of_decided"] >= 0.80
        and min(found["faster_at_plus_5"], found["slower_at_minus_5"]) >= 0.90
    )


def fewest_rounds(design: str, largest: int) -> dict[str, object]:
    """The fewest rounds meeting the rates, found by a coarse then a fine scan."""
    draw = DRAWS[design]
    step = 8
    rounds = 3
    while rounds <= largest and not meets(rates(draw, rounds)):
        rounds += step
    if rounds > largest:
        return {"design": design, "rounds": None, "largest_tried": largest}
    # The coarse scan's rounds meet the rates (the draws are seeded): the fine scan ends there.
    candidate = max(3, rounds - step + 1)
    while not meets(found := rates(draw, candidate)):
        candidate += 1
    windows = candidate * WINDOWS_PER_ROUND[design.split(",")[0]]
    return {"design": design, "rounds": candidate, "windows": windows, **found}


def adaptive(design: str) -> dict[str, object]:
    """The adaptive looks (3 rounds first, ADAPTIVE_BUDGET at most) on paired or duet
    rounds: each case's rate and mean rounds."""
    rng = np.random.default_rng(7)
    found: dict[str, object] = {"design": f"adaptive, {design}"}
    for shift, name in ((0.0, "a_a"), (0.05, "plus_5"), (-0.05, "minus_5")):
        if design == "duet":
            values, baseline = duet_rounds(rng, ADAPTIVE_BUDGET, shift, CELLS)
        else:
            drawn = [simulated_rounds(rng, ADAPTIVE_BUDGET, shift) for _ in range(CELLS)]
            values, baseline = (np.stack([pair[side] for pair in drawn]) for side in (0, 1))
        looks = look_rounds(3, ADAPTIVE_BUDGET)
        done = simulate(values, baseline, looks, MIN_EFFECT_PCT, MARGIN_PCT, in_pairs=True)
        verdicts = done.verdicts
        right = {0.0: Verdict.SAME, 0.05: Verdict.FASTER, -0.05: Verdict.SLOWER}[shift]
        found[f"{name}_right"] = sum(v is right for v in verdicts) / len(verdicts)
        found[f"{name}_false_direction"] = sum(v in DIRECTIONS - {right} for v in verdicts) / len(
            verdicts
        )
        found[f"{name}_mean_rounds"] = float(done.rounds.mean())
        found[f"{name}_mean_windows"] = float(done.rounds.mean()) * WINDOWS_PER_ROUND[design]
    return found


def main() -> None:
    largest = int(sys.argv[1]) if len(sys.argv) > 1 else 160
    for design in ("paired", "duet"):
        sys.stdout.write(json.dumps(adaptive(design)) + "\n")
        sys.stdout.flush()
    for design in DRAWS:
        sys.stdout.write(json.dumps(fewest_rounds(design, largest)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
