"""Change detection on a series' history: one alert for a step down, none for flat noise;
host-changed ones told apart, confirmed ones delivered, triage by the series' owner."""

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

from runs.models import (
    Alert,
    ChangePoint,
    Experiment,
    HostCanary,
    Occurrence,
    Result,
    Run,
    Series,
)
from runs.services.history.alerts import alert_acknowledge, series_detect
from runs.services.history.confirm import alert_confirm_start, alert_confirmation_for
from runs.services.history.series import note_add, series_history
from tests.runs.factories import (
    ExperimentFactory,
    HostFactory,
    ResultFactory,
    RunFactory,
    UserFactory,
)

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


def history(
    series: Series,
    tps_means: list[float],
    seed: int = 7,
    cpu_loop_ns: list[float] | None = None,
    memory_gbps: list[float] | None = None,
    outside: frozenset[int] = frozenset(),
) -> None:
    """One finished occurrence per mean: REPEATS points at 4 clients, 2 % noise, latency flat;
    with `cpu_loop_ns`, each occurrence's run has a host canary of that CPU loop time, with
    `memory_gbps` of that memory copy rate (and a steady CPU loop); the canaries of the
    days (0-based) in `outside` fell outside the host's usual spread."""
    rng = np.random.default_rng(seed)
    start = timezone.now() - timedelta(days=len(tps_means))
    host = HostFactory()
    for day, mean in enumerate(tps_means):
        experiment = ExperimentFactory(name=f"{series.name} #{day + 1}")
        fired = start + timedelta(days=day)
        Occurrence.objects.create(series=series, experiment=experiment, fired_at=fired)
        run = RunFactory(experiment=experiment, host=host, status=Run.Status.SUCCEEDED)
        for repeat in range(1, REPEATS + 1):
            ResultFactory(run=run, repeat=repeat, tps=float(rng.normal(mean, mean * 0.02)))
        if cpu_loop_ns is not None or memory_gbps is not None:
            HostCanary.objects.create(
                host=run.host, run=run, at=fired,
                cpu_loop_ns=cpu_loop_ns[day] if cpu_loop_ns else 100.0 + (day % 3) * 0.5,
                fsync_ms=2.0, fsync_max_ms=3.0,
                memory_gbps=memory_gbps[day] if memory_gbps else None,
                outside_usual=day in outside,
                detail="CPU loop 2.0 x its usual" if day in outside else "",
            )  # fmt: skip


def ended_a_b(verdict: str, pct: float) -> Experiment:
    """A confirming A/B that ended with this verdict on its after cell."""
    return ExperimentFactory(
        adaptive_state={"ended": "every cell decided", "points": [{
            "cell": 1, "clients": 4, "verdict": verdict, "sentence": "", "rounds": 6,
            "pct": pct, "log_se": 0.012, "ci_level": 95.0,
        }]},
    )  # fmt: skip


@pytest.fixture
def series(db, webhook, user) -> Series:
    """A series that delivers every alert when found (as before confirmations)."""
    return Series.objects.create(
        name="nightly tpcb",
        template=ExperimentFactory(),
        schedule="0 3 * * *",
        webhook_url=webhook[0],
        alert_email="perf@example.com",
        deliver=Series.Deliver.DETECTED,
        created_by=user,
    )


def test_a_step_down_in_tps_raises_one_alert_posted_to_the_webhook(series, webhook):
    history(series, [1000.0] * 12 + [900.0] * 6)

    alerts = series_detect(series)
    again = series_detect(series)

    assert again == []
    assert [(a.metric, a.key, a.state) for a in alerts] == [("tps", "cell 0, 4 clients", "new")]
    alert = Alert.objects.get()
    assert alert.occurrence.experiment.name == "nightly tpcb #13"
    assert alert.change_percent == pytest.approx(-10, abs=2)
    change = alert.change_point
    assert change.before_occurrence.experiment.name == "nightly tpcb #12"
    assert change.low_percent < alert.change_percent < change.high_percent < 0
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
    assert alert.state == Alert.State.ACKNOWLEDGED


def test_the_api_lists_alerts_and_acknowledges_one_with_a_note(series, api_client):
    history(series, [1000.0] * 12 + [900.0] * 6)
    alert = series_detect(series)[0]

    listed = api_client.get("/api/alerts/").json()
    acknowledged = api_client.post(
        f"/api/alerts/{alert.pk}/acknowledge/", {"note": "known: new kernel"}, format="json"
    )
    noted = api_client.post(f"/api/alerts/{alert.pk}/note/", {"note": "bisecting"}, format="json")
    fixed = api_client.post(f"/api/alerts/{alert.pk}/fixed/", {"note": "reverted"}, format="json")

    assert [a["id"] for a in listed["results"]] == [alert.pk]
    assert listed["results"][0]["low_percent"] < listed["results"][0]["change_percent"]
    assert acknowledged.status_code == 200
    assert acknowledged.json()["acknowledgement"] == "known: new kernel"
    assert acknowledged.json()["state"] == "acknowledged"
    assert [n["text"] for n in noted.json()["notes"]] == ["bisecting"]
    assert fixed.json()["state"] == "fixed"
    assert [n["text"] for n in fixed.json()["notes"]] == ["bisecting", "fixed: reverted"]


