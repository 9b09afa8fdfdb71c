"""The agent worker waits out a broker outage of any length."""

from agents.worker.celery_worker import app


def test_the_agent_worker_reconnects_to_redis_without_a_retry_limit() -> None:
    assert app.conf.broker_connection_max_retries is None
    assert app.conf.broker_connection_retry is True
    assert app.conf.broker_connection_retry_on_startup is True
