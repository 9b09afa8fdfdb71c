"""What kind of quantity each counter is, which decides how two cells' values compare.

- Most counters grow with the work done: per transaction is their honest unit.
- A few grow with the clock instead: the background writer wakes every
  bgwriter_delay and writes at most bgwriter_lru_maxpages a round; a timed
  checkpoint comes every checkpoint_timeout and writes what is dirty then. Divided
  by transactions, a fixed five buffers a window becomes "+47 %" whenever tps falls
  by a third: the inverse of the tps ratio, not a cause. These are compared per
  second of the window (`PER_WINDOW`: the catalogue's `per_window`, each with its
  reason).
- Some counters count discrete events (blocks, records, checkpoints): their
  totals are Poisson-like and can be tested exactly even when one side saw none.
  Bytes and times are not events (`CONTINUOUS_UNITS`).
- One is not compared at all (`NOT_COMPARED`): pg_stat_bgwriter.buffers_backend
  before 17 reaches the view only when the checkpointer reports, so a window
  reads earlier windows' writes or none (agents/contract/reports/counter_catalogue.py).
- Some counters are the same quantity read twice, or a part that is most of a
  whole (`SAME_QUANTITY`): a change shows once, under the first of its group that
  moved, and names the others as copies.
"""

from enum import StrEnum

from agents.contract.reports.counter_catalogue import COUNTERS


class Basis(StrEnum):
    """What a counter's values are divided by before comparing; stable values (API)."""

    TRANSACTION = "transaction"
    WINDOW_SECOND = "window_second"


# Counter key -> why it follows the clock rather than the transactions (the catalogue's).
PER_WINDOW: dict[str, str] = {key: c.per_window for key, c in COUNTERS.items() if c.per_window}

# Counter key -> why a window's value says nothing about the window: never tested.
NOT_COMPARED: dict[str, str] = {
    "bgwriter.buffers_backend": "reaches the statistics only when the checkpointer reports "
    "(at its checkpoints): a window reads earlier windows' writes and extends, or none",
}

# Units that are not counts of events: no Poisson test for them.
CONTINUOUS_UNITS = frozenset({"bytes", "ms", "s"})

# Groups of counters that read one quantity, or a part that is most of a whole (first:
# the one named when they move; pg_stat_database's before pg_stat_io's, which servers
# before 16 lack, so one name serves every version; bytes before files, as they say how
# much).
# The tables' heap and index blocks are the parts of the database's blocks; the HOT and
# new-page updates of pgbench_accounts are the part of the sums over all tables that
# a fillfactor moves (the tellers' and branches' HOT updates only dilute it), named first.
SAME_QUANTITY: tuple[tuple[str, ...], ...] = (
    ("tables.accounts_newpage_updates", "tables.newpage_updates"),
    ("tables.accounts_hot_updates", "tables.hot_updates"),
    ("db.blks_read", "io.reads", "tables.heap_blks_read", "tables.idx_blks_read"),
    ("db.blks_hit", "io.hits", "tables.heap_blks_hit", "tables.idx_blks_hit"),
    (
        "io.writes",
        "checkpoints.buffers_written",
        "io.client_writes",
        "bgwriter.buffers_clean",
    ),
    ("io.evictions", "bgwriter.buffers_alloc"),
    ("db.temp_bytes", "db.temp_files"),
)


def basis(key: str) -> Basis:
    """What `key`'s values are divided by when two cells are compared."""
    return Basis.WINDOW_SECOND if key in PER_WINDOW else Basis.TRANSACTION


def compared(key: str) -> bool:
    """Whether a change of `key` between two windows can be tested at all."""
    return key not in NOT_COMPARED


def counts_events(key: str) -> bool:
    """Whether `key` counts discrete events (so its totals can be tested as Poisson counts)."""
    return COUNTERS[key].unit not in CONTINUOUS_UNITS


def same_quantity(key: str) -> tuple[str, ...]:
    """The group `key` belongs to (itself alone when it has no copies)."""
    return next((group for group in SAME_QUANTITY if key in group), (key,))
