"""The host's noise on the lab's side: each point's steal and foreign CPU stored as sent,
and each run's canary kept as its host's series and checked against the host's spread."""

import csv
import io
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from runs import services
from runs.analysis.run_checks import run_warnings
from runs.host_noise import canary_bands, rounds_spread
from runs.inference.designs import rounds_by_design
from runs.inference.usual import MIN_HISTORY
from runs.inference.variance import paired_variance
from runs.models import Experiment, Host, HostCanary, Result, Run
from tests.runs import events
from tests.runs.factories import HostFactory, ResultFactory, RunFactory
from tests.runs.noise_data import ROUND_BASE, ROUND_RATIOS, rounds_experiment

pytestmark = pytest.mark.django_db

NOISE = {
    "window_s": 2.01,
    "cpus": 2,
    "cpu_steal_percent": 3.5,
    "host_busy_cpu_s": 3.2,
    "job_cpu_s": 2.1,
    "job_cpu_source": "cgroup",
    "agent_cpu_s": 0.02,
    "foreign_cpu_s": 1.08,
    "foreign_cpu_percent": 26.87,
}


def test_a_points_noise_is_stored_with_its_result():
    run = RunFactory()
    point = {**events.point(0), "noise": NOISE}

    services.run_record_event(events.run_event(run, 1, "point", point))

    result = Result.objects.get(run=run, index=0)
    assert (result.cpu_steal_percent, result.foreign_cpu_percent) == (3.5, 26.87)
    assert result.noise == NOISE


def test_a_runs_export_carries_each_points_steal_and_foreign_cpu(client, user):
    run = RunFactory(status=Run.Status.SUCCEEDED)
    ResultFactory(run=run, index=0, cpu_steal_percent=3.5, foreign_cpu_percent=26.87)
    ResultFactory(run=run, index=1)
    client.force_login(user)

    body = client.get(reverse("run-export", args=[run.pk, "json"])).json()
    rows = list(
        csv.DictReader(
            io.StringIO(client.get(reverse("run-export", args=[run.pk, "csv"])).content.decode())
        )
    )

    points = body["runs"][0]["points"]
    assert [(p["cpu_steal_percent"], p["foreign_cpu_percent"]) for p in points] == [
        (3.5, 26.87),
        (None, None),
    ]
    assert [(r["cpu_steal_percent"], r["foreign_cpu_percent"]) for r in rows] == [
        ("3.5", "26.87"),
        ("", ""),
    ]


def test_a_point_of_an_agent_before_noise_stores_none():
    run = RunFactory()

    services.run_record_event(events.run_event(run, 1, "point", events.point(0)))

    result = Result.objects.get(run=run, index=0)
    assert (result.cpu_steal_percent, result.foreign_cpu_percent, result.noise) == (None, None, {})


def canary(
    cpu_loop_ns: float, fsync_ms: float, at: datetime, memory_gbps: float | None = None
) -> dict:
    """A canary as the agent sends it in its result (agents/contract/reports/noise.py);
    without `memory_gbps`, as agents before the memory copy send it."""
    memory = {} if memory_gbps is None else {
        "memory_copy_mib": 128, "memory_copy_runs": 7, "memory_gbps": memory_gbps,
    }  # fmt: skip
    return {
        "at": at.isoformat(),
        "seconds": 0.9,
        "cpu_loop_iterations": 200_000,
        "cpu_loop_runs": 25,
        "cpu_loop_ns": cpu_loop_ns,
        "fsync_directory": "/srv/benchlab",
        "fsync_count": 20,
        "fsync_ms": fsync_ms,
        "fsync_max_ms": fsync_ms * 3,
        **memory,
    }


def finish_with_canary(
    run: Run, cpu_loop_ns: float, fsync_ms: float, at: datetime, memory_gbps: float | None = None
) -> Run:
    document = {**events.result(run), "canary": canary(cpu_loop_ns, fsync_ms, at, memory_gbps)}
    services.run_record_event(events.run_event(run, 1, "result", document))
    run.refresh_from_db()
    return run


def steady_history(host: Host, start: datetime, count: int = 10) -> None:
    """`count` earlier runs whose canaries wobble a percent around 40 ns and 2 ms."""
    for number in range(count):
        wobble = 1 + 0.01 * ((number % 3) - 1)
        finish_with_canary(
            RunFactory(host=host), 40.0 * wobble, 2.0 * wobble, start + timedelta(minutes=number)
        )


def test_a_canary_within_the_hosts_usual_spread_leaves_the_run_unflagged():
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    steady_history(host, start)

    run = finish_with_canary(RunFactory(host=host), 40.6, 2.1, start + timedelta(hours=1))

    assert run.host_noise == {"outside_usual": False, "detail": ""}
    assert HostCanary.objects.filter(host=host).count() == 11
    assert run_warnings(run, []) == []


