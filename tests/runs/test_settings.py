"""The environment helpers of benchlab/settings.py."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from benchlab.settings import env_bool, env_int, env_str

REPO = Path(__file__).resolve().parents[2]


def test_a_secret_is_read_from_the_file_its_file_variable_names(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("BENCHLAB_TEST_SECRET_FILE", str(secret))

    assert env_str("BENCHLAB_TEST_SECRET") == "s3cret"


def test_a_bad_boolean_or_integer_is_a_configuration_error(monkeypatch):
    monkeypatch.setenv("BENCHLAB_TEST_FLAG", "maybe")
    monkeypatch.setenv("BENCHLAB_TEST_NUMBER", "ten")

    with pytest.raises(ImproperlyConfigured, match="BENCHLAB_TEST_FLAG"):
        env_bool("BENCHLAB_TEST_FLAG", False)
    with pytest.raises(ImproperlyConfigured, match="BENCHLAB_TEST_NUMBER"):
        env_int("BENCHLAB_TEST_NUMBER", 1)


def test_production_without_a_secret_key_refuses_to_start():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SECRET_KEY")}
    env["DEBUG"] = "false"

    completed = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert completed.returncode != 0
    assert "SECRET_KEY (or SECRET_KEY_FILE) is required" in completed.stderr
