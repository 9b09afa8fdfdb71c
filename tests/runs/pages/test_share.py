"""Share links open read-only views for anyone, until they are revoked."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from runs import services
from runs.models import ShareLink
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.django_db

WRITE_FORM = re.compile(r'<form[^>]*method="post"', re.IGNORECASE)


def test_creating_a_share_link_shows_it_on_the_run_page(signed_in, run_with_results):
    response = signed_in.post(
        reverse("share-create", args=["run", run_with_results.pk]), follow=True
    )
    link = ShareLink.objects.get(run=run_with_results)
    assert f"/s/{link.token}/" in response.content.decode()


def test_shared_run_is_read_only_for_signed_out_visitors(user, run_with_results):
    link = services.share_link_create(user, run_with_results)
    response = Client().get(reverse("shared", args=[link.token]))
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
        link = services.share_link_create(user, target)
        page = Client().get(reverse("shared", args=[link.token])).content.decode()
        assert not WRITE_FORM.search(page)
        assert "Read-only shared view" in page


def test_shared_export_equals_the_stored_numbers(user, run_with_results):
    link = services.share_link_create(user, run_with_results)
    body = Client().get(reverse("shared-export", args=[link.token, "json"])).json()
    assert [p["tps"] for p in body["runs"][0]["points"]] == [1234.5678, 2345.25]


def test_revoked_link_is_refused_with_a_clear_message(signed_in, user, run_with_results):
    link = services.share_link_create(user, run_with_results)
    signed_in.post(reverse("share-revoke", args=[link.token]))
    visitor = Client()
    response = visitor.get(reverse("shared", args=[link.token]))
    assert response.status_code == 410
    assert "This share link was revoked" in response.content.decode()
    assert "1,234.6" not in response.content.decode()
    assert visitor.get(reverse("shared-export", args=[link.token, "csv"])).status_code == 410
    assert visitor.get(reverse("shared-events", args=[link.token])).status_code == 404


def test_unknown_token_is_404():
    response = Client().get(reverse("shared", args=["not-a-token"]))
    assert response.status_code == 404
    assert "No such share link" in response.content.decode()


def test_revoking_needs_a_signed_in_user(user, run_with_results):
    link = services.share_link_create(user, run_with_results)
    Client().post(reverse("share-revoke", args=[link.token]))
    link.refresh_from_db()
    assert link.is_active
