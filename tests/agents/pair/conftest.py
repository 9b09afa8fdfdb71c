"""The pair link's tests use the worker tests' spare Redis (one they may stop)."""

from tests.agents.worker.conftest import spare_redis  # noqa: F401 - a fixture
