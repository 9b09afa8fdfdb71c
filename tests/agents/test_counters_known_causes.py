"""Known causes in the WAL, measured: the real agent runs real pgbench against real
servers that differ in one setting, the lab stores the points and compares the cells, and
the counter the setting is known to move is among each compared cell's top three movers.

- full_page_writes on against off: after a CHECKPOINT before each point, the first
  change to each page writes a full-page image, which off never does;
- wal_compression on against off: those images are compressed, so the WAL bytes per
  transaction fall (by about three quarters here);
- synchronous_commit off against on: a commit no longer waits for its WAL to be
  flushed, so the WAL syncs per transaction fall to the WAL writer's few.

tpcb-like at scale 1; each cell is three points of 1,500 transactions per client
(tests/agents/counter_cells.py). A fixed count, not a duration: after the checkpoint the
first change to each page writes its image, so full-page images (and WAL bytes) per
transaction fall as a window holds more transactions, and with -T they followed the
machine's speed (a 4x spread of tps under load hid wal_compression's -75 %).
"""

import pytest

from agents.config import AgentConfig
from tests.agents.counter_cells import measured_cell, top_movers_of

pytestmark = pytest.mark.django_db

TRANSACTIONS = 1500


def test_full_page_writes_wal_compression_and_synchronous_commit_move_their_counters(
    config: AgentConfig,
) -> None:
    default = measured_cell(config, {}, transactions=TRANSACTIONS)
    experiment = default.experiment
    without_fpw = measured_cell(config, {"full_page_writes": "off"}, experiment, TRANSACTIONS)
    compressed = measured_cell(config, {"wal_compression": "on"}, experiment, TRANSACTIONS)
    asynchronous = measured_cell(config, {"synchronous_commit": "off"}, experiment, TRANSACTIONS)

    assert "wal.fpi" in top_movers_of(without_fpw, default)
    assert "wal.bytes" in top_movers_of(default, compressed)
    moved = top_movers_of(default, asynchronous)
    assert {"wal.syncs", "wal.sync_time_ms", "wal.write_time_ms"} & set(moved), moved