def test_only_the_series_owner_or_staff_triages_its_alerts(series, client):
    history(series, [1000.0] * 12 + [900.0] * 6)
    alert = series_detect(series)[0]
    client.force_login(UserFactory())

    answer = client.post(f"/alerts/{alert.pk}/acknowledge", {"note": "not mine"})

    assert answer.status_code == 403
    alert.refresh_from_db()
    assert alert.state == Alert.State.NEW


def test_an_alert_waits_for_its_confirmation_before_anyone_is_told(
    series, webhook, django_capture_on_commit_callbacks
):
    Series.objects.filter(pk=series.pk).update(deliver=Series.Deliver.CONFIRMED)
    series.refresh_from_db()
    history(series, [1000.0] * 12 + [900.0] * 6)
    slower = series_detect(series)[0]
    experiment = ended_a_b("slower", -9.8)
    Alert.objects.filter(pk=slower.pk).update(confirmation_experiment=experiment)
    assert webhook[1] == [] and mail.outbox == []

    with django_capture_on_commit_callbacks(execute=True):
        assert alert_confirmation_for(experiment.pk)

    slower.refresh_from_db()
    assert slower.state == Alert.State.CONFIRMED
    assert slower.confirmation == "confirmed: slower by 9.8 % [-11.9, -7.7] over 6 rounds"
    assert [(r["alert_id"], r["state"]) for r in webhook[1]] == [(slower.pk, "confirmed")]
    assert webhook[1][0]["find_the_commit"] == f"/bisections/new/?alert={slower.pk}"
    assert not alert_confirmation_for(experiment.pk)


def test_an_alert_delivered_when_found_is_not_delivered_again_when_confirmed(
    series, webhook, django_capture_on_commit_callbacks
):
    history(series, [1000.0] * 12 + [900.0] * 6)
    (alert,) = series_detect(series)
    assert [r["state"] for r in webhook[1]] == ["new"] and len(mail.outbox) == 1
    experiment = ended_a_b("slower", -9.8)
    Alert.objects.filter(pk=alert.pk).update(confirmation_experiment=experiment)

    with django_capture_on_commit_callbacks(execute=True):
        assert alert_confirmation_for(experiment.pk)

    alert.refresh_from_db()
    assert alert.state == Alert.State.CONFIRMED
    assert [r["state"] for r in webhook[1]] == ["new"] and len(mail.outbox) == 1


def test_an_alert_the_a_b_does_not_confirm_pages_nobody(series, webhook):
    Series.objects.filter(pk=series.pk).update(deliver=Series.Deliver.CONFIRMED)
    series.refresh_from_db()
    history(series, [1000.0] * 12 + [900.0] * 6)
    alert = series_detect(series)[0]
    experiment = ended_a_b("same", -0.4)
    Alert.objects.filter(pk=alert.pk).update(confirmation_experiment=experiment)

    alert_confirmation_for(experiment.pk)

    alert.refresh_from_db()
    assert alert.state == Alert.State.NOT_CONFIRMED
    assert alert.confirmation.startswith("not confirmed: same, -0.4 %")
    assert webhook[1] == []


def test_a_change_the_host_canary_shares_is_the_host_not_a_regression(series, webhook):
    Series.objects.filter(pk=series.pk).update(deliver=Series.Deliver.CONFIRMED)
    series.refresh_from_db()
    canary = [100.0 + (day % 3) * 0.5 for day in range(12)] + [115.0] * 6
    history(series, [1000.0] * 12 + [900.0] * 6, cpu_loop_ns=canary)

    (alert,) = series_detect(series)

    assert alert.state == Alert.State.HOST
    assert "cpu_loop_ns" in alert.change_point.host_evidence
    assert ChangePoint.objects.filter(metric="canary.cpu_loop_ns").count() == 1
    assert webhook[1] == []


def test_a_change_the_memory_canary_alone_shares_is_the_host(series, webhook):
    Series.objects.filter(pk=series.pk).update(deliver=Series.Deliver.CONFIRMED)
    series.refresh_from_db()
    memory = [6.0 + (day % 3) * 0.05 for day in range(12)] + [
        3.0 + (day % 2) * 0.05 for day in range(6)
    ]
    history(series, [1000.0] * 12 + [900.0] * 6, memory_gbps=memory)

    (alert,) = series_detect(series)

    assert alert.state == Alert.State.HOST
    assert alert.change_point.host_evidence.startswith("memory_gbps ")
    assert "changed -" in alert.change_point.host_evidence
    assert "cpu_loop_ns" not in alert.change_point.host_evidence
    assert ChangePoint.objects.filter(metric="canary.memory_gbps").count() == 1
    assert not ChangePoint.objects.filter(metric="canary.cpu_loop_ns").exists()
    assert webhook[1] == []