def test_a_slower_cpu_loop_flags_the_run_and_its_verdicts_warn():
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    steady_history(host, start)

    run = finish_with_canary(RunFactory(host=host), 52.0, 2.0, start + timedelta(hours=1))

    assert run.host_noise["outside_usual"] is True
    assert run.host_noise["detail"].startswith("CPU loop 52 ns/iteration, usual 40 ns")
    assert run.canary.outside_usual and run.canary.cpu_loop_ns == 52.0
    (warning,) = run_warnings(run, [])
    assert (warning.code, warning.detail) == ("host_outside_usual_spread", run.host_noise["detail"])


def test_a_slower_fsync_flags_the_run_too():
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    steady_history(host, start)

    run = finish_with_canary(RunFactory(host=host), 40.0, 5.0, start + timedelta(hours=1))

    assert run.host_noise["detail"].startswith("fsync 5 ms, usual 2 ms")


def test_a_slower_memory_copy_flags_the_run_and_canaries_before_it_count_for_the_rest():
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    # Five canaries of agents before the memory copy, then six with it.
    steady_history(host, start, count=5)
    for number in range(6):
        at = start + timedelta(minutes=10 + number)
        finish_with_canary(RunFactory(host=host), 40.0, 2.0, at, 6.0 + 0.05 * (number % 3))

    run = finish_with_canary(RunFactory(host=host), 40.0, 2.0, start + timedelta(hours=1), 3.1)

    assert run.host_noise["detail"].startswith("memory copy 3.1 GB/s, usual 6.05 GB/s")
    assert run.canary.memory_gbps == 3.1
    bands = canary_bands(host)
    assert bands.canaries == 12 and bands.memory_gbps is not None
    assert bands.memory_gbps.values == 7 and bands.cpu_loop_ns.values == 12


def test_a_host_with_too_few_canaries_flags_nothing_yet():
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    steady_history(host, start, count=MIN_HISTORY - 1)

    run = finish_with_canary(RunFactory(host=host), 400.0, 50.0, start + timedelta(hours=1))

    assert run.host_noise == {"outside_usual": False, "detail": ""}


def test_only_earlier_canaries_of_the_same_host_make_its_spread():
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    steady_history(host, start)
    # Another host's, and a later one of this host, do not count.
    steady_history(HostFactory(), start, count=10)
    finish_with_canary(RunFactory(host=host), 80.0, 2.0, start + timedelta(days=1))

    bands = canary_bands(host, before=start + timedelta(hours=1))

    assert bands.canaries == 10
    assert bands.cpu_loop_ns is not None and bands.cpu_loop_ns.median == pytest.approx(40.0)


def test_a_result_sent_twice_stores_its_canary_once():
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    run = RunFactory(host=host)
    document = {**events.result(run), "canary": canary(40.0, 2.0, start)}

    services.run_record_event(events.run_event(run, 1, "result", document))
    services.run_record_event(events.run_event(run, 2, "result", document))

    assert HostCanary.objects.filter(run=run).count() == 1


def test_the_rounds_spread_pairs_each_cell_with_the_first_round_by_round():
    host = HostFactory()
    rounds_experiment(host)
    # Neither another host's rounds nor an experiment in blocks count.
    rounds_experiment(HostFactory(), base=[1000.0] * 6, ratios=[1.5, 0.5, 1.5, 0.5, 1.5, 0.5])
    blocks = rounds_experiment(host, ratios=[1.5, 0.5, 1.5, 0.5, 1.5, 0.5])
    Experiment.objects.filter(pk=blocks.pk).update(execution=Experiment.Execution.BLOCKS)

    spread = rounds_spread(host)

    faster = dict(enumerate([b * r for b, r in zip(ROUND_BASE, ROUND_RATIOS, strict=True)], 1))
    expected = paired_variance([(faster, dict(enumerate(ROUND_BASE, 1)))])
    assert spread.variance == expected
    assert spread.experiments == 1
    assert spread.round_seconds == 180
    assert spread.paired_sd_pct < 1 < 30 < spread.unpaired_sd_pct


def test_the_endpoint_says_the_rounds_each_design_needs(client, user):
    host = HostFactory()
    rounds_experiment(host)
    client.force_login(user)

    answer = client.get(reverse("host-rounds-needed", args=[host.pk]), {"effect_pct": "5"}).json()

    spread = rounds_spread(host)
    expected = rounds_by_design(spread.variance.unpaired, spread.variance.paired, None, 5.0)
    assert [(d["design"], d["rounds"], d["measured"]) for d in answer["designs"]] == [
        (found.design, found.rounds, found.measured) for found in expected
    ]
    unpaired, paired, duet = answer["designs"]
    assert paired["seconds"] == paired["rounds"] * 180
    assert duet["rounds"] is None and duet["seconds"] is None
    assert duet["note"].startswith("not measured yet") and "duet option" in duet["note"]
    assert answer["spread"]["pairs"] == 6 and answer["spread"]["experiments"] == 1
    assert answer["duet_spread"] is None


# A duet A/A's rounds: each round's two windows at once, their ratio within about 2 %
# while the host's speed moves the rounds by half.
DUET_BASE = [24000.0, 12000.0, 30000.0, 18000.0, 26000.0, 15000.0, 22000.0, 28000.0]
DUET_RATIOS = [1.02, 0.99, 1.01, 0.97, 1.03, 1.00, 0.98, 1.01]


