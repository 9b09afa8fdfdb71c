"""The seed experiments (the benchmark write-ups the lab was conceived from, each a kind of
experiment people ran by hand with shell loops and spreadsheets) as presets to start from.

`seeds` declares them; `loading` creates their catalogue entries once and gives
the schedule form's starting values. What others use is importable from here.
"""

from runs.presets.loading import find, form_initial, load_presets
from runs.presets.seeds import INSERT_TABLES, PRESETS, Preset

__all__ = [
    "INSERT_TABLES",
    "PRESETS",
    "Preset",
    "find",
    "form_initial",
    "load_presets",
]
