"""API tokens are kept as digests; wrong tokens and wrong passwords are throttled."""

import hashlib

import pytest
from django.apps import apps
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from runs.models import ApiToken
from runs.services.access.tokens import api_token_create
from tests.runs.factories import UserFactory

pytestmark = pytest.mark.django_db

migration = __import__("runs.migrations.0015_api_tokens", fromlist=["digest_drf_tokens"])


def database_text() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT digest, prefix, name FROM runs_apitoken")
        return repr(cursor.fetchall())


def test_the_database_keeps_no_token_and_the_token_still_signs_in():
    user = UserFactory()
    _row, token = api_token_create(user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")

    response = client.get("/api/runs/")

    assert response.status_code == 200
    assert token not in database_text()
    assert ApiToken.objects.get().digest == hashlib.sha256(token.encode()).hexdigest()


def test_a_wrong_token_is_refused_and_too_many_are_throttled(settings):
    settings.AUTH_FAILURE_LIMIT = 3
    _row, token = api_token_create(UserFactory())
    client = APIClient(REMOTE_ADDR="192.0.2.41")
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)

    statuses = [client.get("/api/runs/").status_code for _ in range(4)]
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    locked_out = client.get("/api/runs/")

    assert statuses == [401, 401, 401, 429]
    assert locked_out.status_code == 429, "even the right token waits out the window"
    assert locked_out.json()["error"]["code"] == "throttled"
    other = APIClient(REMOTE_ADDR="192.0.2.42")
    other.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert other.get("/api/runs/").status_code == 200


def test_failed_sign_ins_are_throttled(settings):
    settings.AUTH_FAILURE_LIMIT = 3
    UserFactory(username="alice")
    client = Client(REMOTE_ADDR="192.0.2.43")
    wrong = {"username": "alice", "password": "not-her-password"}

    statuses = [client.post("/accounts/login/", wrong).status_code for _ in range(4)]

    assert statuses == [200, 200, 200, 429]


def test_the_migration_digests_drf_tokens_and_drops_their_table():
    user = UserFactory()
    plain = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
            "created timestamp with time zone NOT NULL, user_id integer NOT NULL)"
        )
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, now(), %s)", [plain, user.pk])
    with connection.schema_editor() as editor:
        migration.digest_drf_tokens(apps, editor)

    assert "authtoken_token" not in connection.introspection.table_names()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {plain}")
    assert client.get("/api/runs/").status_code == 200
    assert plain not in database_text()
