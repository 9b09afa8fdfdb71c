"""The patch battery: the workloads a reviewer expects of "does my patch change
performance?" (`benchlab try`, runs/tries.py), versioned so a report says which it ran.

Select-only and TPC-B-like; at a scale whose data fits in the default shared_buffers
(128MB: scale 5 is about 75 MB) and one that does not (scale 50, about 750 MB);
select-only both with the prepared protocol (where parsing and planning are left out) and
the simple one (where they are not). Each runs at 1 client, a mid count and the host's
CPU threads (`battery_clients`).
"""

from agents.contract.vocabulary import BuiltinScript, QueryMode
from runs.presets.definitions import WorkloadPreset

BATTERY_VERSION = 1
FITS_SCALE = 5
DOES_NOT_FIT_SCALE = 50


def _workload(script: BuiltinScript, scale: int, mode: QueryMode, fits: bool) -> WorkloadPreset:
    where = "fits shared_buffers" if fits else "does not fit shared_buffers"
    return {
        "name": f"battery v{BATTERY_VERSION}: {script}, scale {scale} ({where}), {mode}",
        "scale": scale,
        "scripts": [{"builtin": script, "weight": 1}],
        "query_mode": mode,
        "description": f"Patch battery v{BATTERY_VERSION} (runs/presets/battery.py).",
    }


BATTERY: list[WorkloadPreset] = [
    _workload("select-only", FITS_SCALE, "prepared", fits=True),
    _workload("select-only", FITS_SCALE, "simple", fits=True),
    _workload("select-only", DOES_NOT_FIT_SCALE, "prepared", fits=False),
    _workload("tpcb-like", FITS_SCALE, "simple", fits=True),
    _workload("tpcb-like", DOES_NOT_FIT_SCALE, "simple", fits=False),
]


def battery_clients(cpu_threads: int | None) -> list[int]:
    """1 client, a mid count and the host's CPU threads (each once, ascending)."""
    threads = max(1, cpu_threads or 1)
    return sorted({1, max(1, threads // 2), threads})
