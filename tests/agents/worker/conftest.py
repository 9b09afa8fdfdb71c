"""Real Redis for the transport tests: the shared server and spare ones a test may stop.

Every test uses its own stream, run ids and queue names, so tests never see
each other's data on the shared server at 127.0.0.1:6379.
"""

import socket
import subprocess
import uuid
from pathlib import Path

import pytest
import redis

from tests.waiting import wait_for

SHARED_REDIS_URL = "redis://127.0.0.1:6379/0"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SpareRedis:
    """A redis-server of the test's own that can be stopped and restarted, keeping its data."""

    def __init__(self, workdir: Path, binds: tuple[str, ...] = (), password: str = ""):
        self.port = free_port()
        self.password = password
        auth = f":{password}@" if password else ""
        self.url = f"redis://{auth}127.0.0.1:{self.port}/0"
        self.workdir = workdir
        # Addresses it listens on besides 127.0.0.1 (a test network's interfaces); Redis
        # accepts clients there only with a password (protected mode).
        self.binds = binds
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", *self.binds]
            + ["--save", "", "--appendonly", "yes", "--appendfsync", "always"]
            + ["--dir", str(self.workdir)]
            + (["--requirepass", self.password] if self.password else []),
            stdout=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, password=self.password or None)
        wait_for(lambda: _answers(client))
        client.close()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, password=self.password or None, decode_responses=True)


def _answers(client: redis.Redis) -> bool:
    try:
        return client.ping()
    except redis.ConnectionError:
        return False


@pytest.fixture
def spare_redis(tmp_path):
    server = SpareRedis(tmp_path)
    server.start()
    yield server
    if server.process is not None:
        server.stop()


@pytest.fixture
def shared_redis():
    client = redis.Redis.from_url(SHARED_REDIS_URL, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def stream(shared_redis):
    """A throw-away stream name on the shared Redis, deleted after the test."""
    name = f"test:events:{uuid.uuid4().hex[:12]}"
    yield name
    shared_redis.delete(name)


@pytest.fixture
def run_id(shared_redis):
    """A run id of the test's own; its claim and cancel keys are deleted afterwards."""
    value = f"r-test-{uuid.uuid4().hex[:12]}"
    yield value
    for pattern in (f"benchlab:claim:{value}*", f"benchlab:cancel:{value}*"):
        for key in shared_redis.scan_iter(pattern):
            shared_redis.delete(key)
