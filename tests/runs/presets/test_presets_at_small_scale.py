"""Each preset starts and runs, at small scale, with real PostgreSQL and real pgbench.

The test schedules the preset as the form would (its catalogue entries, client sweep,
storage layouts, client host), scaled down to keep the suite short: builtin datasets at
scale 1, 1 s points, the first two client counts, one repeat in blocks, and on the longer
axes only the entries each test names. Each run's job executes in this process as an
agent would execute it (preset 4: its server and client halves in two threads, talking over
real Redis), its events are stored as the control worker stores them, and the test reads
the points and the experiment's chart.
"""

import json
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.config import AgentConfig
from agents.contract.wire import dispatch_key
from agents.events import EventEmitter
from agents.job import run_job
from agents.pair.client_half import run_client_half
from agents.pair.link import PairLink
from runs import presets, services
from runs.forms.experiments import parse_storage_layouts
from runs.models import ConfigProfile, Experiment, Host, HostSample, PgBuild, Run, Workload
from runs.services.hosts.events import record_event
from runs.views.content.context import experiment_context
from tests.runs.factories import HostFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def storage() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="benchlab-presets-", dir="/var/tmp"))
    root.chmod(0o755)
    yield root
    for path in sorted(root.rglob("*"), reverse=True):
        path.unlink() if path.is_file() or path.is_symlink() else path.rmdir()
    root.rmdir()


def agent_config(storage: Path, name: str) -> AgentConfig:
    return AgentConfig(
        name=name, storage={"default": storage / name, "wal": storage / f"{name}-wal"}
    )


def schedule_small(preset: presets.Preset, keep: dict[str, list[str]], client: bool) -> Experiment:
    """The preset as the form fills it in, scaled down; `keep` names the entries kept per axis."""
    presets.load_presets()
    names = [w["name"] for w in preset.workloads]
    Workload.objects.filter(name__in=names, init_steps="dtgvp").update(scale=1)
    server = HostFactory(name="server")
    data = {
        "name": preset.title,
        "description": preset.description,
        "hosts": [server],
        "client_host": HostFactory(name="client") if client else None,
        "builds": list(
            PgBuild.objects.filter(name__in=keep.get("builds", [n for n, _ in preset.builds]))
        ),
        "config_profiles": list(
            ConfigProfile.objects.filter(
                name__in=keep.get("profiles", [p.name for p in preset.config_profiles])
            )
        ),
        "workloads": list(Workload.objects.filter(name__in=keep.get("workloads", names))),
        "storage_layouts": parse_storage_layouts(keep.get("storage", [preset.storage])[0]),
        "clients": preset.sweep["clients"][:2],
        "duration_s": 1,
        "transactions": None,
        "repeats": 1,
        "execution": "blocks",
        "between_points": "none",
    }
    return services.experiment_schedule(UserFactory(), data, start=True).experiment


def execute(experiment: Experiment, storage: Path) -> list[Run]:
    """Every run's job, in queue order, as its agent(s) would run it; events stored after."""
    for run in experiment.runs.order_by("position"):
        events: list[dict] = []
        config = agent_config(storage, run.host.name)
        emitter = EventEmitter(
            [events.append], run_id=run.run_id, token=run.token, agent=run.host.name
        )
        if run.client_host is None:
            run_job(run.spec, config, emitter)
        else:
            run_pair(run, config, agent_config(storage, run.client_host.name), emitter)
        for event in events:
            record_event(json.loads(json.dumps(event)))
    return list(experiment.runs.order_by("position"))


def run_pair(run: Run, config: AgentConfig, client_config: AgentConfig, emitter: EventEmitter):
    """The server half here, the client half in a thread (their own Redis connections)."""
    dispatch = dispatch_key(run.run_id, run.token)
    client_spec = {
        **run.spec,
        "network": {**run.spec["network"], "role": "client", "peer": run.host.name},
    }
    client_link = PairLink.open(client_config, dispatch, "client", run.host.name)
    client = threading.Thread(
        target=run_client_half, args=(client_spec, client_config, client_link, lambda: False)
    )
    client.start()
    server_link = PairLink.open(config, dispatch, "server", run.client_host.name)
    run_job(run.spec, config, emitter, link=server_link)
    client.join(timeout=60)


