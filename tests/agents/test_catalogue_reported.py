"""A job that reads a version's pg_settings catalogue from its server (none cached) sends it
in its result, so the lab learns it from the first run (runs/services/catalogues.py); later
jobs, reading it from the cache, send none. Real PostgreSQL 15 from the system's packages."""

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.config import AgentConfig
from agents.contract.settings.catalogue import Catalogue
from agents.postgres.installs.inventory import Install
from tests.agents.jobs import run, small_spec


@pytest.fixture
def fresh_config(storage_root: Path, pg15_system_install: Install) -> Iterator[AgentConfig]:
    """An agent with storage under `storage_root` and a state directory of its own, so
    its catalogue cache starts empty."""
    state = Path(tempfile.mkdtemp(prefix="bl-state-", dir="/var/tmp"))
    state.chmod(0o755)
    yield AgentConfig(
        storage={"data": storage_root / "data", "wal": storage_root / "wal"}, state_dir=state
    )
    shutil.rmtree(state, ignore_errors=True)


def test_the_first_job_of_a_version_reports_its_catalogue_later_ones_do_not(
    fresh_config: AgentConfig, pg15_system_install: Install
) -> None:
    job = small_spec(
        run_id="catalogue",
        postgres={"version": "15", "source": "system"},
        workload={"latency_log": "none"},
        sweep={"clients": [1], "duration_s": 1},
    )

    first, _ = run(job, fresh_config)
    second, _ = run(job, fresh_config)

    assert first["status"] == "succeeded", first["error"]
    reported = Catalogue.from_dict(first["settings"]["catalogue"])
    assert reported.version == pg15_system_install.version
    assert "shared_buffers" in reported.settings
    assert second["status"] == "succeeded", second["error"]
    assert "catalogue" not in second["settings"]
