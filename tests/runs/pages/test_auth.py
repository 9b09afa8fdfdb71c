"""Every page but share links requires a signed-in user."""

import pytest
from django.test import Client
from django.urls import reverse

from tests.runs.factories import UserFactory

pytestmark = pytest.mark.django_db

PAGES = [
    ("run-list", []),
    ("run-detail", [1]),
    ("run-export", [1, "csv"]),
    ("experiment-list", []),
    ("schedule", []),
    ("experiment-detail", [1]),
    ("comparison-list", []),
    ("comparison-detail", [1]),
    ("host-list", []),
    ("host-detail", [1]),
    ("build-list", []),
    ("config-list", []),
    ("config-new", []),
    ("workload-list", []),
    ("workload-new", []),
]


@pytest.mark.parametrize(("name", "args"), PAGES)
def test_signed_out_visitors_are_sent_to_sign_in(name, args):
    url = reverse(name, args=args)
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


def test_live_stream_refuses_signed_out_visitors():
    assert Client().get(reverse("run-events", args=[1])).status_code == 403


def test_sign_in_with_a_password_opens_the_run_list():
    UserFactory(username="ada")
    client = Client()
    page = client.get(reverse("login")).content.decode()
    assert 'name="username"' in page and 'name="password"' in page
    response = client.post(reverse("login"), {"username": "ada", "password": "pw"}, follow=True)
    assert response.redirect_chain[-1][0] == "/"
    assert "Sign out" in response.content.decode()


def test_wrong_password_is_refused_with_a_message():
    UserFactory(username="ada")
    response = Client().post(reverse("login"), {"username": "ada", "password": "nope"})
    assert response.status_code == 200
    assert "correct username and password" in response.content.decode()


def test_sign_out_ends_the_session(signed_in):
    signed_in.post(reverse("logout"))
    assert signed_in.get(reverse("run-list")).status_code == 302
