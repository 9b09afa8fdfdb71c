"""Measure the spread of duet rounds against back-to-back rounds on this machine.

An A/A: both sides are the same job (PostgreSQL 16.15 prebuilt, scale 1, select-only
`-M prepared`, 1 client, one point of `seconds`). Each round runs it twice:

- as a duet (agents/duet.py `run_duet`, each side on its own half of the CPUs, their
  windows started together, the halves swapped every other round);
- back to back (agents/job.py `run_job`, one after the other, the order swapped every
  other round), the design of the lab's ordinary paired rounds.

Printed as JSON, per design: each round's two tps, the sd of the rounds' log ratios
(what a paired verdict sees), the unpaired sd (of the difference of two runs from
different rounds: var(log a) + var(log b)), the correlation of the two sides' log tps
within a round, and for the duet the CPU halves' asymmetry (half the difference of
the mean log ratio between swapped and unswapped rounds) and the ratios' sd once it
is removed. docs/benchmarks.md has the figures; tests/runs/inference/
test_duet_calibration.py's simulation uses them. Usage: .venv/bin/python
scripts/measure_duet_spread.py [rounds] [seconds]
"""

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.config import AgentConfig  # noqa: E402
from agents.duet import DuetSide, run_duet  # noqa: E402
from agents.events import EventEmitter  # noqa: E402
from agents.job import run_job  # noqa: E402


def side_spec(run_id: str, seconds: int) -> dict[str, Any]:
    return {
        "version": 1,
        "run_id": run_id,
        "postgres": {"version": "16", "source": "prebuilt"},
        "storage": {"data": "data"},
        "dataset": {"scale": 1},
        "workload": {
            "scripts": [{"builtin": "select-only", "weight": 1}],
            "query_mode": "prepared",
        },
        "sweep": {"clients": [1], "duration_s": seconds, "repeats": 1},
    }


def tps_of(result: dict[str, Any]) -> float:
    if result["status"] != "succeeded" or not result["points"]:
        raise RuntimeError(f"run {result.get('run_id')} ended {result['status']}: {result}")
    return float(result["points"][0]["tps"])


def duet_round(config: AgentConfig, number: int, seconds: int) -> tuple[float, float]:
    """(side 0's tps, side 1's tps) of one duet; side 0 on the second half when odd."""
    specs = [side_spec(f"duet-spread-{number}-{side}", seconds) for side in (0, 1)]
    sides = [
        DuetSide(spec, EventEmitter([lambda event: None], run_id=spec["run_id"]), lambda: False)
        for spec in specs
    ]
    document = {
        "duet": 1,
        "key": f"duet-spread-{number}",
        "run_id": specs[0]["run_id"],
        "swapped": number % 2 == 1,
        "sides": specs,
    }
    first, second = run_duet(document, config, sides)
    return tps_of(dict(first)), tps_of(dict(second))


def back_to_back_round(config: AgentConfig, number: int, seconds: int) -> tuple[float, float]:
    """(side 0's tps, side 1's tps) run one after the other; side 1 first when odd."""
    order = (1, 0) if number % 2 else (0, 1)
    found: dict[int, float] = {}
    for side in order:
        spec = side_spec(f"serial-spread-{number}-{side}", seconds)
        emitter = EventEmitter([lambda event: None], run_id=spec["run_id"])
        found[side] = tps_of(dict(run_job(spec, config, emitter, lambda: False)))
    return found[0], found[1]


def spread(rounds: list[tuple[float, float]], swapped_halves: bool) -> dict[str, Any]:
    logs = np.log(np.array(rounds))
    ratios = logs[:, 0] - logs[:, 1]
    found: dict[str, Any] = {
        "tps": rounds,
        "ratio_sd": float(np.std(ratios, ddof=1)),
        "unpaired_sd": float(np.sqrt(np.var(logs[:, 0], ddof=1) + np.var(logs[:, 1], ddof=1))),
        "correlation": float(np.corrcoef(logs[:, 0], logs[:, 1])[0, 1]),
        "mean_log_ratio": float(np.mean(ratios)),
    }
    if swapped_halves:
        sign = np.where(np.arange(len(ratios)) % 2 == 1, -1.0, 1.0)
        # Side 0 on the first half in even rounds: its ratio is d + c there, d - c in odd.
        halves = float(np.mean(ratios * sign))
        found["cpu_halves_log"] = halves
        found["ratio_sd_without_halves"] = float(np.std(ratios - sign * halves, ddof=1))
    return found


def main() -> None:
    rounds, seconds = (int(a) for a in (sys.argv[1:] + ["8", "10"][len(sys.argv) - 1 :]))
    root = Path(tempfile.mkdtemp(prefix="benchlab-duet-spread-", dir="/var/tmp"))
    root.chmod(0o755)
    config = AgentConfig(storage={"data": root / "data"})
    try:
        duets, serial = [], []
        for number in range(rounds):
            duets.append(duet_round(config, number, seconds))
            serial.append(back_to_back_round(config, number, seconds))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    found = {"duet": spread(duets, True), "back_to_back": spread(serial, False)}
    sys.stdout.write(json.dumps({"rounds": rounds, "seconds": seconds, **found}) + "\n")


if __name__ == "__main__":
    main()
