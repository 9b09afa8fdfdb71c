"""Source builds for tests: real PostgreSQL release tarballs and the definitions built from them.

`scripts/fetch-pg-sources` downloads the tarballs once per machine (Debian's
source packages hold the upstream releases); the agent's cache keeps the
builds, so only the first run on a machine compiles (about 6 minutes each on 2 cores).
Builds use --without-icu/readline/zlib to stay small and need no -dev packages.
"""

import subprocess
from pathlib import Path

import pytest

from agents.config import AgentConfig
from agents.contract.builds import BuildDefinition
from runs.presets import LWLOCK_PARTITIONS_256_PATCH

REPO = Path(__file__).resolve().parent.parent
SMALL_FLAGS = ["--without-icu", "--without-readline", "--without-zlib"]


def sources_dir() -> Path:
    """The directory holding the release tarballs, fetched on first use; skip if unreachable."""
    fetched = subprocess.run(
        [str(REPO / "scripts" / "fetch-pg-sources")], capture_output=True, text=True
    )
    if fetched.returncode != 0:
        pytest.fail(f"could not fetch PostgreSQL sources: {fetched.stderr.strip()[-800:]}")
    return Path(fetched.stdout.strip())


def tarball(directory: Path, major: str) -> Path:
    return next(directory.glob(f"postgresql-{major}_*.orig.tar.bz2"))


def blocks16_definition(directory: Path) -> BuildDefinition:
    """15.18 with 16 kB blocks and WAL blocks and 256 buffer partitions (seed 5's lwlock.h
    part of the patch: the one change the test needs to see applied)."""
    return {
        "source": {"kind": "path", "location": str(tarball(directory, "15")), "ref": None},
        "configure_flags": [*SMALL_FLAGS, "--with-blocksize=16", "--with-wal-blocksize=16"],
        "patches": [
            {"name": "buffer-partitions-256", "diff": LWLOCK_PARTITIONS_256_PATCH, "strip": 1}
        ],
        "cflags": None,
    }


def pg13_definition(directory: Path) -> BuildDefinition:
    """13.16 as released (an older server: no pg_stat_wal, no pgbench --max-tries)."""
    return {
        "source": {"kind": "path", "location": str(tarball(directory, "13")), "ref": None},
        "configure_flags": ["--without-readline", "--without-zlib"],
        "patches": [],
        "cflags": None,
    }


def allowing_builds(config: AgentConfig, directory: Path) -> AgentConfig:
    """`config` with source builds allowed from `directory` only."""
    config.allow_source_builds = True
    config.build_sources = [str(directory)]
    return config
