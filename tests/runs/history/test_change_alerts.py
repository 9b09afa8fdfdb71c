"""Change detection on a series' history: one alert for a step down, none for flat noise."""

import ipaddress
import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest
from django.core import mail
from django.utils import timezone

from runs.models import Alert, Occurrence, Run, Series
from runs.services.history.series import alert_acknowledge, note_add, series_detect, series_history
from tests.runs.factories import ExperimentFactory, ResultFactory, RunFactory

REPEATS = 3


class Received(list):
    """The JSON bodies the test webhook received."""


@pytest.fixture
def webhook(settings) -> Iterator[tuple[str, Received]]:
    """An HTTP server on localhost that stores every JSON POST and answers 204; loopback is
    allowed as a webhook target (runs.services.history.webhooks)."""
    settings.BENCHLAB_WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.0/8")]
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            received.append(json.loads(self.rfile.read(length)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", received
    server.shutdown()
    server.server_close()


def history(series: Series, tps_means: list[float], seed: int = 7) -> None:
    """One finished occurrence per mean: REPEATS points at 4 clients, 2 % noise, latency flat."""
    rng = np.random.default_rng(seed)
    start = timezone.now() - timedelta(days=len(tps_means))
    for day, mean in enumerate(tps_means):
        experiment = ExperimentFactory(name=f"{series.name} #{day + 1}")
        Occurrence.objects.create(
            series=series, experiment=experiment, fired_at=start + timedelta(days=day)
        )
        run = RunFactory(experiment=experiment, status=Run.Status.SUCCEEDED)
        for repeat in range(1, REPEATS + 1):
            ResultFactory(run=run, repeat=repeat, tps=float(rng.normal(mean, mean * 0.02)))


@pytest.fixture
def series(db, webhook) -> Series:
    return Series.objects.create(
        name="nightly tpcb",
        template=ExperimentFactory(),
        schedule="0 3 * * *",
        webhook_url=webhook[0],
        alert_email="perf@example.com",
    )


def test_a_step_down_in_tps_raises_one_alert_posted_to_the_webhook(series, webhook):
    history(series, [1000.0] * 12 + [900.0] * 6)

    alerts = series_detect(series)
    again = series_detect(series)

    assert again == []
    assert [(a.metric, a.key) for a in alerts] == [("tps", "cell 0, 4 clients")]
    alert = Alert.objects.get()
    assert alert.occurrence.experiment.name == "nightly tpcb #13"
    assert alert.change_percent == pytest.approx(-10, abs=2)
    _url, received = webhook
    assert len(received) == 1
    assert received[0]["series"] == "nightly tpcb"
    assert received[0]["metric"] == "tps"
    assert received[0]["alert_id"] == alert.pk
    assert "webhook answered 204" in alert.delivery
    assert len(mail.outbox) == 1
    assert mail.outbox[0].to == ["perf@example.com"]


def test_a_flat_noisy_series_raises_no_alert(series, webhook):
    history(series, [1000.0] * 20)

    assert series_detect(series) == []
    assert webhook[1] == []


def test_a_step_up_in_tps_is_no_regression(series, webhook):
    history(series, [1000.0] * 10 + [1100.0] * 6)

    assert series_detect(series) == []


def test_each_occurrence_is_one_point_with_its_confidence_interval(series):
    history(series, [1000.0, 1000.0])

    points = series_history(series, "tps")["cell 0, 4 clients"]

    assert len(points) == 2
    assert all(p.low < p.mean < p.high for p in points)


def test_an_alert_is_acknowledged_with_a_note(series, user):
    history(series, [1000.0] * 12 + [900.0] * 6)
    alert = series_detect(series)[0]

    alert_acknowledge(alert, user, "kernel 6.8 rolled out that night")

    alert.refresh_from_db()
    assert alert.acknowledged_by == user
    assert alert.acknowledgement == "kernel 6.8 rolled out that night"


def test_the_api_lists_alerts_and_acknowledges_one_with_a_note(series, api_client):
    history(series, [1000.0] * 12 + [900.0] * 6)
    alert = series_detect(series)[0]

    listed = api_client.get("/api/alerts/").json()
    acknowledged = api_client.post(
        f"/api/alerts/{alert.pk}/acknowledge/", {"note": "known: new kernel"}, format="json"
    )

    assert [a["id"] for a in listed["results"]] == [alert.pk]
    assert acknowledged.status_code == 200
    assert acknowledged.json()["acknowledgement"] == "known: new kernel"


def test_the_series_page_marks_the_change_point_and_the_notes(series, client, user):
    history(series, [1000.0] * 12 + [900.0] * 6)
    series_detect(series)
    run = Run.objects.filter(experiment__occurrence__series=series).last()
    note_add(user, "BIOS 1.2 flashed", run=run)
    client.force_login(user)

    page = client.get(f"/series/{series.pk}/").content.decode()

    tps_figure = json.loads(
        page.split('id="fig-series-tps" type="application/json">')[1].split("</script>")[0]
    )
    annotations = [a["text"] for a in tps_figure["layout"]["annotations"]]
    assert any(
        text.startswith("change -") and "(cell 0, 4 clients)" in text for text in annotations
    )
    assert "BIOS 1.2 flashed" in annotations
    assert len(tps_figure["data"][0]["x"]) == 18
    assert "nightly tpcb #13" in page


def test_an_unreachable_webhook_is_recorded_on_the_alert(series):
    closed = HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    url = f"http://127.0.0.1:{closed.server_port}/hook"
    closed.server_close()
    Series.objects.filter(pk=series.pk).update(webhook_url=url, alert_email="")
    series.refresh_from_db()
    history(series, [1000.0] * 12 + [900.0] * 6)

    alert = series_detect(series)[0]

    alert.refresh_from_db()
    assert alert.delivery.startswith("webhook failed: ")
