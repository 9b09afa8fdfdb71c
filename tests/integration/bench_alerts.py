"""Alerts through the real lab (`scripts/bench alerts`; figures in docs/benchmarks.md,
"Alerts confirmed by a measurement"). Not part of the suite (the file is not named
test_*.py): each case is 12 nightly occurrences of source builds, about 15 minutes.

The lab: a control worker and a real agent allowed to build from two repositories of
tests/bisect_repo.py (PostgreSQL 15.18 as released, tagged `base`, then 12 commits), a
webhook receiver of the bench's own on 127.0.0.1 (allowed by
BENCHLAB_WEBHOOK_ALLOWED_NETWORKS), and per case a series whose template builds the
branch `nightly` of a repository at -O0. Before each occurrence the bench moves the branch
to the next commit and lets the beat's scheduler fire the series (its every-minute
schedule made due: no beat runs otherwise), as a nightly job following a branch would;
it waits for the occurrence's run and for the control worker's detection, then for the
host's CPUs to be quiet (QUIET_*), then goes on. After the 12th it waits for every
alert's confirming A/B to conclude and for its delivery.

1. regression: commit BENCH_ALERTS_REGRESSION_AT (7) adds a busy loop of
   BENCH_ALERTS_SPIN iterations to every simple-protocol statement (exec_simple_query).
   Expected: an alert (tps, latency or p95) whose change point is that occurrence,
   confirmed by its A/B before the webhook received it; every POST received is a
   confirmed alert's. What a spin costs depends on the CPU and on how fast the rest of a
   statement is: on a 2-vCPU AMD EPYC VM at -O0 running one-client select-only at about
   7,500 tps, 25,000 iterations made about -4 % and 120,000 about -26 %, so the default,
   48,000, plants about 10 %; on a VM of the same kind at 12,800 tps 48,000 made -15 %
   and 29,000 about -10 % (docs/benchmarks.md, "Run 5"). Check the tps of the first
   occurrences and set the spin for the size you mean to plant.
2. aa: a repository whose 12 commits are all harmless (a comment in a file the server's
   build does not read, or in bool.c). Expected: no alert confirmed, no POST.
3. host: the A/A's commits again (their builds cached), with a CPU burner on every CPU
   during occurrences BENCH_ALERTS_SLOW (6,7), started before the fire and stopped
   when the occurrence's run ended. Expected: the slowdown reported as "host changed",
   no alert confirmed, no POST.

The template: select-only (simple protocol, where the spin is), scale 1,
BENCH_ALERTS_CLIENTS (1) clients, BENCH_ALERTS_DURATION (5) s points, 3 repeats; a
confirming A/B takes at most 12 rounds (runs/services/history/confirm.py). One JSON line
per case goes to BENCH_ALERTS_OUT (scratch/bench-alerts.jsonl) and stdout; the
assertions come after every case ran.
"""

import json
import multiprocessing
import multiprocessing.synchronize
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest
from django.utils import timezone

from runs.models import (
    Alert,
    ChangePoint,
    Experiment,
    HostCanary,
    Occurrence,
    PgBuild,
    Run,
    Series,
    Workload,
)
from runs.services.history.series import series_history, series_save
from tests.bisect_repo import bisect_repository, commit_subjects
from tests.integration.beat import tick_when_due
from tests.integration.conftest import Lab, running_lab
from tests.runs.factories import ConfigProfileFactory, UserFactory
from tests.source_builds import SMALL_FLAGS, UNOPTIMISED, sources_dir
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(6 * 3600)]

OCCURRENCES = 12
BRANCH = "nightly"
POLL_S = 1.0
# Before each fire the host must have been this quiet (percent of all its CPUs) for
# QUIET_SECONDS in a row, waiting at most QUIET_WITHIN_S: the lab's own start (the control
# worker's imports, the agent's registration and catalogues) once used 14 to 38 % of this
# 2-vCPU VM beside the first occurrence, and made its one-client select-only 60 % faster.
QUIET_PERCENT = 10.0
QUIET_SECONDS = 3
QUIET_WITHIN_S = 120.0
# Every alert waits for its confirming A/B; the A/Bs of one case run one after another.
CONCLUDED_WITHIN_S = 3600


def setting(name: str, default: str) -> str:
    return os.environ.get(f"BENCH_ALERTS_{name}", default)


