"""The checks that hold for every point of a run: its settings, its window's length, and
its host canary (runs/services/hosts/noise.py).

Read from the settings the server reported (the spec's when it reported none); the
checks' codes, titles and reasons are validity's (runs/analysis/validity.py).
"""

import re
from collections.abc import Sequence

from runs.analysis.validity import ValidityWarning, joined
from runs.models import Result, Run, imported_file

# setting -> (value, check): off values that can corrupt, and one that only loses commits.
UNSAFE = {
    "fsync": ("off", "unsafe_settings"),
    "full_page_writes": ("off", "unsafe_settings"),
    "synchronous_commit": ("off", "commits_not_durable"),
}
DEFAULT_CHECKPOINT_TIMEOUT_S = 300.0
TIME_UNITS_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def run_settings(run: Run) -> dict[str, tuple[str, str | None]]:
    """name -> (setting, unit): read back from the server, else as requested in the spec,
    else (an imported run) as stated with the import."""
    if run.effective_settings:
        return {
            row["name"]: (str(row.get("setting")), row.get("unit"))
            for row in run.effective_settings
            if isinstance(row, dict) and row.get("name")
        }
    requested = run.spec.get("settings") or stated_settings(run)
    return {name: (str(value), None) for name, value in requested.items()}


def stated_settings(run: Run) -> dict[str, object]:
    """The settings stated for an imported run (its config profile's); none for a measured
    run, whose spec says what it asked for."""
    return dict(run.config_profile.settings) if imported_file(run) is not None else {}


def duration_seconds(setting: str, unit: str | None) -> float | None:
    """`300` with unit `s`, or `5min` as written in a config file, in seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", setting)
    if not match:
        return None
    scale = TIME_UNITS_S.get(match[2] or unit or "s")
    return float(match[1]) * scale if scale else None


def checkpoint_timeout_s(run: Run) -> float:
    setting = run_settings(run).get("checkpoint_timeout")
    seconds = duration_seconds(*setting) if setting else None
    return seconds if seconds is not None else DEFAULT_CHECKPOINT_TIMEOUT_S


def window_seconds(run: Run, results: Sequence[Result]) -> float | None:
    """The measured window of the run's points (-T), None for -t runs without durations."""
    durations = [r.duration_s for r in results if r.duration_s]
    if durations:
        return min(durations)
    return (run.spec.get("sweep") or {}).get("duration_s")


def run_warnings(run: Run, results: Sequence[Result]) -> list[ValidityWarning]:
    """The checks that hold for every point of a run: its settings, window length and canary."""
    settings = run_settings(run)
    found = joined(
        [
            ValidityWarning(code, f"{name}={value}")
            for name, (value, code) in UNSAFE.items()
            if settings.get(name, ("",))[0] == value
        ]
    )
    if run.host_noise.get("outside_usual"):
        found.append(ValidityWarning("host_outside_usual_spread", run.host_noise["detail"]))
    window, timeout = window_seconds(run, results), checkpoint_timeout_s(run)
    # An imported run's checkpoint_timeout is unknown unless stated: no default assumed.
    known = imported_file(run) is None or "checkpoint_timeout" in settings
    if known and window and window < timeout:
        detail = f"{window:g} s window, checkpoint_timeout {timeout:g} s"
        found.append(ValidityWarning("window_shorter_than_checkpoint_timeout", detail))
    return found
