"""One point counter's entry in the catalogue (agents/contract/reports/counter_catalogue.py):
where it is read on each PostgreSQL version, what it means and its trap."""

from typing import NamedTuple

# The first major with each view the counters come from.
EVERY_VERSION = 0
STAT_WAL = 14
STAT_IO = 16
CHECKPOINTER = 17
WAL_IN_STAT_IO = 18
WAIT_EVENTS = 9  # 9.6: pg_stat_activity.wait_event_type; majors before 10 read as 9


class Counter(NamedTuple):
    """One counter key: its label and unit, (first major, view.column) for each version
    range, what it means, the last major that has it (None: still there), the setting
    that must be on for it to be counted (absent without it), its trap ("" when none) and,
    for a counter that follows the clock rather than the transactions, why (`per_window`:
    the lab compares it per second of the window)."""

    label: str
    unit: str
    sources: tuple[tuple[int, str], ...]
    meaning: str
    last_major: int | None = None
    needs: str = ""
    trap: str = ""
    per_window: str = ""

    @property
    def first_major(self) -> int:
        return self.sources[0][0]

    @property
    def source(self) -> str:
        """Where it is read, every version in one line ("pg_stat_wal.wal_write; from 18:
        pg_stat_io writes, object wal")."""
        first, *later = self.sources
        said = first[1] + (f" (up to {self.last_major})" if self.last_major else "")
        for major, source in later:
            said += f"; from {major}: {source}"
        return said + (f"; with {self.needs} on" if self.needs else "")

    @property
    def explained(self) -> str:
        """What it counts, where it is read and its trap, in one line for a page's tooltip."""
        said = f"{self.meaning}. {self.source}"
        if self.per_window:
            said += f". Compared per second of the window, not per transaction: {self.per_window}"
        return said + (f". Trap: {self.trap}" if self.trap else "")

    def source_on(self, major: int) -> str | None:
        """Its view and column on `major`; None where that version does not have it."""
        if major < self.first_major or (self.last_major and major > self.last_major):
            return None
        return [source for first, source in self.sources if first <= major][-1]
