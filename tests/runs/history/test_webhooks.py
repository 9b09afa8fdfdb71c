"""Webhooks go to public addresses only (or networks a setting allows), checked when a series
is saved and again at each send, to the address resolved once, following no redirect.

Only loopback addresses are ever connected to: the refused ones are refused before any
connection, and the delivered ones go to test servers on 127.0.0.1.
"""

import ipaddress
import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core.exceptions import ImproperlyConfigured

from benchlab.settings import env_networks
from runs.forms.history import SeriesForm
from runs.models import Alert, Occurrence, Series
from runs.services.history.alerts import alert_deliver
from runs.services.history.webhooks import WebhookRefused, _pool, webhook_check, webhook_target
from tests.runs.factories import ExperimentFactory

pytestmark = pytest.mark.django_db

REFUSED = [
    "http://127.0.0.1/hook",
    "http://[::1]/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/hook",
    "http://localhost:8000/hook",
    "https://192.168.1.10/hook",
    "http://0.0.0.0/hook",
    "http://224.0.0.1/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://[fe80::1]/hook",
    "http://100.64.0.1/hook",
    "http://240.0.0.1/hook",
]
LOOPBACK = [ipaddress.ip_network("127.0.0.0/8")]


class Hook:
    """A test HTTP server on 127.0.0.1 recording each POST's path, Host header and body."""

    def __init__(self, status: int = 204, headers: dict[str, str] | None = None):
        self.received: list[dict] = []
        received, answer = self.received, (status, headers or {})

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append({"path": self.path, "host": self.headers["Host"], "body": body})
                self.send_response(answer[0])
                for name, value in answer[1].items():
                    self.send_header(name, value)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hooks() -> Iterator[Callable[..., Hook]]:
    started: list[Hook] = []

    def start(**answer) -> Hook:
        started.append(Hook(**answer))
        return started[-1]

    yield start
    for hook in started:
        hook.close()


def alert_for(url: str) -> Alert:
    series = Series.objects.create(
        name="nightly", template=ExperimentFactory(), schedule="0 3 * * *", webhook_url=url
    )
    occurrence = Occurrence.objects.create(series=series, experiment=ExperimentFactory())
    return Alert.objects.create(
        series=series, occurrence=occurrence, metric="tps", key="cell 0, 4 clients",
        before=1000.0, after=900.0, change_percent=-10.0,
    )  # fmt: skip


def delivered(alert: Alert) -> str:
    alert_deliver(alert)
    alert.refresh_from_db()
    return alert.delivery


@pytest.mark.parametrize("url", REFUSED)
def test_a_webhook_to_a_non_public_address_is_refused_when_the_series_is_saved(api_client, url):
    template = ExperimentFactory()
    payload = {"name": "nightly", "template": template.pk, "schedule": "0 3 * * *"}

    response = api_client.post("/api/series/", {**payload, "webhook_url": url}, format="json")

    assert response.status_code == 400, response.json()
    (message,) = response.json()["error"]["fields"]["webhook_url"]
    assert "BENCHLAB_WEBHOOK_ALLOWED_NETWORKS" in message
    assert not Series.objects.exists()


@pytest.mark.parametrize("url", [*REFUSED, "http://2130706433/hook", "http://0/"])
def test_the_check_resolves_the_host_whatever_form_the_address_takes(url):
    with pytest.raises(WebhookRefused, match="BENCHLAB_WEBHOOK_ALLOWED_NETWORKS"):
        webhook_check(url)


def test_a_name_that_does_not_resolve_is_refused():
    with pytest.raises(WebhookRefused, match="does not resolve"):
        webhook_check("http://no-such-host.invalid/hook")


def test_the_series_form_refuses_it_too():
    data = {"name": "n", "template": ExperimentFactory().pk, "schedule": "0 3 * * *"}
    form = SeriesForm(data={**data, "webhook_url": "http://169.254.169.254/"})

    assert not form.is_valid()
    assert "169.254.169.254" in form.errors["webhook_url"][0]


def test_a_refused_address_is_refused_again_at_send_time(hooks):
    hook = hooks()
    alert = alert_for(f"http://127.0.0.1:{hook.port}/hook")  # saved before the rule, say

    assert delivered(alert).startswith("webhook refused: 127.0.0.1 is 127.0.0.1: a loopback")
    assert hook.received == []


def test_a_network_the_setting_allows_is_delivered_to(settings, api_client, hooks):
    settings.BENCHLAB_WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    hook = hooks()
    url = f"http://127.0.0.1:{hook.port}/hook?team=perf"
    payload = {"name": "n", "template": ExperimentFactory().pk, "schedule": "0 3 * * *"}
    created = api_client.post("/api/series/", {**payload, "webhook_url": url}, format="json")
    assert created.status_code == 201, created.json()

    outcome = delivered(alert_for(url))

    assert outcome == "webhook answered 204"
    (request,) = hook.received
    assert (request["path"], request["host"]) == ("/hook?team=perf", f"127.0.0.1:{hook.port}")
    assert json.loads(request["body"])["metric"] == "tps"


def test_a_name_is_resolved_once_and_the_request_goes_to_that_address(settings, hooks, monkeypatch):
    settings.BENCHLAB_WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    hook = hooks()
    looked_up: list[str] = []
    real = socket.getaddrinfo

    def rebinding(host, *args, **kwargs):
        looked_up.append(host)
        if host == "localhost" and looked_up.count("localhost") > 1:
            host = "169.254.169.254"  # a second answer for the name would go elsewhere
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)

    outcome = delivered(alert_for(f"http://localhost:{hook.port}/hook"))

    assert outcome == "webhook answered 204"
    assert looked_up.count("localhost") == 1
    assert set(looked_up) <= {"localhost", "127.0.0.1"}
    assert hook.received[0]["host"] == f"localhost:{hook.port}"


def test_a_redirect_is_not_followed(settings, hooks):
    settings.BENCHLAB_WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    elsewhere = hooks()
    redirecting = hooks(status=307, headers={"Location": f"http://127.0.0.1:{elsewhere.port}/"})

    outcome = delivered(alert_for(f"http://127.0.0.1:{redirecting.port}/hook"))

    assert outcome == "webhook answered 307 (redirects are not followed)"
    assert len(redirecting.received) == 1
    assert elsewhere.received == []


def test_https_connects_to_the_address_and_checks_the_certificate_against_the_name(
    settings,
):
    settings.BENCHLAB_WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    target = webhook_target("https://localhost:8443/hook")

    pool = _pool(target)

    assert (pool.host, pool.port) == ("127.0.0.1", 8443)
    assert pool.conn_kw["server_hostname"] == "localhost"
    assert pool.assert_hostname == "localhost"
    assert pool.cert_reqs == "CERT_REQUIRED"
    assert target.host_header == "localhost:8443"


def test_the_setting_takes_cidrs_and_refuses_anything_else(monkeypatch):
    monkeypatch.setenv("NETS", "10.1.2.0/24, fd00::/8")
    assert [str(n) for n in env_networks("NETS")] == ["10.1.2.0/24", "fd00::/8"]
    monkeypatch.setenv("NETS", "10.1.2.0/24, intranet")
    with pytest.raises(ImproperlyConfigured, match="NETS must list CIDRs"):
        env_networks("NETS")
