"""The lock and the lease that keep a second worker of an agent from starting (real Redis;
the real worker processes are in tests/integration/test_one_worker_per_agent.py)."""

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agents.contract.wire import agent_lease_key
from agents.worker.exclusive import (
    Holder,
    NameLease,
    StateDirLock,
    WorkerConflict,
    boot_id,
    claim_agent,
    this_worker,
)
from tests.agents.worker.conftest import SHARED_REDIS_URL


@pytest.fixture
def name(shared_redis: redis.Redis) -> Iterator[str]:
    agent = f"exclusive-{uuid.uuid4().hex[:8]}"
    yield agent
    shared_redis.delete(agent_lease_key(agent))


@pytest.fixture
def client(shared_redis: redis.Redis) -> Iterator[redis.Redis]:
    """A client as the worker has one (bytes, not decoded)."""
    worker_client = redis.Redis.from_url(SHARED_REDIS_URL)
    yield worker_client
    worker_client.close()


def other_worker(state_dir: Path, pid: int = 4242, host: str = "elsewhere") -> Holder:
    boot = boot_id() if host == socket.gethostname() else "another boot"
    return Holder(uuid.uuid4().hex, host, pid, str(state_dir.resolve()), boot)


def test_a_second_lock_on_one_state_directory_and_name_names_the_holder(tmp_path: Path) -> None:
    first = StateDirLock(tmp_path, "a", this_worker(tmp_path))
    first.acquire()
    try:
        with pytest.raises(WorkerConflict) as refused:
            StateDirLock(tmp_path, "a", this_worker(tmp_path)).acquire()
        StateDirLock(tmp_path, "b", this_worker(tmp_path)).acquire()  # another name: its own
    finally:
        first.release()

    assert f"pid {first.holder.pid} on host {socket.gethostname()}" in str(refused.value)
    StateDirLock(tmp_path, "a", this_worker(tmp_path)).acquire()  # released: free again


def test_a_lease_held_elsewhere_refuses_with_its_holder_and_expiry(
    client: redis.Redis, name: str, tmp_path: Path
) -> None:
    held = NameLease(client, name, other_worker(tmp_path / "theirs"), seconds=30)
    held.acquire()

    with pytest.raises(WorkerConflict) as refused:
        claim_agent(client, tmp_path / "mine", name)

    message = str(refused.value)
    assert "pid 4242 on host elsewhere" in message and "expires in" in message
    assert Holder.parse(client.get(agent_lease_key(name))) == held.holder
    lock = StateDirLock(tmp_path / "mine", name, this_worker(tmp_path / "mine"))
    lock.acquire()  # the refused claim let its directory's lock go
    lock.release()


def test_a_lease_left_by_a_dead_worker_of_this_directory_is_taken_over_at_once(
    client: redis.Redis, name: str, tmp_path: Path
) -> None:
    left = other_worker(tmp_path, host=socket.gethostname())
    client.set(agent_lease_key(name), left.value(), px=30_000)

    claim = claim_agent(client, tmp_path, name)
    try:
        assert Holder.parse(client.get(agent_lease_key(name))) == claim.lease.holder
    finally:
        claim.release()

    assert client.get(agent_lease_key(name)) is None, "a clean stop releases the lease"


def test_a_lease_of_this_directory_on_another_machine_of_the_same_name_is_not_taken_over(
    client: redis.Redis, name: str, tmp_path: Path
) -> None:
    twin_machine = Holder("t", socket.gethostname(), 4242, str(tmp_path.resolve()), "other boot")
    client.set(agent_lease_key(name), twin_machine.value(), px=30_000)

    with pytest.raises(WorkerConflict):
        claim_agent(client, tmp_path, name)


def test_a_release_leaves_a_lease_another_worker_took(
    client: redis.Redis, name: str, tmp_path: Path
) -> None:
    claim = claim_agent(client, tmp_path, name)
    taker = other_worker(tmp_path / "theirs")
    client.set(agent_lease_key(name), taker.value(), px=30_000)

    claim.lease.renew()
    claim.release()

    assert Holder.parse(client.get(agent_lease_key(name))) == taker
