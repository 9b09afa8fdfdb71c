"""A duet: two real PostgreSQL 16 clusters and two real pgbench at once on this host.

Each side runs on its own half of the CPUs (its cpuset cgroup and its affinity,
read from /proc), the two sides' measuring windows start together (the first
transaction of each point's pgbench transaction log, on both sides), and
nothing is left after the duet, however it ended.
"""

import os
import statistics
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.config import AgentConfig
from agents.contract.reports.results import ResultDocument
from agents.cpusets import CPUSET_V1_MOUNT, halves, host_cpus, parse_cpu_list
from agents.duet import DuetSide, run_duet
from agents.events import EventEmitter
from agents.pgbench import point_log
from agents.postgres.cluster.directories import usable_job_id
from tests.agents.jobs import Recorder, small_spec

# Both sides' first transactions of a point complete within this of each other, in the
# median point: the barrier wakes the waiting side within milliseconds, then each side
# launches its pgbench (sandbox, connection) on its own CPU, which on a quiet 2-CPU
# machine differ by about 0.1 s and by up to 0.7 s with other test runs on it.
START_BOUND_S = 1.0
# Without the barrier the sides start SETUP_DELAY_S apart at every point; with it, no
# point's start is more than half that apart, even when a loaded machine holds one side's
# launch back (2.0 s once in CI, where three test workers share two CPUs).
SETUP_DELAY_S = 6


def side_spec(run_id: str, **overrides: Any) -> dict[str, Any]:
    """A side: three 2-second points at 1 client, every transaction logged; a dict
    override is merged into its section."""
    sections: dict[str, Any] = {
        "sweep": {"clients": [1], "duration_s": 2, "repeats": 3},
        "workload": {"scripts": [{"builtin": "select-only", "weight": 1}], "latency_log": "full"},
    }
    for section, value in overrides.items():
        sections[section] = {**sections.get(section, {}), **value}
    spec = small_spec(**sections)
    spec["run_id"] = run_id
    return spec


@pytest.fixture
def first_transactions(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[float]]:
    """For each side (its job id), the epoch time of each point's first logged transaction,
    read from pgbench's own log files before the agent removes them."""
    starts: dict[str, list[float]] = {}
    lock = threading.Lock()
    real = point_log.log_files

    def log_files(directory: Path) -> list[Path]:
        files = real(directory)
        times = [
            float(fields[4]) + float(fields[5]) / 1e6
            for path in files
            if (fields := path.read_text().split("\n", 1)[0].split())
        ]
        job = directory.name.split("-point-")[0]
        with lock:
            starts.setdefault(job, []).append(min(times))
        return files

    monkeypatch.setattr(point_log, "log_files", log_files)
    return starts


class ProcessCensus:
    """The processes in this agent's cpuset cgroups, seen at each of a point's host samples
    (one a second): per job cgroup, each process's name and its allowed CPUs."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[int, tuple[str, tuple[int, ...]]]] = {}
        self.lock = threading.Lock()

    def __call__(self, event: dict[str, Any]) -> None:
        if event["type"] != "sample":
            return
        for cgroup, pid in agent_cpuset_processes():
            status = read_status(pid)
            if status is None:
                continue
            with self.lock:
                self.seen.setdefault(cgroup, {})[pid] = status


class CancellingCensus(ProcessCensus):
    """The census, then the duet's cancel at the first point's first sample."""

    def __init__(self) -> None:
        super().__init__()
        self.cancel = threading.Event()

    def __call__(self, event: dict[str, Any]) -> None:
        super().__call__(event)
        if event["type"] == "sample":
            self.cancel.set()


def agent_cpuset_processes() -> Iterator[tuple[str, int]]:
    """(job cgroup name, pid) of every process in this process's v1 cpuset cgroups."""
    for agent in (CPUSET_V1_MOUNT / "benchlab").glob(f"agent-{os.getpid()}-*"):
        for job in agent.iterdir():
            if job.is_dir():
                for line in read_or_empty(job / "cgroup.procs").split():
                    yield job.name, int(line)