def test_a_hosts_duet_rounds_size_the_duet_slot_apart_from_its_other_rounds(client, user):
    host = HostFactory()
    rounds_experiment(host)
    rounds_experiment(host, base=DUET_BASE, ratios=DUET_RATIOS, duet=True)
    client.force_login(user)

    answer = client.get(reverse("host-rounds-needed", args=[host.pk]), {"effect_pct": "5"}).json()

    back_to_back, duet_spread = rounds_spread(host), rounds_spread(host, duet=True)
    # The duet's rounds stay out of the back-to-back spread, and make the duet's own.
    faster = dict(enumerate([b * r for b, r in zip(ROUND_BASE, ROUND_RATIOS, strict=True)], 1))
    assert back_to_back.variance == paired_variance([(faster, dict(enumerate(ROUND_BASE, 1)))])
    duet_cell = dict(enumerate([b * r for b, r in zip(DUET_BASE, DUET_RATIOS, strict=True)], 1))
    assert duet_spread.variance == paired_variance([(duet_cell, dict(enumerate(DUET_BASE, 1)))])
    assert duet_spread.round_seconds == 90, "a duet round is one window of both cells"
    assert answer["duet_spread"]["pairs"] == 8
    assert answer["duet_spread"]["paired_sd_pct"] == round(duet_spread.paired_sd_pct, 2)
    *_others, duet = answer["designs"]
    expected = rounds_by_design(None, None, duet_spread.variance.paired, 5.0)[-1]
    assert (duet["rounds"], duet["measured"]) == (expected.rounds, True)
    assert duet["seconds"] == expected.rounds * 90
    assert "from 8 duet rounds of 1 experiment" in duet["note"]


def test_a_host_with_only_duet_rounds_sizes_the_duet_and_says_the_others_are_unmeasured(
    client, user
):
    host = HostFactory()
    rounds_experiment(host, base=DUET_BASE, ratios=DUET_RATIOS, duet=True)
    client.force_login(user)

    answer = client.get(reverse("host-rounds-needed", args=[host.pk]), {"effect_pct": "5"}).json()

    assert answer["spread"] is None and answer["duet_spread"]["experiments"] == 1
    unpaired, paired, duet = answer["designs"]
    assert [(d["rounds"], d["measured"]) for d in (unpaired, paired)] == [(None, False)] * 2
    assert "other than duets" in paired["note"]
    assert duet["measured"] and duet["rounds"] is not None


def test_the_endpoint_answers_a_host_without_rounds_and_refuses_a_bad_effect(client, user):
    host = HostFactory()
    client.force_login(user)
    url = reverse("host-rounds-needed", args=[host.pk])

    assert client.get(url).json()["spread"] is None
    assert client.get(url, {"effect_pct": "0"}).status_code == 400
    assert client.get(url, {"effect_pct": "lots"}).status_code == 400


def test_the_host_page_shows_its_canaries_points_and_spread(client, user):
    host, start = HostFactory(), datetime(2026, 11, 1, tzinfo=UTC)
    steady_history(host, start)
    finish_with_canary(RunFactory(host=host), 52.0, 2.0, start + timedelta(hours=1), 5.5)
    run = RunFactory(host=host, status=Run.Status.SUCCEEDED)
    ResultFactory(run=run, index=0, cpu_steal_percent=3.5, foreign_cpu_percent=26.87)
    rounds_experiment(host)
    client.force_login(user)

    page = client.get(reverse("host-detail", args=[host.pk])).content.decode()

    figure = json.loads(
        re.search(r'<script id="fig-host-canary" type="application/json">(.*?)</script>', page)[1]
    )
    cpu, cpu_flagged, fsync, _fsync_flagged, memory, _memory_flagged = figure["data"]
    assert len(cpu["y"]) == len(fsync["y"]) == 11 and cpu_flagged["y"] == [52.0]
    # Agents before the memory copy left gaps in its row.
    assert memory["y"] == [None] * 10 + [5.5] and memory["yaxis"] == "y3"
    assert len(figure["layout"]["shapes"]) == 2, "each row with enough canaries has its band"
    assert "too few canaries with it yet" in page
    points = re.search(r'<table data-noise="points">(.*?)</table>', page, re.S)[1]
    assert "3.5 %" in points and "26.9 %" in points
    spread = rounds_spread(host)
    assert (
        f"spreads {spread.paired_sd_pct:.1f} % paired, {spread.unpaired_sd_pct:.1f} % unpaired"
        in page
    )
    assert "no duet experiment on this host yet" in page
    rounds_experiment(host, base=DUET_BASE, ratios=DUET_RATIOS, duet=True)
    page = client.get(reverse("host-detail", args=[host.pk])).content.decode()
    duet = rounds_spread(host, duet=True)
    assert f"(two windows at once) spreads {duet.paired_sd_pct:.1f} % (8 rounds of 1 duet" in page
