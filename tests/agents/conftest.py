"""Shared fixtures for agent tests: real PostgreSQL binaries and throw-away clusters.

- `agent_cache_dir` (session): the agent's own cache directory
  (`AgentConfig().cache_dir`), so the prebuilt binaries are downloaded once per
  machine, not once per test run.
- `os_user` (session): the OS user PostgreSQL runs as (`benchlab` when the tests
  run as root, else the current user).
- `pg16_install` (session): prebuilt PostgreSQL 16.15 (downloaded on first use).
- `pg15_system_install` (session): Debian's PostgreSQL 15; the test is skipped
  where it is not installed.
- `cluster_root` (session): a short directory under /tmp that the OS user can
  traverse (pytest's own tmp_path is private to root, and Unix socket paths
  must stay short); removed at the end of the session.
- `storage_root` (function): a directory under /var/tmp for storage targets
  (`root / "data"`, `root / "wal"`), removed after the test.
- `config` (function): an AgentConfig whose storage targets `data` and `wal` are
  those two directories (for jobs: tests/agents/jobs.py).
- `pg_cluster` (session): a running PostgreSQL 16.15 cluster shared by all agent
  tests. Use its `conninfo()`, `client_env()` or `connect()`. Do not stop or
  kill it; a test that changes its settings restores them before it ends
  (`apply_settings(pg_cluster, {})`).
- `make_cluster` (function): `make_cluster(install=None, wal=False)` returns a
  new, not yet initialised `Cluster` of its own (PostgreSQL 16.15 by default);
  every cluster it made is destroyed after the test. For tests that stop, kill
  or break a server.
"""

import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agents.config import DEFAULT_OS_USER, AgentConfig
from agents.postgres.cluster.lifecycle import Cluster
from agents.postgres.installs.ensure import ensure_install
from agents.postgres.installs.inventory import Install, find_system_installs
from agents.postgres.osuser import OsUser, ensure_os_user

_job_numbers = itertools.count(1)


def unique_job_id() -> str:
    """A job id no other test process uses at the same time."""
    return f"t{os.getpid()}-{next(_job_numbers)}"


@pytest.fixture(scope="session")
def agent_cache_dir() -> Path:
    return AgentConfig().cache_dir


@pytest.fixture(scope="session")
def os_user() -> OsUser:
    return ensure_os_user(DEFAULT_OS_USER)


@pytest.fixture(scope="session")
def pg16_install(agent_cache_dir: Path) -> Install:
    return ensure_install("16.15", "prebuilt", agent_cache_dir)


@pytest.fixture(scope="session")
def pg15_system_install() -> Install:
    for install in find_system_installs():
        if install.major == 15:
            return install
    pytest.skip("no system PostgreSQL 15 on this host")


@pytest.fixture(scope="session")
def cluster_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="bl-test-", dir="/tmp"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def storage_root() -> Iterator[Path]:
    """A directory for storage targets that PostgreSQL's OS user can reach, per test."""
    root = Path(tempfile.mkdtemp(prefix="benchlab-test-", dir="/var/tmp"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def config(storage_root: Path) -> AgentConfig:
    return AgentConfig(storage={"data": storage_root / "data", "wal": storage_root / "wal"})


@pytest.fixture(scope="session")
def pg_cluster(pg16_install: Install, os_user: OsUser, cluster_root: Path) -> Iterator[Cluster]:
    with Cluster(pg16_install, os_user, cluster_root, job_id=unique_job_id()) as cluster:
        cluster.initdb()
        cluster.start()
        yield cluster


@pytest.fixture
def make_cluster(
    pg16_install: Install, os_user: OsUser, cluster_root: Path
) -> Iterator[Callable[..., Cluster]]:
    made: list[Cluster] = []

    def make(install: Install | None = None, wal: bool = False) -> Cluster:
        job_id = unique_job_id()
        wal_parent = cluster_root / f"wal-{job_id}" if wal else None
        cluster = Cluster(
            install or pg16_install, os_user, cluster_root / job_id, wal_parent, job_id
        )
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.destroy()