def read_or_empty(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def read_status(pid: int) -> tuple[str, tuple[int, ...]] | None:
    """(process name, Cpus_allowed_list) from /proc; None once it is gone."""
    fields = dict(
        line.split(":\t", 1)
        for line in read_or_empty(Path(f"/proc/{pid}/status")).splitlines()
        if ":\t" in line
    )
    if "Name" not in fields:
        return None
    return fields["Name"].strip(), parse_cpu_list(fields["Cpus_allowed_list"])


def run_both(
    specs: list[dict[str, Any]],
    config: AgentConfig,
    census: ProcessCensus | None = None,
    swapped: bool = False,
    cancel: threading.Event | None = None,
) -> tuple[list[ResultDocument], list[Recorder]]:
    recorders = [Recorder(census) for _ in specs]
    sides = [
        DuetSide(spec, EventEmitter([recorder], run_id=spec["run_id"]), lambda: False)
        for spec, recorder in zip(specs, recorders, strict=True)
    ]
    document = {"duet": 1, "key": "duet-test", "run_id": specs[0]["run_id"], "swapped": swapped}
    results = run_duet(
        {**document, "sides": specs}, config, sides, cancel.is_set if cancel else lambda: False
    )
    return results, recorders


def needs_two_cpus_and_cpuset() -> None:
    if len(host_cpus()) < 2:
        pytest.skip("a duet needs at least two CPUs")
    if not (CPUSET_V1_MOUNT / "cgroup.procs").exists() or os.geteuid() != 0:
        pytest.skip("this test reads v1 cpuset cgroups, which need root")


def left_behind(config: AgentConfig, run_ids: list[str]) -> list[str]:
    """Cluster directories, cpuset cgroups and processes any side left."""
    left = [
        str(path)
        for target in config.storage_targets().values()
        for path in target.glob("benchlab-*")
    ]
    jobs = {usable_job_id(run_id) for run_id in run_ids}
    left += [
        f"{cgroup} pid {pid}"
        for cgroup, pid in agent_cpuset_processes()
        if cgroup.rsplit("-", 1)[0] in jobs
    ]
    for agent in (CPUSET_V1_MOUNT / "benchlab").glob(f"agent-{os.getpid()}-*"):
        left += [str(job) for job in agent.iterdir() if job.name.rsplit("-", 1)[0] in jobs]
    return left


def test_a_duet_runs_both_sides_at_once_on_their_own_cpus(
    config: AgentConfig, first_transactions: dict[str, list[float]], pg16_install: object
) -> None:
    """Side 0's setup SQL sleeps, so unsynchronised its points would start seconds after
    side 1's; the barrier starts every point of both together. Each side's server and
    pgbench run on its half of the CPUs only (swapped: side 0 gets the second); a point's
    window starts once both sides are there."""
    needs_two_cpus_and_cpuset()
    delayed = {"setup_sql": f"SELECT pg_sleep({SETUP_DELAY_S})"}
    specs = [side_spec("duet-a", dataset=delayed), side_spec("duet-b")]
    census = ProcessCensus()

    results, recorders = run_both(specs, config, census, swapped=True)

    assert [result["status"] for result in results] == ["succeeded", "succeeded"]
    expected_cpus = halves(host_cpus(), swapped=True)
    for result, cpus, other in zip(results, expected_cpus, ["duet-b", "duet-a"], strict=True):
        assert result["cpus"] == list(cpus)
        assert result["duet"]["other_run"] == other
        assert len(result["points"]) == 3
    a, b = (first_transactions[usable_job_id(spec["run_id"])] for spec in specs)
    assert len(a) == len(b) == 3
    gaps = [abs(x - y) for x, y in zip(a, b, strict=True)]
    assert statistics.median(gaps) < START_BOUND_S, gaps
    assert max(gaps) < SETUP_DELAY_S / 2, gaps
    # The launch and reap times each point records hold its first transaction, and their
    # gaps between the sides are the barrier's, as the log's are.
    spans = [[(p["started_epoch"], p["ended_epoch"]) for p in r["points"]] for r in results]
    for side_spans, firsts in zip(spans, (a, b), strict=True):
        for (started, ended), first in zip(side_spans, firsts, strict=True):
            assert started <= first <= ended
    launch_gaps = [abs(x[0] - y[0]) for x, y in zip(*spans, strict=True)]
    assert max(launch_gaps) < SETUP_DELAY_S / 2, launch_gaps
    # Side 1 waited SETUP_DELAY_S at the barrier before its first point: its window (the
    # host's CPU, the agent's own) starts when both are there, not when it arrived.
    first_window = results[1]["points"][0]["noise"]["window_s"]
    assert first_window < SETUP_DELAY_S, first_window
    # Each side's events carry its own run id and nothing of the other's.
    for recorder, spec in zip(recorders, specs, strict=True):
        assert {event["run_id"] for event in recorder.events} == {spec["run_id"]}
    by_side = {
        usable_job_id(spec["run_id"]): cpus for spec, cpus in zip(specs, expected_cpus, strict=True)
    }
    names_seen = set()
    for cgroup, processes in census.seen.items():
        cpus = by_side[cgroup.rsplit("-", 1)[0]]
        for name, allowed in processes.values():
            names_seen.add(name)
            assert allowed == cpus, (cgroup, name, allowed)
    assert {"postgres", "pgbench"} <= names_seen
    assert len(census.seen) == 2
    assert left_behind(config, ["duet-a", "duet-b"]) == []


def test_a_cancelled_duet_stops_both_sides_and_leaves_nothing(
    config: AgentConfig, pg16_install: object
) -> None:
    """Cancelled during a point: both sides end cancelled, their clusters, processes and
    cpusets gone."""
    needs_two_cpus_and_cpuset()
    specs = [side_spec("duet-c"), side_spec("duet-d")]
    census = CancellingCensus()

    results, _ = run_both(specs, config, census, cancel=census.cancel)

    assert [result["status"] for result in results] == ["cancelled", "cancelled"]
    assert census.seen, "the duet was cancelled while its points ran"
    assert left_behind(config, ["duet-c", "duet-d"]) == []


def test_a_side_that_fails_ends_the_other_at_its_next_point(
    config: AgentConfig, pg16_install: object
) -> None:
    """A side whose setup SQL fails ends before its first point: the other side fails
    `peer_lost` at its barrier, not waiting forever."""
    needs_two_cpus_and_cpuset()
    specs = [
        side_spec("duet-e", dataset={"setup_sql": "SELECT no_such_thing"}),
        side_spec("duet-f"),
    ]

    results, _ = run_both(specs, config)

    assert results[0]["status"] == "failed"
    assert results[1]["status"] == "failed"
    assert results[1]["error"] is not None
    assert results[1]["error"]["code"] == "peer_lost"
    assert "duet-e" in results[1]["error"]["message"]
    assert left_behind(config, ["duet-e", "duet-f"]) == []


def test_sides_that_measure_differently_are_refused_before_anything_runs(
    config: AgentConfig,
) -> None:
    """Windows of different lengths are no pair: both sides fail invalid_spec on `sweep`."""
    specs = [side_spec("duet-g"), side_spec("duet-h", sweep={"duration_s": 3})]

    results, recorders = run_both(specs, config)

    assert [result["error"]["field"] for result in results if result["error"]] == [
        "sweep",
        "sweep",
    ]
    assert all(recorder.of_type("result") for recorder in recorders)