class Webhook:
    """An HTTP receiver on 127.0.0.1 keeping every POST's body and when it came."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.append({"at": timezone.now(), "body": json.loads(body or b"{}")})
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _burn(stop: multiprocessing.synchronize.Event) -> None:
    while not stop.is_set():
        for _ in range(100_000):
            pass


@contextmanager
def cpu_burner() -> Iterator[None]:
    """One busy process per CPU until the block ends."""
    stop = multiprocessing.Event()
    processes = [
        multiprocessing.Process(target=_burn, args=(stop,), daemon=True)
        for _ in range(os.cpu_count() or 1)
    ]
    for process in processes:
        process.start()
    try:
        yield
    finally:
        stop.set()
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()


def wait_quiet() -> float:
    """Wait until the host's CPUs are quiet (QUIET_*); the seconds waited."""
    started = time.monotonic()
    quiet = 0
    while quiet < QUIET_SECONDS and time.monotonic() - started < QUIET_WITHIN_S:
        quiet = quiet + 1 if psutil.cpu_percent(interval=1.0) < QUIET_PERCENT else 0
    if quiet < QUIET_SECONDS:
        sys.stderr.write(f"the host was not quiet for {QUIET_WITHIN_S:g} s: firing anyway\n")
    return time.monotonic() - started


def move_branch(repository: Path, commit: str) -> None:
    subprocess.run(
        ["git", "-C", str(repository), "branch", "--force", BRANCH, commit],
        check=True, capture_output=True,
    )  # fmt: skip


def control_log(lab: Lab) -> str:
    return (lab.log_dir / "control.log").read_text(errors="replace")


def series_for(name: str, repository: Path, host_pk: int, owner, webhook: Webhook) -> Series:
    build = PgBuild.objects.create(
        name=f"{name} nightly",
        version="15",
        source="build",
        definition={
            "source": {"kind": "git", "location": str(repository), "ref": BRANCH},
            "configure_flags": SMALL_FLAGS,
            "patches": [],
            "cflags": UNOPTIMISED,
        },
        created_by=owner,
    )
    workload = Workload.objects.create(
        name=f"{name} select-only", scale=1, scripts=[{"builtin": "select-only", "weight": 1}]
    )
    template = Experiment.objects.create(
        name=f"{name} template",
        created_by=owner,
        storage_layouts=[{"data": "default", "wal": None}],
        clients=[int(setting("CLIENTS", "1"))],
        duration_s=int(setting("DURATION", "5")),
        repeats=3,
    )
    template.hosts.set([host_pk])
    template.builds.set([build])
    template.config_profiles.set([ConfigProfileFactory(settings={})])
    template.workloads.set([workload])
    return series_save(
        Series(
            name=f"bench alerts {name}", template=template, schedule="* * * * *",
            webhook_url=webhook.url, created_by=owner,
        )
    )  # fmt: skip


def occurrence_run(lab: Lab, series: Series, number: int) -> Occurrence:
    """Fire the series' next occurrence as the beat would and wait for its runs and for the
    detection after them."""
    tick_when_due(series)
    wait_for(
        lambda: series.occurrences.count() >= number,
        120, f"occurrence {number}", lab.logs, POLL_S,
    )  # fmt: skip
    occurrence = list(series.occurrences.order_by("fired_at"))[number - 1]
    runs = occurrence.experiment.runs
    wait_for(
        lambda: runs.exists() and not runs.exclude(status__in=Run.FINAL_STATES).exists(),
        1800, f"the run of occurrence {number}", lab.logs, POLL_S,
    )  # fmt: skip
    detected = re.compile(rf"series {series.pk}: \d+ new alerts")
    wait_for(
        lambda: len(detected.findall(control_log(lab))) >= number,
        120, f"the detection after occurrence {number}", lab.logs, POLL_S,
    )  # fmt: skip
    failed = runs.exclude(status=Run.Status.SUCCEEDED)
    assert not failed.exists(), [(run.pk, run.status, run.error_message) for run in failed]
    return occurrence


def concluded(lab: Lab, series: Series) -> None:
    """Wait until every alert of the series is concluded and every confirmed one delivered."""
    alerts = Alert.objects.filter(series=series)
    waiting = alerts.filter(state__in=(Alert.State.NEW, Alert.State.HOST), confirmation="")
    wait_for(
        lambda: not waiting.exists(), CONCLUDED_WITHIN_S, "every alert's A/B", lab.logs, POLL_S
    )
    confirmed = alerts.filter(state=Alert.State.CONFIRMED)
    wait_for(
        lambda: not confirmed.filter(delivery="").exists(), 60, "the deliveries", lab.logs, POLL_S
    )


def ab_ended_at(alert: Alert) -> str | None:
    """When the alert's confirming A/B's last run ended."""
    experiment = alert.confirmation_experiment
    if experiment is None:
        return None
    ended = experiment.runs.order_by("-finished_at").values_list("finished_at", flat=True)
    last = ended.first()
    return last.isoformat() if last else None