def check_points_and_chart(experiment: Experiment, runs: list[Run]) -> list:
    """Every run succeeded with a point per client count; the chart has a line per cell."""
    clients = sorted(experiment.clients)
    for run in runs:
        assert run.status == Run.Status.SUCCEEDED, (run, run.error_message)
        assert sorted(r.clients for r in run.results.all()) == clients
        assert all(r.tps and r.tps > 0 for r in run.results.all())
    context = experiment_context(experiment, "tps", read_only=True, urls={})
    figure = context["figure"]
    assert len(figure["data"]) == len(runs)
    xs = clients if len(clients) > 1 else [f"{clients[0]} clients"]  # one count: bars
    assert all(list(trace["x"]) == xs for trace in figure["data"])
    return figure["data"]


def test_preset_1_tuning_matrix_runs_version_a_and_b_tpcb_and_tpcc_like_with_wal_apart(storage):
    preset = presets.find("tuning-matrix")
    keep = {"profiles": ["tuning 4: fsync off"], "storage": ["default:wal"]}
    experiment = schedule_small(preset, keep, client=False)

    runs = execute(experiment, storage)

    assert len(runs) == 2 * 2, "versions x workloads at the last (cumulative) profile"
    check_points_and_chart(experiment, runs)
    assert {run.install["major"] for run in runs} == {16, 17}
    assert all(run.storage_wal == "wal" for run in runs)
    tpcc = [r for run in runs for r in run.results.all() if run.workload.name.startswith("TPC-C")]
    assert tpcc and all(len(result.scripts) == 5 for result in tpcc)
    fsync = [run for run in runs if run.config_profile.name == "tuning 4: fsync off"]
    assert all(
        {"name": "fsync", "setting": "off"}.items() <= s.items()
        for run in fsync
        for s in run.effective_settings
        if s["name"] == "fsync"
    )


def test_preset_2_wal_sync_methods_run_the_plpgsql_upsert_with_statement_latencies(storage):
    preset = presets.find("wal-sync-storage")
    experiment = schedule_small(preset, {}, client=False)

    runs = execute(experiment, storage)

    assert len(runs) == 3, "one run per wal_sync_method"
    check_points_and_chart(experiment, runs)
    methods = {
        s["setting"]
        for run in runs
        for s in run.effective_settings
        if s["name"] == "wal_sync_method"
    }
    assert methods == {"fdatasync", "fsync", "open_sync"}
    assert all(r.statements for run in runs for r in run.results.all()), "-r"


def test_preset_3_version_sweep_runs_one_insert_process_per_table_on_two_versions(storage):
    preset = presets.find("version-sweep")
    keep = {
        "builds": ["PostgreSQL 16", "PostgreSQL 17"],
        "workloads": [
            "select-only scale 10",
            f"inserts, {presets.INSERT_TABLES} tables, one process each",
        ],
    }
    experiment = schedule_small(preset, keep, client=False)

    runs = execute(experiment, storage)

    assert len(runs) == 2 * 2
    check_points_and_chart(experiment, runs)
    inserts = [r for run in runs for r in run.results.all() if run.workload.processes]
    assert inserts
    for result in inserts:
        assert len(result.processes) == presets.INSERT_TABLES
        assert result.tps == pytest.approx(sum(p["tps"] for p in result.processes), abs=1e-3)


def test_preset_4_memory_profiles_run_pgbench_on_the_client_host_with_vacuum_first(storage):
    preset = presets.find("memory-profiles")
    keep = {"workloads": ["TPC-B scale 50, vacuum first (-v)"]}
    experiment = schedule_small(preset, keep, client=True)

    runs = execute(experiment, storage)

    assert len(runs) == 2, "both memory profiles, TPC-B with -v"
    check_points_and_chart(experiment, runs)
    for run in runs:
        assert run.client_host == Host.objects.get(name="client")
        assert run.network["transport"] == "tcp" and run.network["select1_ms"] > 0
        assert run.host_samples.filter(role=HostSample.Role.CLIENT).exists()
        assert run.host_samples.filter(role=HostSample.Role.SERVER).exists()
        argv = run.results.first().argv
        assert argv[argv.index("-h") + 1] == "127.0.0.1"
        assert "-v" in argv
