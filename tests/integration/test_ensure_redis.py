"""`scripts/ensure-redis` and the start of `scripts/lab`: a bad REDIS_URL or port stops the
start with a message saying what to fix, before anything is started."""

import os
import subprocess
from pathlib import Path

import psutil
import pytest
import redis

from tests.agents.worker.conftest import SpareRedis, free_port
from tests.integration.conftest import REPO

pytestmark = pytest.mark.integration

FORM = "redis://[:PASSWORD@]HOST[:PORT]/DB"


def run_script(name: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(REPO / "scripts" / name)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def own_redis_dir(port: int) -> Path:
    """Where ensure-redis keeps the Redis it starts on `port`."""
    return REPO / "var" / "redis" / str(port)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:6379/0", f"REDIS_URL must read {FORM}"),
        ("redis//127.0.0.1:6379/0", "it begins without a scheme"),
        ("redis://127.0.0.1:six/0", "the port in REDIS_URL is not a number"),
        ("redis://127.0.0.1:6379/zero", "the database in REDIS_URL is 'zero', not a number"),
    ],
)
def test_a_malformed_redis_url_is_refused_with_the_form_to_write(url: str, says: str) -> None:
    result = run_script("ensure-redis", REDIS_URL=url)

    assert result.returncode == 1
    assert says in result.stderr


def test_a_password_for_a_redis_without_one_is_refused_and_no_redis_is_started(
    own_redis: SpareRedis,
) -> None:
    url = f"redis://:not-its-password@127.0.0.1:{own_redis.port}/0"

    result = run_script("ensure-redis", REDIS_URL=url)

    assert result.returncode == 1
    assert "refuses the password in REDIS_URL" in result.stderr
    assert "not-its-password" not in result.stderr
    assert not own_redis_dir(own_redis.port).exists()


def test_a_database_the_redis_does_not_have_is_refused(own_redis: SpareRedis) -> None:
    result = run_script("ensure-redis", REDIS_URL=f"redis://127.0.0.1:{own_redis.port}/16")

    assert result.returncode == 1
    assert "has no database 16 (REDIS_URL ends in /16)" in result.stderr


def test_scripts_lab_on_a_taken_port_stops_before_starting_a_redis(
    own_redis: SpareRedis,
) -> None:
    unused = free_port()

    result = run_script(
        "lab", BENCHLAB_PORT=str(own_redis.port), REDIS_URL=f"redis://127.0.0.1:{unused}/0"
    )

    assert result.returncode == 1
    assert f"port {own_redis.port} is already in use" in result.stderr
    assert not own_redis_dir(unused).exists()


@pytest.mark.parametrize("port", ["web", "0", "65536"])
def test_scripts_lab_refuses_a_port_that_is_not_a_port_number(port: str) -> None:
    result = run_script("lab", BENCHLAB_PORT=port, REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")

    assert result.returncode == 1
    assert f"BENCHLAB_PORT must be a port number 1-65535, not '{port}'" in result.stderr


def test_a_redis_started_for_a_url_with_a_password_requires_it_and_keeps_it_off_ps() -> None:
    port, password = free_port(), "ensure-redis-test-password"
    directory = own_redis_dir(port)
    try:
        result = run_script("ensure-redis", REDIS_URL=f"redis://:{password}@127.0.0.1:{port}/0")

        assert result.returncode == 0, result.stderr
        assert "the password in REDIS_URL" in result.stdout
        assert password not in result.stdout + result.stderr
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port).ping()
        assert redis.Redis(port=port, password=password).ping()
        server = psutil.Process(int((directory / "redis.pid").read_text()))
        assert password not in " ".join(server.cmdline())
        assert (directory / "redis.conf").stat().st_mode & 0o777 == 0o600
    finally:
        if (directory / "redis.pid").exists():
            server = psutil.Process(int((directory / "redis.pid").read_text()))
            server.terminate()
            server.wait(timeout=30)
        subprocess.run(["rm", "-rf", str(directory)], check=False)
