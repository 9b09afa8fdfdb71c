"""Known causes in the WAL, measured: the real agent runs real pgbench against real
servers that differ in one setting, the lab stores the points and compares the cells, and
the counter the setting is known to move is among each compared cell's top three movers.

- full_page_writes on against off: after a CHECKPOINT before each point, the first
  change to each page writes a full-page image, which off never does;
- wal_compression on against off: those images are compressed, so the WAL bytes per
  transaction fall (by about three quarters here);
- synchronous_commit off against on: a commit no longer waits for its WAL to be
  flushed, so the WAL syncs per transaction fall to the WAL writer's few.

tpcb-like at scale 1; each cell is four points of 1,500 transactions per client
(tests/agents/counter_cells.py). At three a side one CI run under load found nothing beyond
noise: Welch's test on three has few degrees of freedom, so one point off its cell's others
keeps every counter above the Benjamini-Hochberg threshold of some sixty tested.

A fixed count, not a duration: after the checkpoint the first change to each page writes
its image, so full-page images (and WAL bytes) per transaction fall as a window holds more
transactions, and with -T they followed the machine's speed (a 4x spread of tps under load
hid wal_compression's -75 %).
"""

import pytest

from agents.config import AgentConfig
from runs.models import Run
from tests.agents.counter_cells import measured_cell, top_movers_of

pytestmark = pytest.mark.django_db

TRANSACTIONS = 1500
REPEATS = 4


def test_full_page_writes_wal_compression_and_synchronous_commit_move_their_counters(
    config: AgentConfig,
) -> None:
    default = measured_cell(config, {}, transactions=TRANSACTIONS, repeats=REPEATS)
    experiment = default.experiment

    def cell(settings: dict[str, str]) -> Run:
        return measured_cell(config, settings, experiment, TRANSACTIONS, REPEATS)

    without_fpw = cell({"full_page_writes": "off"})
    compressed = cell({"wal_compression": "on"})
    asynchronous = cell({"synchronous_commit": "off"})

    assert "wal.fpi" in top_movers_of(without_fpw, default)
    assert "wal.bytes" in top_movers_of(default, compressed)
    moved = top_movers_of(default, asynchronous)
    assert {"wal.syncs", "wal.sync_time_ms", "wal.write_time_ms"} & set(moved), moved
