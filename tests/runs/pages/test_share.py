"""Share links open read-only views for anyone, until their owner (or staff) revokes them."""

import hashlib
import re
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.test import AsyncClient, Client
from django.urls import reverse
from rest_framework.test import APIClient

from runs import services
from runs.models import Run, ShareLink
from runs.sse import POLL_S, SHARE_RECHECK_S
from tests.runs.factories import UserFactory
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.django_db

digests_migration = __import__(
    "runs.migrations.0032_share_link_digests", fromlist=["digest_share_tokens"]
)

WRITE_FORM = re.compile(r'<form[^>]*method="post"', re.IGNORECASE)


def test_creating_a_share_link_shows_it_on_the_run_page(signed_in, run_with_results):
    response = signed_in.post(
        reverse("share-create", args=["run", run_with_results.pk]), follow=True
    )
    link = ShareLink.objects.get(run=run_with_results)
    page = response.content.decode()
    (shown,) = re.findall(r'href="(/s/[^"]+/)" class="mono" data-share-link', page)
    assert shown.startswith(f"/s/{link.prefix}")
    assert Client().get(shown).status_code == 200, "the link shown once opens the run"
    again = signed_in.get(reverse("run-detail", args=[run_with_results.pk])).content.decode()
    assert shown not in again and f"/s/{link.prefix}…/" in again, "afterwards, its prefix only"


def test_shared_run_is_read_only_for_signed_out_visitors(user, run_with_results):
    _link, token = services.share_link_create(user, run_with_results)
    response = Client().get(reverse("shared", args=[token]))
    page = response.content.decode()
    assert response.status_code == 200
    assert "1,234.6" in page and "2,345.2" in page
    assert "Read-only shared view" in page
    assert not WRITE_FORM.search(page)
    assert "Re-run" not in page and "Create share link" not in page


def test_shared_comparison_and_experiment_are_read_only(user):
    base = finished_run([(1, 1, 100.0, 1.0)])
    other = finished_run([(1, 1, 150.0, 0.8)])
    comparison = services.comparison_create(user, "cmp", [base, other], base)
    for target in (comparison, base.experiment):
        _link, token = services.share_link_create(user, target)
        page = Client().get(reverse("shared", args=[token])).content.decode()
        assert not WRITE_FORM.search(page)
        assert "Read-only shared view" in page


def test_shared_export_equals_the_stored_numbers(user, run_with_results):
    _link, token = services.share_link_create(user, run_with_results)
    body = Client().get(reverse("shared-export", args=[token, "json"])).json()
    assert [p["tps"] for p in body["runs"][0]["points"]] == [1234.5678, 2345.25]


def test_revoked_link_is_refused_with_a_clear_message(signed_in, user, run_with_results):
    link, token = services.share_link_create(user, run_with_results)
    signed_in.post(reverse("share-revoke", args=[link.pk]))
    visitor = Client()
    response = visitor.get(reverse("shared", args=[token]))
    assert response.status_code == 410
    assert "This share link was revoked" in response.content.decode()
    assert "1,234.6" not in response.content.decode()
    assert visitor.get(reverse("shared-export", args=[token, "csv"])).status_code == 410
    assert visitor.get(reverse("shared-events", args=[token])).status_code == 404


def test_unknown_token_is_404():
    response = Client().get(reverse("shared", args=["not-a-token"]))
    assert response.status_code == 404
    assert "No such share link" in response.content.decode()


def test_revoking_needs_a_signed_in_user(user, run_with_results):
    link, _token = services.share_link_create(user, run_with_results)
    Client().post(reverse("share-revoke", args=[link.pk]))
    link.refresh_from_db()
    assert link.is_active


