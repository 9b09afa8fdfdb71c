"""The estimates of the presets, reduced to minutes, against what then happens
(`scripts/bench estimates`; figures in docs/benchmarks.md, "Run estimates against what then
happens"). Not part of the suite (the file is not named test_*.py): it runs for about ten
minutes on a quiet 2-core machine, longer under load.

One lab (a control worker and a real agent, as the integration tests start them) on a host
that has learned nothing: a warm-up (the smoke preset, once) teaches it as a first run
would, then every preset in BENCH_ESTIMATES_PRESETS is scheduled from its form values
(runs.presets.form_initial) reduced as REDUCED says. Before each starts, the schedule form's
live estimate (`schedule/estimate`, the form's values) and Review's (the draft's
`/api/experiments/<id>/estimate/`) are asked; each preset then runs, and its actual time is
from the start request to its last run's end. Prints one table row per preset: both
estimates, the actual time and the error (the target: within 25 %).

Preset 5 builds PostgreSQL 14.3 from a release URL this lab may not reach: its two builds
are built here from the 15.18 release tarball `scripts/fetch-pg-sources` keeps (16 kB
blocks, the buffer-partitions change to lwlock.h in one; -O2 and a -D naming this bench's
start, so the agent's cache cannot hold them and both compile, as a new preset's would).
The agent may build from that directory and apply the lab's patches. A key listed twice
is measured twice: the second time a source-build preset's builds are new ones again,
and the host has learned how long its builds take.

Settings (environment): BENCH_ESTIMATES_PRESETS (smoke,tuning-matrix,wal-sync-storage,
version-sweep,memory-profiles,source-build-partitions: the keys of
runs/presets/definitions.py that REDUCED knows), BENCH_ESTIMATES_OUT
(scratch/bench-estimates.md: the table, also printed).
"""

import os
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from runs.models import ConfigProfile, Experiment, Host, PgBuild, Run, Workload
from runs.presets import definitions
from runs.presets.loading import find, form_initial, load_presets
from runs.services.access.tokens import api_token_create
from tests.integration.api import start
from tests.integration.conftest import Lab, running_lab
from tests.runs.factories import UserFactory
from tests.source_builds import SMALL_FLAGS, sources_dir, tarball

pytestmark = [pytest.mark.integration, pytest.mark.timeout(2 * 3600)]

# The estimate's target: within this share of what happens.
TARGET = 0.25
RUN_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Reduced:
    """A preset reduced to minutes: the catalogue entries it keeps by name (None: all the
    preset's) and the form values it overrides."""

    builds: list[str] | None = None
    config_profiles: list[str] | None = None
    workloads: list[str] | None = None
    values: Mapping[str, object] = field(default_factory=dict)


PG16 = [definitions.PG16[0]]
REDUCED = {
    "smoke": Reduced(),
    # 1 build of 2, 2 profiles of 5, TPC-B (scale 20) of 2 workloads, WAL beside the data,
    # 2 client counts of 4, 300 transactions per client instead of 2,000, 1 repeat of 3.
    "tuning-matrix": Reduced(
        PG16,
        ["defaults", "tuning 2: memory"],
        ["TPC-B scale 20"],
        {"storage": "default", "clients": [5, 10], "transactions": 300, "repeats": 1},
    ),
    # PostgreSQL 16 of 16, 17 and 18; select and update by key of 6 workloads; 3 client
    # counts of 6; 5 s points instead of 30 s.
    "version-sweep": Reduced(
        PG16,
        None,
        ["select-only scale 10", "update by key scale 10"],
        {"clients": [1, 4, 16], "duration_s": 5},
    ),
    # Both memory profiles, select-only at scale 50 of 2 workloads, pgbench on the server
    # host (no client host), 3 client counts of 4, 5 s points instead of 30 s.
    "memory-profiles": Reduced(
        None,
        None,
        ["select-only scale 50"],
        {"client_host": None, "clients": [1, 4, 8], "duration_s": 5},
    ),
    # The three wal_sync_method profiles on the default storage (one target), 5 s points
    # instead of 60 s.
    "wal-sync-storage": Reduced(values={"storage": "default", "duration_s": 5}),
    # Both source builds (built from 15.18 here: LOCAL_BUILDS), 2 client counts of 3, 5 s
    # points instead of 20 s.
    "source-build-partitions": Reduced(values={"clients": [2, 8], "duration_s": 5}),
}


def setting(name: str, default: str) -> str:
    return os.environ.get(f"BENCH_ESTIMATES_{name}", default)


def build_locally(key: str, tag: str) -> None:
    """Point preset `key`'s source builds at the 15.18 release tarball this machine keeps,
    16 kB blocks, the lwlock.h part of the buffer-partitions patch where the preset's build
    has one, -O2 plus a -D of `tag` no cache holds: each time new builds, to compile."""
    preset = find(key)
    assert preset is not None, key
    fresh = f"-O2 -DBENCH_ESTIMATES_RUN={tag}"
    source = {"kind": "path", "location": str(tarball(sources_dir(), "15")), "ref": None}
    partitions = {
        "name": "buffer-partitions-256",
        "diff": definitions.LWLOCK_PARTITIONS_256_PATCH,
        "strip": 1,
    }
    for source_build in preset.source_builds:
        patched = bool(source_build.definition["patches"])
        definition = {
            "source": source,
            "configure_flags": [*SMALL_FLAGS, *definitions.BLOCKS_16K],
            "patches": [partitions] if patched else [],
            "cflags": fresh,
        }
        PgBuild.objects.filter(name=source_build.name).update(version="15", definition=definition)


