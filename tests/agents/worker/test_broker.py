"""The agent worker's Redis transport (agents/worker/broker.py): chosen for redis:// only,
and what Celery's `broker_transport` setting names resolves to it."""

from kombu.transport import resolve_transport

from agents.worker.broker import AGENT_TRANSPORT, AgentRedisTransport, broker_transport


def test_a_plain_redis_url_gets_the_agent_s_transport() -> None:
    assert broker_transport("redis://:secret@localhost:6379/15") == AGENT_TRANSPORT
    assert resolve_transport(AGENT_TRANSPORT) is AgentRedisTransport


def test_other_schemes_keep_kombu_s_choice() -> None:
    # rediss:// gets kombu's TLS defaults by the scheme's name; sentinel has its transport.
    assert broker_transport("rediss://localhost:6380/0") is None
    assert broker_transport("sentinel://localhost:26379") is None