def test_a_non_owner_sees_no_revoke_button_and_cannot_revoke(user, run_with_results):
    link, token = services.share_link_create(user, run_with_results)
    other = Client()
    other.force_login(UserFactory(username="someone-else"))

    page = other.get(reverse("run-detail", args=[run_with_results.pk])).content.decode()
    response = other.post(reverse("share-revoke", args=[link.pk]))

    assert f"/s/{token}/" not in page and f"/s/{link.prefix}" not in page, "nor listed"
    assert reverse("share-revoke", args=[link.pk]) not in page
    assert response.status_code == 403
    link.refresh_from_db()
    assert link.is_active


@pytest.mark.django_db(transaction=True)
def test_an_open_shared_stream_ends_within_seconds_of_a_revoke(user):
    run = finished_run([(1, 1, 500.0, 2.0)])
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    link, token = services.share_link_create(user, run)

    seen, waited = async_to_sync(follow_shared_stream_through_a_revoke)(link, token, user)

    assert 'event: end\ndata: {"status":"revoked"}' in seen
    assert waited < SHARE_RECHECK_S + POLL_S + 2


async def follow_shared_stream_through_a_revoke(
    link: ShareLink, token: str, user
) -> tuple[str, float]:
    """Read the shared stream until its status event, revoke, read until it ends."""
    response = await AsyncClient().get(reverse("shared-events", args=[token]))
    stream = aiter(response.streaming_content)
    seen = b""
    while b"event: status" not in seen:
        seen += await anext(stream)
    await sync_to_async(services.share_link_revoke)(link, user)
    revoked_at = time.monotonic()
    async for chunk in stream:
        seen += chunk
    return seen.decode(), time.monotonic() - revoked_at


def database_text() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM runs_sharelink")
        return repr(cursor.fetchall())


def test_the_database_keeps_no_share_token_and_the_api_shows_it_once(api_client, user):
    run = finished_run([(1, 1, 500.0, 2.0)], created_by=user)

    created = api_client.post("/api/share-links/", {"run": run.pk}, format="json").json()
    listed = api_client.get("/api/share-links/").json()["results"]
    read = api_client.get(f"/api/share-links/{created['id']}/").json()

    token = created["token"]
    assert created["url"].endswith(f"/s/{token}/")
    assert Client().get(created["url"]).status_code == 200
    assert token not in database_text()
    assert ShareLink.objects.get().digest == hashlib.sha256(token.encode()).hexdigest()
    assert token not in repr(listed) + repr(read)
    assert read["prefix"] == token[:6]


def test_only_the_owner_or_staff_list_a_link(user, api_client):
    link, _token = services.share_link_create(user, finished_run([(1, 1, 500.0, 2.0)]))
    other = APIClient()
    other.force_authenticate(UserFactory(username="not-the-owner"))
    staff = APIClient()
    staff.force_authenticate(UserFactory(username="staff", is_staff=True))

    def listed(client: APIClient) -> list[int]:
        return [row["id"] for row in client.get("/api/share-links/").json()["results"]]

    assert (listed(api_client), listed(other), listed(staff)) == ([link.pk], [], [link.pk])
    assert other.post(f"/api/share-links/{link.pk}/revoke/").status_code == 404


def test_a_link_made_before_digests_still_opens_after_the_migration(user, run_with_results):
    old_token = "made-before-digests-" + "x" * 23
    link, _token = services.share_link_create(user, run_with_results)
    state = MigrationLoader(connection).project_state(("runs", "0031_run_dispatched_at"))
    for operation in digests_migration.Migration.operations[:2]:
        operation.state_forwards("runs", state)  # the plain token beside the new columns
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # ALTER waits for no deferred check
        cursor.execute("ALTER TABLE runs_sharelink ADD COLUMN token varchar(64)")
        cursor.execute("UPDATE runs_sharelink SET token = %s WHERE id = %s", [old_token, link.pk])

    digests_migration.digest_share_tokens(state.apps, None)

    assert services.share_link_resolve(old_token) == link
    assert Client().get(reverse("shared", args=[old_token])).status_code == 200