@pytest.fixture
def lab(transactional_db: None, tmp_path: Path) -> Iterator[Lab]:
    """The integration lab, its agent allowed to build from the release tarballs and to
    apply the lab's patches (preset 5)."""
    agent_args = [
        "--allow-source-builds", "--build-source", str(sources_dir()), "--allow-user-patches",
    ]  # fmt: skip
    with running_lab(tmp_path, agent_args=agent_args) as running:
        yield running


def _pks(model: type[PgBuild | ConfigProfile | Workload], names: list[str]) -> list[int]:
    found = dict(model.objects.filter(name__in=names).values_list("name", "pk"))
    assert set(found) == set(names), (model.__name__, names, found)
    return [found[name] for name in names]


def form_values(key: str, host: Host, name: str) -> dict[str, object]:
    """The schedule form's values for preset `key` reduced as REDUCED says, on `host`."""
    preset, reduced = find(key), REDUCED[key]
    assert preset is not None, key
    values = {**form_initial(preset), **reduced.values, "name": name, "hosts": [host.pk]}
    if reduced.builds is not None:
        values["builds"] = _pks(PgBuild, reduced.builds)
    if reduced.config_profiles is not None:
        values["config_profiles"] = _pks(ConfigProfile, reduced.config_profiles)
    if reduced.workloads is not None:
        values["workloads"] = _pks(Workload, reduced.workloads)
    return _as_posted(values)


def _as_posted(values: Mapping[str, object]) -> dict[str, object]:
    """Form values as a browser posts them: a list of numbers in one text field is
    comma-separated, an unset value empty, an unticked box absent."""
    posted: dict[str, object] = {}
    for name, value in values.items():
        if value is None:
            posted[name] = ""
        elif value is True:
            posted[name] = "on"
        elif value is not False:
            posted[name] = ",".join(map(str, value)) if name == "clients" else value
    return posted


@dataclass(frozen=True)
class Measured:
    """One preset: the form's and Review's estimates, the actual seconds, the runs."""

    preset: str
    form_s: int
    review_s: int
    actual_s: float
    runs: int
    rates: str | None

    def row(self) -> str:
        error = (self.review_s - self.actual_s) / self.actual_s
        rates = f" ({self.rates} tps)" if self.rates else ""
        return (
            f"| {self.preset} | {self.runs} | {self.form_s} s | {self.review_s} s{rates} "
            f"| {self.actual_s:.0f} s | {error:+.0%} |"
        )


def measure(client: Client, api: APIClient, lab: Lab, key: str, host: Host, label: str) -> Measured:
    """Schedule preset `key` reduced, ask the form's and Review's estimates, run it."""
    values = form_values(key, host, label)
    live = client.get(reverse("schedule-estimate"), values)
    assert live.status_code == 200, live.content
    posted = client.post(reverse("schedule"), {**values, "review": "1"})
    assert posted.status_code == 302, posted.content.decode()[-3000:]
    experiment = Experiment.objects.get(name=label)
    review = api.get(f"/api/experiments/{experiment.pk}/estimate/").json()
    began = time.monotonic()
    run_ids = start(api, experiment.pk)
    runs = [lab.wait_terminal(pk, timeout=RUN_TIMEOUT_S) for pk in run_ids]
    actual = time.monotonic() - began
    assert all(run.status == Run.Status.SUCCEEDED for run in runs), lab.logs()
    return Measured(
        label,
        live.json()["estimated_seconds"],
        review["estimated_seconds"],
        actual,
        len(runs),
        review["transaction_rates"],
    )


def test_estimates_of_the_presets_against_what_happens(lab: Lab) -> None:
    load_presets()
    host = lab.wait_registered()
    user = UserFactory()
    client, api = Client(), APIClient()
    client.force_login(user)
    api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user)[1]}")
    keys = setting("PRESETS", ",".join(REDUCED)).split(",")
    rows = [measure(client, api, lab, "smoke", host, "warm-up: smoke, nothing learned")]
    for number, key in enumerate(keys, start=1):
        preset = find(key)
        if preset is not None and preset.source_builds:
            build_locally(key, f"{int(time.time())}_{number}")
        label = key if keys.index(key) == number - 1 else f"{key}, again ({number})"
        rows.append(measure(client, api, lab, key, host, label))

    table = [
        "| preset (reduced) | runs | form | Review | actual | error |",
        "|---|---|---|---|---|---|",
        *(row.row() for row in rows),
    ]
    Path(setting("OUT", "scratch/bench-estimates.md")).write_text("\n".join(table) + "\n")
    sys.stdout.write("\n" + "\n".join(table) + "\n")
    for row in rows:
        assert row.form_s == row.review_s, f"{row.preset}: the form and Review disagree"
    missed = [row.preset for row in rows[1:] if abs(row.review_s / row.actual_s - 1) > TARGET]
    sys.stdout.write(f"outside {TARGET:.0%}: {', '.join(missed) or 'none'}\n")
