"""Presets: ready-made experiments to start from (a smoke test and presets 1 to 5), after
the benchmark write-ups the lab was conceived from, each a kind of experiment people ran by
hand with shell loops and spreadsheets.

`definitions` declares them; `loading` creates their catalogue entries once and gives
the schedule form's starting values. What others use is importable from here.
"""

from runs.presets.definitions import INSERT_TABLES, PRESETS, Preset
from runs.presets.loading import find, form_initial, load_presets

__all__ = [
    "INSERT_TABLES",
    "PRESETS",
    "Preset",
    "find",
    "form_initial",
    "load_presets",
]
