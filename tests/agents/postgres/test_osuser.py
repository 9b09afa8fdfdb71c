"""The OS user PostgreSQL runs as, and running programs as that user."""

import os
import subprocess
from pathlib import Path

import pytest

from agents.postgres.osuser import OsUser, chown_tree, ensure_os_user

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


@needs_root
def test_root_agent_uses_an_unprivileged_system_user(os_user: OsUser) -> None:
    assert os_user.name == "benchlab"
    assert os_user.uid != 0
    assert ensure_os_user("benchlab") == os_user


@needs_root
def test_programs_run_as_the_user_with_a_minimal_environment(os_user: OsUser, monkeypatch) -> None:
    monkeypatch.setenv("AGENT_SECRET", "not for postgres")

    result = subprocess.run(
        ["/usr/bin/env"], capture_output=True, text=True, check=True, **os_user.subprocess_kwargs()
    )
    uid, groups = (
        subprocess.run(
            ["/usr/bin/id", flag], capture_output=True, text=True, check=True,
            **os_user.subprocess_kwargs(),
        ).stdout.split()
        for flag in ("-u", "-G")
    )  # fmt: skip

    env = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert env["HOME"] == str(os_user.home)
    assert env["USER"] == "benchlab"
    assert "AGENT_SECRET" not in env
    assert uid == [str(os_user.uid)]
    assert groups == [str(os_user.gid)]


@needs_root
def test_chown_tree_gives_everything_to_the_user(os_user: OsUser, tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "file").write_text("x")
    (tmp_path / "a" / "link").symlink_to("/etc/passwd")

    chown_tree(tmp_path / "a", os_user)

    for path in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "file"):
        assert path.stat().st_uid == os_user.uid
    assert (tmp_path / "a" / "link").lstat().st_uid == os_user.uid
    assert Path("/etc/passwd").stat().st_uid == 0


def test_current_user_needs_no_switch() -> None:
    me = OsUser("me", os.geteuid(), os.getegid(), Path.home())

    assert me.is_current
    assert set(me.subprocess_kwargs()) == {"env"}