def case_row(name: str, series: Series, webhook: Webhook, started: float) -> dict:
    number = {
        pk: index
        for index, pk in enumerate(
            series.occurrences.order_by("fired_at").values_list("pk", flat=True), 1
        )
    }
    tps = {
        key: [round(point.mean, 1) for point in points]
        for key, points in series_history(series, "tps").items()
    }
    canaries = []
    for occurrence in series.occurrences.order_by("fired_at"):
        taken = HostCanary.objects.filter(run__experiment=occurrence.experiment)
        canaries.append(
            {
                "cpu_loop_ns": statistics.median(c.cpu_loop_ns for c in taken) if taken else None,
                "outside_usual": any(c.outside_usual for c in taken),
            }
        )
    changes = [
        {
            "metric": change.metric,
            "line": change.key,
            "at": number[change.after_occurrence_id],
            "change_pct": round(change.change_percent, 1),
            "interval": [round(change.low_percent, 1), round(change.high_percent, 1)],
            "p": change.p_value,
            "host_evidence": change.host_evidence,
        }
        for change in ChangePoint.objects.filter(series=series).order_by("pk")
    ]
    alerts = [
        {
            "alert": alert.pk,
            "metric": alert.metric,
            "line": alert.key,
            "at": number[alert.occurrence_id],
            "state": alert.state,
            "change_pct": round(alert.change_percent, 1),
            "confirmation": alert.confirmation,
            "ab": alert.confirmation_experiment_id,
            "ab_ended_at": ab_ended_at(alert),
            "delivery": alert.delivery,
        }
        for alert in Alert.objects.filter(series=series).order_by("pk")
    ]
    said = ("alert_id", "state", "confirmation")
    posts = [
        {"at": post["at"].isoformat(), **{key: post["body"].get(key) for key in said}}
        for post in webhook.received
        if post["body"].get("series_id") == series.pk
    ]
    return {
        "case": name,
        "minutes": round((time.monotonic() - started) / 60, 1),
        "tps": tps,
        "canaries": canaries,
        "change_points": changes,
        "alerts": alerts,
        "posts": posts,
        "load_avg_end": os.getloadavg(),
    }


def test_alerts_are_confirmed_before_anyone_is_told_and_a_slow_host_is_not_a_regression(
    transactional_db, tmp_path
):
    cases = setting("CASES", "regression,aa,host").split(",")
    regression_at = int(setting("REGRESSION_AT", "7"))
    spin = int(setting("SPIN", "48000"))
    slow = {int(n) for n in setting("SLOW", "6,7").split(",")}
    out = Path(setting("OUT", "scratch/bench-alerts.jsonl"))
    out.parent.mkdir(parents=True, exist_ok=True)
    regressed = bisect_repository(sources_dir(), OCCURRENCES, regression_at, spin)
    harmless = bisect_repository(sources_dir(), OCCURRENCES, 0, 0)
    repository = {"regression": regressed, "aa": harmless, "host": harmless}
    agent_args = [
        "--allow-source-builds", "--build-source", str(regressed), "--build-source", str(harmless),
    ]  # fmt: skip
    owner = UserFactory()
    webhook = Webhook()
    env = {"BENCHLAB_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32"}
    rows = []
    try:
        with running_lab(tmp_path, env=env, agent_args=agent_args) as lab:
            host = lab.wait_registered()
            for name in cases:
                started = time.monotonic()
                series = series_for(name, repository[name], host.pk, owner, webhook)
                commits = [sha for sha, _subject in commit_subjects(repository[name])]
                for number, commit in enumerate(commits, 1):
                    move_branch(repository[name], commit)
                    wait_quiet()
                    if name == "host" and number in slow:
                        with cpu_burner():
                            occurrence_run(lab, series, number)
                    else:
                        occurrence_run(lab, series, number)
                    sys.stderr.write(f"{name}: occurrence {number} of {len(commits)} measured\n")
                series.enabled = False  # its schedule ticks no more in the next cases
                series_save(series)
                concluded(lab, series)
                row = case_row(name, series, webhook, started)
                rows.append(row)
                with out.open("a") as file:
                    file.write(json.dumps(row) + "\n")
                sys.stdout.write(json.dumps(row) + "\n")
    finally:
        webhook.close()

    of = {row["case"]: row for row in rows}
    if "regression" in of:
        row = of["regression"]
        assert any(
            a["at"] == regression_at and a["state"] == Alert.State.CONFIRMED for a in row["alerts"]
        ), row["alerts"]
        delivered = {a["alert"]: a for a in row["alerts"]}
        for post in row["posts"]:
            alert = delivered[post["alert_id"]]
            assert post["state"] == Alert.State.CONFIRMED, post
            assert post["confirmation"].startswith("confirmed: slower by "), post
            ended = alert["ab_ended_at"]
            assert ended is not None, alert
            assert datetime.fromisoformat(ended) < datetime.fromisoformat(post["at"]), (alert, post)
        assert row["posts"], "no confirmed alert reached the webhook"
    if "aa" in of:
        row = of["aa"]
        assert not [a for a in row["alerts"] if a["state"] == Alert.State.CONFIRMED], row["alerts"]
        assert row["posts"] == [], row["posts"]
    if "host" in of:
        row = of["host"]
        assert any(a["state"] == Alert.State.HOST for a in row["alerts"]), row["alerts"]
        assert not [a for a in row["alerts"] if a["state"] == Alert.State.CONFIRMED], row["alerts"]
        assert row["posts"] == [], row["posts"]
