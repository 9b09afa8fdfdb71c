"""A small, real filesystem for tests that fill a disk: ext4 on a loop device."""

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True)


@contextmanager
def small_filesystem(directory: Path, size_mb: int) -> Iterator[Path]:
    """An ext4 filesystem of `size_mb` (no blocks reserved for root) mounted at
    `directory`/small, readable by every user; unmounted on exit. Skips the test
    unless it runs as root."""
    if os.geteuid() != 0:
        pytest.skip("mounting a loop filesystem needs root")
    image, mount = directory / "disk.img", directory / "small"
    with open(image, "wb") as file:
        file.truncate(size_mb * 1024**2)
    _run("mkfs.ext4", "-q", "-m", "0", "-F", str(image))
    mount.mkdir()
    _run("mount", "-o", "loop", str(image), str(mount))
    mount.chmod(0o755)
    try:
        yield mount
    finally:
        result = subprocess.run(["umount", str(mount)], capture_output=True, text=True)
        if result.returncode != 0:  # still busy: detach it anyway, the test has failed already
            _run("umount", "--lazy", str(mount))
