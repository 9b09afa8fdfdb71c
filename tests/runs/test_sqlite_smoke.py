"""A local start with no environment: SQLite, migrations, system checks."""

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_migrate_and_check_work_on_sqlite_with_no_environment(tmp_path):
    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env["SQLITE_PATH"] = str(tmp_path / "benchlab.sqlite3")
    for command in (["migrate", "--noinput"], ["check"]):
        completed = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr
    with sqlite3.connect(env["SQLITE_PATH"]) as connection:
        journal_mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
    assert journal_mode == "wal"
