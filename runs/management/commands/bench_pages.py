"""`scripts/bench pages`: how fast the pages of hour-long runs and big comparisons are.

Creates synthetic runs in the (throw-away) lab database, builds the timeline
digests as the control worker does (a finished run's when it ends, a running
run's in the reaper's pass: runs.timelines.store, timed), starts the web app with uvicorn, signs
in, views one short run's page untimed (the server process's first request
pays for its imports and connection), and times each page over HTTP: the
first view and the median of the next views, with the payload. Also counts
the queries one poll of the live stream makes for a running four-hour run.
Prints the figures as a Markdown table (docs/benchmarks.md keeps the last ones).
"""

import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs import selectors, services
from runs.management import synthetic
from runs.models import Run
from runs.sse import POLL_S
from runs.timelines import store

THROWAWAY_ENV = "BENCHLAB_THROWAWAY_DB"
SERVER_START_S = 60.0


def machine() -> str:
    """CPU model and count, memory, Python and the lab database's engine and version."""
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    memory = psutil.virtual_memory().total / 2**30
    database = connection.vendor
    if database == "postgresql":
        database += f" {connection.cursor().connection.info.server_version}"
    return (
        f"{model}, {os.cpu_count()} CPUs, {memory:.0f} GiB, Python {platform.python_version()}, "
        f"lab database {database}"
    )


def require_throwaway_database() -> None:
    if os.environ.get(THROWAWAY_ENV) != "1":
        raise CommandError(
            "This benchmark fills the lab database with synthetic runs: run it as "
            "`scripts/bench pages` (or `scripts/bench ingest`), which gives it a throw-away one."
        )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class WebApp:
    """uvicorn serving the lab on a free loopback port, on the same database."""

    def __init__(self) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "uvicorn", "benchlab.asgi:application", "--host",
                "127.0.0.1", "--port", str(self.port), "--log-level", "warning"]  # fmt: skip
        self.process = subprocess.Popen(argv, cwd=settings.BASE_DIR)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise CommandError(f"uvicorn did not listen on port {self.port} in {SERVER_START_S} s")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def fetch(url: str, cookie: str) -> tuple[float, int]:
    """(seconds, bytes) of one GET, body read in full."""
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 - loopback only
        body = response.read()
        if response.status != 200:
            raise CommandError(f"{url} answered {response.status}")
    return time.perf_counter() - started, len(body)


class Command(BaseCommand):
    help = "Time the pages of hour-long runs through uvicorn (synthetic runs, throw-away DB)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, default=20, help="runs in the big comparison")
        parser.add_argument("--seconds", type=int, default=3600, help="length of their point")
        parser.add_argument("--views", type=int, default=5, help="timed views per page")

    def handle(self, *args: object, **options: int) -> None:
        require_throwaway_database()
        self.stderr.write(f"creating {options['runs']} runs of {options['seconds']} s ...")
        pages, live_run, warm_up = self.create(options["runs"], options["seconds"])
        built = self.build_digests()
        cookie = self.sign_in()
        app = WebApp()
        try:
            app.wait_ready()
            fetch(app.base + warm_up, cookie)
            rows = [self.time_page(app.base + url, cookie, options["views"], what)
                    for what, url in pages]  # fmt: skip
        finally:
            app.stop()
        self.stdout.write(f"Machine: {machine()}\n")
        self.stdout.write("| page | first view | median of next views | payload |")
        self.stdout.write("|---|---|---|---|")
        for row in rows:
            self.stdout.write(row)
        self.stdout.write(f"\nDigests built by the control worker's task: {built}")
        self.stdout.write(f"\nLive stream of a running 4-hour run: {self.live_queries(live_run)}")

    def create(self, count: int, seconds: int) -> tuple[list[tuple[str, str]], Run, str]:
        """The pages to time (what, url), the running run, and the page viewed untimed first."""
        big = synthetic.experiment("bench-big")
        runs = [synthetic.long_run(big, [seconds], seed=n) for n in range(count)]
        user = get_user_model().objects.get_or_create(username="bench")[0]
        compare = services.comparison_create(user, "big", runs, runs[0])
        _link, share_token = services.share_link_create(user, compare)
        four_hours = synthetic.long_run(synthetic.experiment("bench-4h"), [3600] * 4, seed=99)
        live = synthetic.experiment("bench-live")
        running = synthetic.long_run(live, [3600] * 4, seed=98, running=True)
        short = synthetic.experiment("bench-short")
        few = [synthetic.long_run(short, [120], seed=200 + n) for n in range(3)]
        small = services.comparison_create(user, "small", few, few[0])
        pages = [
            (f"compare page, {count} runs x {seconds:,} s", "comparison-detail", compare.pk),
            (f"shared compare page, {count} runs x {seconds:,} s", "shared", share_token),
            (f"experiment page, {count} runs x {seconds:,} s", "experiment-detail", big.pk),
            (f"run page, one run of {seconds:,} s", "run-detail", runs[1].pk),
            ("run page, finished 4-hour run (4 points x 3,600 s)", "run-detail", four_hours.pk),
            (
                "run page, running 4-hour run (digest stored by the control worker)",
                "run-detail",
                running.pk,
            ),
            ("compare page, 3 runs x 120 s", "comparison-detail", small.pk),
        ]
        urls = [(what, reverse(name, args=[key])) for what, name, key in pages]
        return urls, running, reverse("run-detail", args=[few[-1].pk])

    def build_digests(self) -> str:
        """Build the digests as the control worker does: each finished run's when it ends,
        the running run's in the reaper's pass."""
        finished = list(
            Run.objects.filter(status__in=Run.FINAL_STATES).values_list("pk", flat=True)
        )
        self.stderr.write(f"building the digests of {len(finished)} finished runs ...")
        started = time.perf_counter()
        for pk in finished:
            store.digest_refresh(pk)
        seconds = time.perf_counter() - started
        started = time.perf_counter()
        running = store.digests_refresh_running()
        running_s = time.perf_counter() - started
        return (
            f"{len(finished)} finished runs in {seconds:,.1f} s, {running} running run in"
            f" {running_s:,.1f} s (not on any page view)."
        )

    def sign_in(self) -> str:
        client = Client()
        client.force_login(get_user_model().objects.get(username="bench"))
        return (
            f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        )

    def time_page(self, url: str, cookie: str, views: int, what: str) -> str:
        self.stderr.write(f"timing {what} ...")
        first, _size = fetch(url, cookie)
        timed = [fetch(url, cookie) for _ in range(views)]
        median = statistics.median(seconds for seconds, _ in timed)
        size = timed[-1][1]
        return (
            f"| {what} | {first * 1000:,.0f} ms | {median * 1000:,.0f} ms | {size / 1000:,.0f} KB |"
        )

    def live_queries(self, run: Run) -> str:
        cursor = selectors.live_cursor(run)
        with CaptureQueriesContext(connection) as captured:
            selectors.rows_after(run.pk, cursor)
        return (
            f"{len(captured.captured_queries)} queries per poll of the stream "
            f"(one poll every {POLL_S} s per viewer), whatever the run's length."
        )
