"""Fixtures for the control-plane tests.

- `user`, `api_client` (authenticated with a DRF token), `anonymous_client`.
- `pg_catalogue`: a PgCatalogue row holding the real `pg_settings` catalogue
  of the PostgreSQL server the test database lives on, stored under the
  server's exact version, as an agent's registration would.
- `lab_redis`: a client for the test Redis database; the agent queues and
  cancel flags of the test's hosts and runs are deleted after the test.
- `events_stream`: a unique stream name set as BENCHLAB_EVENTS_STREAM.
- `experiment_payload`: builds a valid POST /api/experiments/ body (one new
  host, build, config profile and workload; two client counts); keyword
  arguments override its fields (tests/runs/scheduling.py builds the cell).
- `at_latest`: for a test that migrates back (tests/runs/migrations/migrating.py),
  every app migrated forward again after it.
"""

import uuid
from collections.abc import Callable, Iterator

import pytest
from django.db import connection
from rest_framework.test import APIClient

from agents.contract.settings.catalogue import CATALOGUE_QUERY, catalogue_from_rows
from agents.contract.wire import agent_queue, cancel_key, dispatch_key
from runs.agentlink.transport import redis_connection
from runs.models import Host, PgCatalogue, Run
from runs.services.access.tokens import api_token_create
from tests.runs.factories import UserFactory
from tests.runs.migrations.migrating import migrate_to_latest
from tests.runs.scheduling import as_ids, one_new_cell


@pytest.fixture
def user(db):
    return UserFactory()


@pytest.fixture
def api_client(user):
    client = APIClient()
    _row, token = api_token_create(user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


@pytest.fixture
def anonymous_client():
    return APIClient()


@pytest.fixture
def pg_catalogue(db) -> PgCatalogue:
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        version = cursor.fetchone()[0].split()[0]
        cursor.execute(CATALOGUE_QUERY)
        rows = cursor.fetchall()
    catalogue = catalogue_from_rows(version, rows)
    return PgCatalogue.objects.create(version=version, catalogue=catalogue.as_dict())


@pytest.fixture
def lab_redis(db):
    client = redis_connection()
    yield client
    keys = [
        cancel_key(dispatch_key(str(pk), token))
        for pk, token in Run.objects.values_list("pk", "token")
    ]
    for name in Host.objects.values_list("name", flat=True):
        keys += [agent_queue(name), f"_kombu.binding.{agent_queue(name)}"]
    if keys:
        client.delete(*keys)


@pytest.fixture
def events_stream(settings, lab_redis):
    settings.BENCHLAB_EVENTS_STREAM = f"test:events:{uuid.uuid4().hex}"
    yield settings.BENCHLAB_EVENTS_STREAM
    lab_redis.delete(settings.BENCHLAB_EVENTS_STREAM)


@pytest.fixture
def experiment_payload(db) -> Callable[..., dict]:
    def build(**overrides) -> dict:
        payload = {"name": "tuning", **as_ids(one_new_cell()), "clients": [1, 2], "duration_s": 2}
        return {**payload, **overrides}

    return build


@pytest.fixture
def at_latest(transactional_db: None) -> Iterator[None]:
    """Every app migrated forward again after a test that migrates back."""
    yield
    migrate_to_latest()
