"""Source builds for tests: real PostgreSQL release tarballs and the definitions built from them.

`scripts/fetch-pg-sources` downloads the tarballs once per machine (Debian's
source packages hold the upstream releases); the agent's cache keeps the
builds, so only the first run on a machine compiles (about 6 minutes each on 2 cores).
Builds use --without-icu/readline/zlib to stay small and need no -dev packages, and
CFLAGS -O0: no test times these servers, and 15.18 compiles in 1 min 44 s instead of
3 min 29 s on a quiet 2-core machine.
"""

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from agents.config import AgentConfig
from agents.contract.builds.definition import BuildDefinition
from runs.presets.definitions import LWLOCK_PARTITIONS_256_PATCH

REPO = Path(__file__).resolve().parent.parent
SMALL_FLAGS = ["--without-icu", "--without-readline", "--without-zlib"]
UNOPTIMISED = "-O0"


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
    """15.18 with 16 kB blocks and WAL blocks and 256 buffer partitions (preset 5's lwlock.h
    part of the patch: the one change the test needs to see applied)."""
    return {
        "source": {"kind": "path", "location": str(tarball(directory, "15")), "ref": None},
        "configure_flags": [*SMALL_FLAGS, "--with-blocksize=16", "--with-wal-blocksize=16"],
        "patches": [
            {"name": "buffer-partitions-256", "diff": LWLOCK_PARTITIONS_256_PATCH, "strip": 1}
        ],
        "cflags": UNOPTIMISED,
    }


def pg13_definition(directory: Path) -> BuildDefinition:
    """13.16 as released (an older server: no pg_stat_wal, no pgbench --max-tries)."""
    return {
        "source": {"kind": "path", "location": str(tarball(directory, "13")), "ref": None},
        "configure_flags": ["--without-readline", "--without-zlib"],
        "patches": [],
        "cflags": UNOPTIMISED,
    }


def allowing_builds(config: AgentConfig, directory: Path) -> AgentConfig:
    """`config` with source builds allowed from `directory` only."""
    config.allow_source_builds = True
    config.build_sources = [str(directory)]
    return config


def allowing_patches(config: AgentConfig) -> AgentConfig:
    """`config` with patches from the lab allowed (preset 5's build has one)."""
    config.allow_user_patches = True
    return config


# A release-shaped source tree that builds in a second: `configure` records its arguments
# and CFLAGS, `make` compiles one C file with those CFLAGS, `make install` writes scripts
# named like PostgreSQL's programs that print a version, the patched constant and CFLAGS.
FAKE_CONFIGURE = """#!/bin/sh
for arg in "$@"; do
  case $arg in --prefix=*) prefix=${arg#--prefix=} ;; esac
done
echo "$@" > configured-with
printf 'CFLAGS = %s\\nprefix = %s\\n' "$CFLAGS" "$prefix" > Makefile.global
"""
FAKE_MAKEFILE = """include Makefile.global
all:
\tcc $(CFLAGS) -c src/backend/main.c -o src/backend/main.o
install:
\tsh ./install.sh $(prefix) "$(CFLAGS)"
"""
FAKE_INSTALL = """mkdir -p "$1/bin"
for program in postgres initdb pg_ctl pgbench; do
  printf '#!/bin/sh\\necho "%s (PostgreSQL) 15.18 %s CFLAGS=%s"\\n' "$program" \\
    "$(cat src/include/lwlock.h)" "$2" > "$1/bin/$program"
  chmod +x "$1/bin/$program"
done
"""
FAKE_LWLOCK = "NUM_BUFFER_PARTITIONS=128\n"
FAKE_PARTITIONS_PATCH = """--- a/src/include/lwlock.h
+++ b/src/include/lwlock.h
@@ -1 +1 @@
-NUM_BUFFER_PARTITIONS=128
+NUM_BUFFER_PARTITIONS=256
"""


def fake_release(directory: Path, name: str = "postgresql-15.18") -> Path:
    """The fake release's tree in `directory`/`name` (add to it before packing)."""
    tree = directory / name
    (tree / "src" / "backend").mkdir(parents=True)
    (tree / "src" / "include").mkdir()
    (tree / "configure").write_text(FAKE_CONFIGURE)
    (tree / "configure").chmod(0o755)
    (tree / "GNUmakefile").write_text(FAKE_MAKEFILE)
    (tree / "install.sh").write_text(FAKE_INSTALL)
    (tree / "src" / "include" / "lwlock.h").write_text(FAKE_LWLOCK)
    (tree / "src" / "backend" / "main.c").write_text("int main(void) { return 0; }\n")
    return tree


def pack(tree: Path, tarball: Path) -> Path:
    """`tree` as a gzipped tarball with the tree's name at its top."""
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(tree, arcname=tree.name)
    return tarball


def fake_definition(tarball: Path, **changes: object) -> BuildDefinition:
    """A build of the fake release at `tarball` (a path source), with `changes` applied."""
    definition: BuildDefinition = {
        "source": {"kind": "path", "location": str(tarball), "ref": None},
        "configure_flags": [*SMALL_FLAGS, "--with-blocksize=16"],
        "patches": [],
        "cflags": None,
    }
    return {**definition, **changes}  # type: ignore[typeddict-item]


class Zeros(io.RawIOBase):
    """`size` zero bytes, read without holding them."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        count = min(len(buffer), self.left)
        buffer[:count] = bytes(count)
        self.left -= count
        return count