def test_two_occurrences_the_host_slowed_are_reported_as_host_changed_and_nobody_told(
    series, webhook
):
    """A neighbour's batch job for two nights: no change point (a side needs three
    occurrences), but each slowed occurrence is reported, once, as "host", with no A/B."""
    Series.objects.filter(pk=series.pk).update(deliver=Series.Deliver.DETECTED)
    slow = frozenset({5, 6})
    canary = [200.0 if day in slow else 100.0 + (day % 3) * 0.5 for day in range(12)]
    tps = [600.0 if day in slow else 1000.0 for day in range(12)]
    history(series, tps, cpu_loop_ns=canary, outside=slow)

    alerts = series_detect(series)
    again = series_detect(series)

    assert again == []
    assert not ChangePoint.objects.filter(metric="tps").exists()
    assert [(a.metric, a.state, a.occurrence.experiment.name) for a in alerts] == [
        ("tps", "host", "nightly tpcb #6"),
        ("tps", "host", "nightly tpcb #7"),
    ]
    for alert in alerts:
        assert alert.change_point is None and alert.change_percent == pytest.approx(-40, abs=3)
        assert alert.confirmation.startswith("host changed during this occurrence, no change ")
        assert "CPU loop 2.0 x its usual" in alert.confirmation
        assert alert_confirm_start(alert) is None
    assert webhook[1] == [] and mail.outbox == []


def busy(series: Series, days: set[int], foreign_percent: float) -> None:
    """The points of those days (0-based) ran beside other processes' CPU."""
    names = [f"{series.name} #{day + 1}" for day in days]
    Result.objects.filter(run__experiment__name__in=names).update(
        foreign_cpu_percent=foreign_percent, cpu_steal_percent=0.0
    )


def test_occurrences_a_busy_neighbour_made_faster_are_the_host_not_the_software(series, webhook):
    """Measured on a 2-vCPU VM: other processes' CPU made one-client select-only 2.5 times
    faster (no idle vCPU to wake). The busy nights are reported as the host's, whichever
    way they moved, and nobody is told."""
    Series.objects.filter(pk=series.pk).update(deliver=Series.Deliver.DETECTED)
    history(series, [1000.0] * 6 + [2500.0] * 2 + [1000.0] * 4)
    busy(series, {6, 7}, 50.0)

    alerts = series_detect(series)

    assert [(a.state, a.occurrence.experiment.name) for a in alerts] == [
        ("host", "nightly tpcb #7"),
        ("host", "nightly tpcb #8"),
    ]
    assert all(a.change_point is None and a.change_percent > 100 for a in alerts)
    assert "other processes used 50 % of the host's CPU" in alerts[0].confirmation
    assert webhook[1] == []


def test_a_change_point_next_to_a_busy_occurrence_is_the_host(series, webhook):
    """The A/A through the real lab: three busy nights found as two change points, the
    way back down alerted as "host" with the busy night named, and nobody told."""
    Series.objects.filter(pk=series.pk).update(deliver=Series.Deliver.DETECTED)
    history(series, [1000.0] * 6 + [2500.0] * 3 + [1000.0] * 6)
    busy(series, {6, 7, 8}, 50.0)

    (alert,) = series_detect(series)

    assert alert.state == Alert.State.HOST and alert.occurrence.experiment.name.endswith("#10")
    evidence = alert.change_point.host_evidence
    assert evidence == "during nightly tpcb #9: other processes used 50 % of the host's CPU"
    assert webhook[1] == []


def test_a_slowdown_that_lasts_is_a_change_point_not_a_slowed_occurrence(series):
    """A regression landing with a noisy canary (the fsync probe after a build): nothing is
    reported as slowed by the host while the line stays down; the change point's alert
    is raised and measured again."""
    canary = [100.0 + (day % 3) * 0.5 for day in range(12)]
    history(series, [1000.0] * 6 + [800.0] * 6, cpu_loop_ns=canary, outside=frozenset({6}))

    (alert,) = series_detect(series)

    assert alert.change_point is not None and alert.occurrence.experiment.name.endswith("#7")
    assert alert.state == Alert.State.HOST and alert.confirmation == ""
    assert not Alert.objects.filter(change_point__isnull=True).exists()


