"""Known causes in memory, measured as tests/agents/test_counters_known_causes.py does:

- shared_buffers 128 kB against 128 MB, select-only at scale 2 (about 30 MB of tables
  and indexes): the small pool cannot hold the pages a lookup needs, so every
  transaction reads blocks the large pool keeps (and evicts buffers to do it);
- work_mem 64 kB against 64 MB, a script sorting 100,000 rows: the small budget spills
  the sort to temporary files, the large one sorts in memory.

The counters the cause moves must be among the top three, above side effects such as a
few buffers written (the movers rank by the least change each interval allows).
"""

import pytest

from agents.config import AgentConfig
from tests.agents.counter_cells import measured_cell, top_movers_of

pytestmark = pytest.mark.django_db

SELECT_ONLY = {"scripts": [{"builtin": "select-only", "weight": 1}]}
SORT = "SELECT aid FROM pgbench_accounts ORDER BY abalance, filler OFFSET 50000 LIMIT 1;\n"
SORTING = {"scripts": [{"name": "sort", "text": SORT, "weight": 1}]}


def test_a_small_shared_buffers_pool_shows_as_blocks_read(config: AgentConfig) -> None:
    large = measured_cell(
        config, {"shared_buffers": "128MB"}, workload=SELECT_ONLY, dataset={"scale": 2}
    )
    small = measured_cell(
        config,
        {"shared_buffers": "128kB"},
        large.experiment,
        workload=SELECT_ONLY,
        dataset={"scale": 2},
    )
    assert "db.blks_read" in top_movers_of(large, small)


def test_a_small_work_mem_shows_as_temporary_files(config: AgentConfig) -> None:
    # Temporary files appear from none (the exact Poisson test on their count); their bytes
    # are not events, so with none on one side they have no test of their own.
    large = measured_cell(config, {"work_mem": "64MB"}, workload=SORTING)
    small = measured_cell(config, {"work_mem": "64kB"}, large.experiment, workload=SORTING)
    assert "db.temp_files" in top_movers_of(large, small)
