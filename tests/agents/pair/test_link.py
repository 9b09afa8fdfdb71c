"""The pair link through a Redis outage, on a redis-server of the test's own that the
test stops and starts again (appendonly: it keeps its data): messages sent meanwhile wait
in the sender's spool and arrive once, in order; the peer is not taken for lost while
neither half can see its liveness key; an outage past the grace fails as `redis_lost`."""

import time
import uuid
from pathlib import Path

import pytest

from agents.config import AgentConfig
from agents.contract.errors import JobError
from agents.contract.vocabulary import PairRole
from agents.contract.wire import pair_key
from agents.pair.link import RETRY_MAX_S, Message, PairLink
from tests.agents.worker.conftest import SpareRedis
from tests.waiting import wait_for


def open_link(
    tmp_path: Path, redis: SpareRedis, dispatch: str, role: PairRole, grace_s: float
) -> PairLink:
    config = AgentConfig(
        name=role, state_dir=tmp_path / role, redis_url=redis.url, redis_grace_s=grace_s
    )
    peer = "client" if role == "server" else "server"
    return PairLink.open(config, dispatch, role, peer)


def halves(tmp_path: Path, redis: SpareRedis, grace_s: float = 60) -> tuple[PairLink, PairLink]:
    """The server's and the client's ends of one dispatch, started and introduced."""
    dispatch = f"{uuid.uuid4().hex[:8]}:token"
    server = open_link(tmp_path, redis, dispatch, "server", grace_s)
    client = open_link(tmp_path, redis, dispatch, "client", grace_s)
    server.start()
    client.start()
    client.send("joined", address="127.0.0.1")
    server.wait_for({"joined"}, lambda: False, timeout_s=10)
    return server, client


def inbox(link: PairLink) -> str:
    return pair_key(link.dispatch, f"to-{link.role}")


def spooled(link: PairLink) -> bool:
    return link.outbox.spool_path.exists()


def test_messages_sent_while_redis_is_down_arrive_once_in_order_after(tmp_path, spare_redis):
    server, client = halves(tmp_path, spare_redis)
    spare_redis.stop()

    for second in range(3):
        client.send("event", second=second)
    client.send("point", index=0)
    assert spooled(client), "the messages wait in the client's spool"
    assert server.receive() is None
    assert server.peer_alive(), "a peer whose key cannot be read is not lost"
    spare_redis.start()

    relayed: list[Message] = []
    point = server.wait_for({"point"}, lambda: False, timeout_s=30, on_other=relayed.append)

    assert [message["second"] for message in relayed] == [0, 1, 2]
    assert point["index"] == 0
    assert server.receive() is None, "nothing arrives twice"
    wait_for(server.peer_alive, 10, "the client's liveness key to be back")
    assert spare_redis.client().xlen(inbox(server)) == 1, "what was read is trimmed"
    client.close()
    server.close()
    assert not spooled(client) and not spooled(server)
    assert not spare_redis.client().exists(inbox(server), inbox(client)), "nothing lies in Redis"


def test_a_message_the_spool_sends_again_is_kept_once(tmp_path, spare_redis):
    server, client = halves(tmp_path, spare_redis)
    # What the outbox sends again when Redis took a batch but its answer was lost.
    client.outbox({"kind": "event", "n": 2, "second": 0})
    client.outbox({"kind": "event", "n": 2, "second": 0})
    client.outbox({"kind": "point", "n": 3, "index": 0})

    relayed: list[Message] = []
    server.wait_for({"point"}, lambda: False, timeout_s=10, on_other=relayed.append)

    assert relayed == [{"kind": "event", "n": 2, "second": 0}]
    assert server.receive() is None
    client.close()
    server.close()


def test_redis_down_past_the_grace_fails_naming_the_outage_and_drops_the_spool(
    tmp_path, spare_redis
):
    server, client = halves(tmp_path, spare_redis, grace_s=2)
    spare_redis.stop()
    down = time.monotonic()

    with pytest.raises(JobError) as raised:
        server.wait_for({"point"}, lambda: False)

    assert raised.value.code == "redis_lost"
    assert "lost Redis for" in str(raised.value)
    assert time.monotonic() - down < 2 + RETRY_MAX_S + 5
    client.send("failed", error=raised.value.as_dict())
    assert spooled(client)
    client.close()
    server.close()
    assert not spooled(client), "the peer's run is over: nothing waits for Redis"
