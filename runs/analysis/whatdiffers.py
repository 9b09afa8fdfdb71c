""" "What differs" as a page shows it: long values (setup SQL, scripts) as a short
digest that expands, storage as device and filesystem, and a warning where "WAL
apart" shares the data's device (it then measures nothing apart).
"""

import hashlib
from dataclasses import dataclass

from runs.analysis.compare import differences
from runs.models import Run

# Longer than this, or more than one line, and a value is shown as a digest first.
SHORT_CHARS = 60


@dataclass(frozen=True)
class ShownValue:
    """One run's value of a differing key: the full text and, when long, its digest."""

    text: str

    @property
    def is_long(self) -> bool:
        return len(self.text) > SHORT_CHARS or "\n" in self.text.strip()

    @property
    def digest(self) -> str:
        """`CREATE TABLE kv (id bigint PRIMARY… · 12 lines · sha256 3f2a9c01`."""
        first = self.text.strip().splitlines()[0] if self.text.strip() else ""
        lines = len(self.text.strip().splitlines())
        sha = hashlib.sha256(self.text.encode()).hexdigest()[:8]
        return f"{first[:32]}… · {lines} line{'s' if lines != 1 else ''} · sha256 {sha}"


def shown_differences(runs: list[Run]) -> list[tuple[str, list[ShownValue | None]]]:
    """`differences` with each value ready to show (None where a run has no value)."""
    return [
        (key, [None if value is None else ShownValue(value) for value in values])
        for key, values in differences(runs)
    ]


def wal_apart_on_data_device(runs: list[Run], labels: dict[int, str]) -> list[str]:
    """A sentence per device where cells put the WAL on a storage target of its own that
    is on the data's device: WAL apart then changes nothing."""
    by_device: dict[str, list[str]] = {}
    for run in runs:
        facts = run.storage_facts or {}
        data = (facts.get("data") or {}).get("device")
        wal = (facts.get("wal") or {}).get("device")
        if run.storage_wal and data and data == wal:
            by_device.setdefault(data, []).append(labels.get(run.pk, f"#{run.pk}"))
    return [
        f"WAL apart is on the data's device ({device}) for {len(cells)} "
        f"cell{'s' if len(cells) > 1 else ''} ({_some(cells)}): it changes nothing there. "
        "Point the wal storage target at another disk on the agent (--storage wal=PATH)."
        for device, cells in by_device.items()
    ]


def _some(labels: list[str], shown: int = 2) -> str:
    more = len(labels) - shown
    return "; ".join(labels[:shown]) + (f"; and {more} more" if more > 0 else "")
