"""API tokens are kept as digests; wrong tokens and wrong passwords are throttled."""

import hashlib
import ipaddress

import pytest
from django.apps import apps
from django.db import connection
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from benchlab.throttle import client_address
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


def test_wrong_tokens_are_throttled_but_a_valid_one_still_signs_in(settings):
    settings.AUTH_FAILURE_LIMIT = 3
    _row, token = api_token_create(UserFactory())
    client = APIClient(REMOTE_ADDR="192.0.2.41")
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)

    statuses = [client.get("/api/runs/").status_code for _ in range(12)]
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    valid = client.get("/api/runs/")
    client.credentials(HTTP_AUTHORIZATION="Token " + "1" * 40)
    wrong_again = client.get("/api/runs/")

    assert statuses == [401] * 3 + [429] * 9
    assert valid.status_code == 200, "a valid token is never locked out"
    assert wrong_again.status_code == 429
    assert wrong_again.json()["error"]["code"] == "throttled"
    assert "Retry-After" in wrong_again


def test_failed_sign_ins_of_one_user_name_from_one_address_are_throttled(settings):
    settings.AUTH_FAILURE_LIMIT = 3
    UserFactory(username="alice", password="her-password")
    client = Client(REMOTE_ADDR="192.0.2.43")
    wrong = {"username": "alice", "password": "not-her-password"}

    statuses = [client.post("/accounts/login/", wrong).status_code for _ in range(4)]
    right = {"username": "alice", "password": "her-password"}
    elsewhere = Client(REMOTE_ADDR="192.0.2.44").post("/accounts/login/", right)

    assert statuses == [200, 200, 200, 429]
    assert elsewhere.status_code == 302, "her password works from another address"


def test_a_correct_password_works_from_an_address_that_guessed_other_names(settings):
    settings.AUTH_FAILURE_LIMIT = 3
    settings.AUTH_ADDRESS_FAILURE_LIMIT = 20
    UserFactory(username="bob", password="his-password")
    client = Client(REMOTE_ADDR="192.0.2.45")

    guesses = [
        client.post("/accounts/login/", {"username": f"u{n}", "password": "x"}).status_code
        for n in range(12)
    ]
    signed_in = client.post("/accounts/login/", {"username": "bob", "password": "his-password"})

    assert set(guesses) == {200}
    assert signed_in.status_code == 302


def test_an_address_past_its_bound_has_every_password_refused_unchecked(settings):
    settings.AUTH_ADDRESS_FAILURE_LIMIT = 5
    client = Client(REMOTE_ADDR="192.0.2.46")
    for n in range(5):
        client.post("/accounts/login/", {"username": f"u{n}", "password": "x"})

    refused = client.post("/accounts/login/", {"username": "carol", "password": "x"})

    assert refused.status_code == 429
    assert int(refused["Retry-After"]) == settings.AUTH_FAILURE_WINDOW_S


@pytest.mark.parametrize(
    ("trusted", "peer", "forwarded", "counted_as"),
    [
        ([], "127.0.0.1", "203.0.113.7", "127.0.0.1"),
        (["10.0.0.0/8"], "127.0.0.1", "203.0.113.7", "127.0.0.1"),
        (["127.0.0.1/32"], "127.0.0.1", "203.0.113.7", "203.0.113.7"),
        (["127.0.0.1/32", "10.0.0.0/8"], "127.0.0.1", "198.51.100.1, 203.0.113.7, 10.1.1.1",
         "203.0.113.7"),
    ],
)  # fmt: skip
def test_x_forwarded_for_counts_only_from_a_configured_proxy(
    settings, trusted, peer, forwarded, counted_as
):
    settings.BENCHLAB_TRUSTED_PROXIES = [ipaddress.ip_network(cidr) for cidr in trusted]
    request = RequestFactory().get("/", REMOTE_ADDR=peer, HTTP_X_FORWARDED_FOR=forwarded)

    assert client_address(request) == counted_as


def test_a_forged_x_forwarded_for_resets_no_count(settings):
    settings.AUTH_FAILURE_LIMIT = 3
    UserFactory(username="dave")
    statuses = [
        Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
        .post("/accounts/login/", {"username": "dave", "password": "x"})
        .status_code
        for n in range(4)
    ]

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