def test_an_occurrence_reported_slowed_that_starts_a_change_becomes_its_alert(series):
    canary = [100.0 + (day % 3) * 0.5 for day in range(12)]
    history(series, [1000.0] * 6 + [800.0] * 6, cpu_loop_ns=canary)
    seventh = Occurrence.objects.get(experiment__name="nightly tpcb #7")
    slowed = Alert.objects.create(
        series=series, occurrence=seventh, metric="tps", key="cell 0, 4 clients",
        before=1000.0, after=800.0, change_percent=-20.0, state=Alert.State.HOST,
        confirmation="host changed during this occurrence, no change point: ...",
    )  # fmt: skip

    (alert,) = series_detect(series)

    assert alert.pk == slowed.pk and alert.change_point is not None
    assert (alert.state, alert.confirmation) == (Alert.State.NEW, "")
    assert alert.change_percent == pytest.approx(-20, abs=2)


def test_a_slow_occurrence_needs_both_the_canary_and_the_value_out_of_line(series):
    canary = [100.0 + (day % 3) * 0.5 for day in range(12)]
    tps = [1000.0] * 12
    tps[5] = 600.0
    history(series, tps, cpu_loop_ns=canary, outside=frozenset({8}))

    assert series_detect(series) == []


def test_more_memory_bandwidth_is_no_host_slowdown(series):
    memory = [3.0 + (day % 3) * 0.05 for day in range(12)] + [6.0] * 6
    history(series, [1000.0] * 12 + [900.0] * 6, memory_gbps=memory)

    (alert,) = series_detect(series)

    assert alert.state == Alert.State.NEW and alert.change_point.host_evidence == ""
    assert ChangePoint.objects.filter(metric="canary.memory_gbps").count() == 1


@pytest.mark.parametrize(
    ("verdict", "pct", "state", "told"),
    [("slower", -9.8, Alert.State.CONFIRMED, ["confirmed"]), ("same", -0.3, Alert.State.HOST, [])],
)
def test_a_host_changed_alert_is_measured_again_and_a_software_regression_not_hidden(
    series, webhook, django_capture_on_commit_callbacks, verdict, pct, state, told
):
    Series.objects.filter(pk=series.pk).update(deliver=Series.Deliver.CONFIRMED)
    series.refresh_from_db()
    canary = [100.0 + (day % 3) * 0.5 for day in range(12)] + [115.0] * 6
    history(series, [1000.0] * 12 + [900.0] * 6, cpu_loop_ns=canary)
    with django_capture_on_commit_callbacks() as sent:
        (alert,) = series_detect(series)
    assert alert.state == Alert.State.HOST and len(sent) == 1  # its confirming A/B's task
    assert alert_confirm_start(alert) is not None
    experiment = ended_a_b(verdict, pct)
    Alert.objects.filter(pk=alert.pk).update(confirmation_experiment=experiment)

    with django_capture_on_commit_callbacks(execute=True):
        assert alert_confirmation_for(experiment.pk)

    alert.refresh_from_db()
    assert alert.state == state
    assert alert.confirmation.startswith(f"{'' if told else 'not '}confirmed: ")
    assert "cpu_loop_ns" in alert.change_point.host_evidence
    assert [r["state"] for r in webhook[1]] == told
    assert not alert_confirmation_for(experiment.pk)


def test_an_alert_whose_change_point_is_gone_is_not_left_waiting(series):
    history(series, [1000.0] * 12 + [900.0] * 6)
    (alert,) = series_detect(series)
    ChangePoint.objects.all().delete()
    alert.refresh_from_db()

    assert alert_confirm_start(alert) is None

    alert.refresh_from_db()
    assert (alert.state, alert.confirmation) == (
        Alert.State.NOT_CONFIRMED,
        "not confirmed: its change point is gone",
    )


def test_the_alerts_page_groups_by_series_with_states_and_notes(series, client, user):
    history(series, [1000.0] * 12 + [900.0] * 6)
    alert = series_detect(series)[0]
    note_add(user, "looking at the planner change", alert=alert)
    client.force_login(user)

    page = client.get("/alerts/").content.decode()

    assert f'data-series-id="{series.pk}"' in page
    assert f'data-alert="{alert.pk}" data-state="new"' in page
    assert "looking at the planner change" in page


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


def test_the_confirming_a_b_measures_the_two_occurrences_builds_in_rounds(series):
    history(series, [1000.0] * 12 + [900.0] * 6)
    alert = series_detect(series)[0]

    experiment = alert_confirm_start(alert)

    alert.refresh_from_db()
    assert alert.confirmation == "", alert.confirmation
    assert experiment is not None and alert.confirmation_experiment == experiment
    assert experiment.adaptive and experiment.execution == "rounds"
    assert [b.name for b in experiment.builds.order_by("name")] == [
        f"alert {alert.pk}: 0 before (nightly tpcb #12)",
        f"alert {alert.pk}: 1 after (nightly tpcb #13)",
    ]
    assert alert_confirm_start(alert) is None
