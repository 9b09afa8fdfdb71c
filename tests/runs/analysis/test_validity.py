"""Validity warnings, each triggered by a crafted point or by real pgbench output."""

import shutil
import tempfile
from pathlib import Path

import pytest

from agents.config import AgentConfig
from agents.contract.pgbench_output.parse import parse_output
from runs.analysis import validity
from runs.analysis.run_checks import run_warnings
from runs.analysis.validity import PointSamples, point_warnings
from runs.inference.stats import summarize
from runs.models import HostSample, ProgressSample, Result, Run, ServerSample
from runs.services.jobs.events import store_point
from tests.agents import jobs
from tests.runs.factories import RunFactory

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parents[2] / "agents" / "pgbench" / "fixtures" / "pg16"


def codes(found: list) -> set[str]:
    return {warning.code for warning in found}


def make_point(run: Run, index: int = 0, **fields) -> Result:
    values = {"clients": 4, "repeat": 1, "tps": 1000.0, "duration_s": 10.0, "exit_code": 0}
    return Result.objects.create(run=run, index=index, **{**values, **fields})


def server_samples(run: Run, rows: list[dict]) -> list[ServerSample]:
    return [ServerSample(run=run, point=0, t=row["t"], data=row) for row in rows]


def steady_progress(run: Run, seconds: int = 10, tps: float = 1000.0) -> list[ProgressSample]:
    wobble = [0.0, 8.0, -6.0, 5.0, -7.0, 4.0, -3.0, 6.0, -5.0, 2.0]
    return [
        ProgressSample(run=run, point=0, t=float(t), tps=tps + wobble[t % 10])
        for t in range(1, seconds + 1)
    ]


def quiet_server(run: Run) -> list[ServerSample]:
    rows = [
        {"t": float(t), "checkpoints_timed": 3, "checkpoints_req": 7, "buffers_checkpoint_per_s": 0}
        for t in range(1, 11)
    ]
    return server_samples(run, rows)


@pytest.fixture
def run() -> Run:
    return RunFactory(status=Run.Status.SUCCEEDED, spec={"sweep": {"duration_s": 10}})


def test_a_clean_point_has_no_warnings(run):
    result = make_point(run)
    samples = PointSamples(progress=steady_progress(run), server=quiet_server(run))
    assert point_warnings(result, samples) == []


def test_a_timed_checkpoint_starting_inside_the_window_is_flagged_with_its_time(run):
    rows = [
        {"t": 1.0, "checkpoints_timed": 3, "checkpoints_req": 7, "buffers_checkpoint_per_s": 0},
        {"t": 2.0, "checkpoints_timed": 3, "checkpoints_req": 7, "buffers_checkpoint_per_s": 0},
        {"t": 3.0, "checkpoints_timed": 4, "checkpoints_req": 7, "buffers_checkpoint_per_s": 120},
        {"t": 4.0, "checkpoints_timed": 4, "checkpoints_req": 7, "buffers_checkpoint_per_s": 0},
    ]
    samples = PointSamples(server=server_samples(run, rows))
    (warning,) = point_warnings(make_point(run), samples)
    assert warning.code == "checkpoint_in_window"
    assert warning.detail == "timed checkpoint started at 3 s"
    edges = [(e.kind, e.edge, e.t) for e in validity.checkpoint_events(0, samples.server)]
    assert edges == [("timed", "start", 3.0), ("timed", "end", 4.0)]


def test_a_timed_checkpoint_that_writes_nothing_is_not_flagged(run):
    # An idle server's timed checkpoint is skipped, yet counted in checkpoints_timed.
    rows = [
        {"t": float(t), "checkpoints_timed": 3 if t < 3 else 4, "buffers_checkpoint_per_s": 0}
        for t in range(1, 6)
    ]
    assert point_warnings(make_point(run), PointSamples(server=server_samples(run, rows))) == []


def test_a_checkpoint_starting_at_the_last_sample_is_flagged_before_its_writes_show(run):
    rows = [
        {"t": 1.0, "checkpoints_timed": 3, "buffers_checkpoint_per_s": 0},
        {"t": 2.0, "checkpoints_timed": 4, "buffers_checkpoint_per_s": 0},
    ]
    found = point_warnings(make_point(run), PointSamples(server=server_samples(run, rows)))
    assert [w.detail for w in found] == ["timed checkpoint started at 2 s"]


def test_a_checkpoint_already_writing_when_the_window_begins_is_flagged(run):
    rows = [
        {"t": 1.0, "checkpoints_timed": 3, "checkpoints_req": 7, "buffers_checkpoint_per_s": 80},
        {"t": 2.0, "checkpoints_timed": 3, "checkpoints_req": 7, "buffers_checkpoint_per_s": 0},
    ]
    found = point_warnings(make_point(run), PointSamples(server=server_samples(run, rows)))
    assert [w.detail for w in found] == ["checkpoint writing when the window began"]


def test_a_host_without_idle_cpu_and_pgbench_using_it_flags_a_saturated_load_generator(run):
    host = [
        HostSample(run=run, point=0, t=float(t), data={"cpu_idle": idle})
        for t, idle in enumerate([1.5, 2.0, 3.0, 40.0], start=1)
    ]
    point = make_point(run, threads=1, pgbench_cpus=1, duration_s=10.0, pgbench_cpu_s=6.0)
    (warning,) = point_warnings(point, PointSamples(host=host))
    assert warning.code == "load_generator_saturated"
    assert "idle 2.5 %" in warning.detail
    assert "pgbench used 60 %" in warning.detail


def test_pgbench_busy_on_all_its_threads_flags_a_saturated_load_generator(run):
    point = make_point(run, threads=2, duration_s=10.0, pgbench_cpu_s=19.2)

    (warning,) = point_warnings(point, PointSamples())

    assert warning.code == "load_generator_saturated"
    assert warning.detail == (
        "pgbench used 96 % of the 2 CPU(s) its 2 thread(s) could use (19.2 CPU s in 10 s)"
    )


def test_pgbench_with_more_threads_than_cpus_is_judged_by_its_cpus(run):
    """-j 8 on 2 CPUs: 19 CPU s in 10 s is 24 % of eight threads but 95 % of what it could use."""
    point = make_point(run, threads=8, pgbench_cpus=2, duration_s=10.0, pgbench_cpu_s=19.0)

    (warning,) = point_warnings(point, PointSamples())

    assert warning.code == "load_generator_saturated"
    assert warning.detail.startswith("pgbench used 95 % of the 2 CPU(s) its 8 thread(s)")


def test_pgbench_with_idle_threads_is_not_a_saturated_load_generator(run):
    point = make_point(run, threads=2, duration_s=10.0, pgbench_cpu_s=12.0)
    assert point_warnings(point, PointSamples()) == []


def test_a_host_waiting_on_its_disks_is_not_a_saturated_load_generator(run):
    host = [
        HostSample(run=run, point=0, t=float(t), data={"cpu_idle": 1.0, "cpu_iowait": 70.0})
        for t in range(1, 5)
    ]
    assert point_warnings(make_point(run), PointSamples(host=host)) == []


def test_failed_transactions_are_flagged(run):
    (warning,) = point_warnings(make_point(run, failed=12), PointSamples())
    assert (warning.code, warning.detail) == ("failed_transactions", "12 failed")


def stored_capture(name: str) -> Result:
    """A point as the agent reports it for a real pgbench 16 capture, stored by the lab."""
    stdout = (FIXTURES / f"{name}.stdout").read_text()
    stderr = (FIXTURES / f"{name}.stderr").read_text()
    point = {"index": 0, "clients": 8, "repeat": 1, "stdout": stdout, "stderr": stderr}
    return store_point(RunFactory(), {**point, **parse_output(stdout + stderr)})


def test_retries_in_real_pgbench_output_are_flagged():
    result = stored_capture("run_repeatable_read_c8j4_maxtries3_verbose_errors_T3_P1_r")
    (warning,) = point_warnings(result, PointSamples())
    assert warning.detail == "253 failed, 755 retried"


def test_aborted_clients_in_real_pgbench_output_are_flagged():
    result = stored_capture("run_err_sometimes_div0_c8j4_T3_P1_r")
    (warning,) = point_warnings(result, PointSamples())
    assert warning.code == "failed_transactions" and "8 aborted clients" in warning.detail


def test_a_drifting_timeline_is_unsteady(run):
    progress = [
        ProgressSample(run=run, point=0, t=float(t), tps=1000.0 - 20 * t) for t in range(1, 11)
    ]
    found = {
        w.code: w.detail for w in point_warnings(make_point(run), PointSamples(progress=progress))
    }
    assert found["unsteady_timeline"].startswith("tps drifts -20 % over the window")
    # Drifting to its last second, it has no steady state either.
    assert set(found) == {"unsteady_timeline", "never_settled"}


def test_a_swinging_timeline_is_unsteady(run):
    progress = [
        ProgressSample(run=run, point=0, t=float(t), tps=1500.0 if t % 2 else 500.0)
        for t in range(1, 11)
    ]
    (warning,) = point_warnings(make_point(run), PointSamples(progress=progress))
    # Its first second is the highest: the rest, whose alternation has no trend, holds.
    assert warning.detail == (
        "per-second tps varies by 53 % (CV); "
        "tps fell for the first 1 of 10 s, then held (a drift down, not a warm-up)"
    )


def test_a_slow_workload_counting_a_few_transactions_a_second_is_not_unsteady(run):
    # About 4 transactions a second: the per-second count alone varies by about half.
    counts = [3, 5, 4, 2, 6, 4, 3, 5, 4, 4, 6, 2]
    progress = [
        ProgressSample(run=run, point=0, t=float(t), tps=float(n))
        for t, n in enumerate(counts, start=1)
    ]
    assert point_warnings(make_point(run), PointSamples(progress=progress)) == []


def test_a_timeline_estimated_from_a_small_sample_allows_for_its_counting_noise(run):
    # 50,000 tps sampled at 0.0002: about 10 lines a second, so estimates vary by ~30 %.
    lines = [6, 14, 10, 7, 13, 10, 8, 12, 11, 9]
    progress = [
        ProgressSample(
            run=run, point=0, t=float(t), tps=n / 0.0002, sampled=n, sampling_rate=0.0002
        )
        for t, n in enumerate(lines, start=1)
    ]
    point = make_point(run)
    assert point_warnings(point, PointSamples(progress=progress)) == []
    exact = [ProgressSample(run=run, point=0, t=s.t, tps=s.tps) for s in progress]
    found = {w.code for w in point_warnings(point, PointSamples(progress=exact))}
    # The same swing in exact counts is real, and its fitted drift (+58 % a minute) is then
    # no counting noise: no stretch is shown to hold.
    assert found == {"unsteady_timeline", "never_settled"}


def test_a_steady_timeline_with_noise_is_not_unsteady(run):
    assert point_warnings(make_point(run), PointSamples(progress=steady_progress(run))) == []


def test_repeats_that_disagree_and_too_few_repeats_are_cell_warnings():
    found = validity.cell_warnings(summarize([1000.0, 1300.0]))
    assert codes(found) == {"repeats_disagree", "too_few_repeats"}
    assert validity.cell_warnings(summarize([1000.0, 1010.0, 1005.0])) == []


def test_unsafe_settings_read_back_from_the_server_are_flagged():
    run = RunFactory(
        effective_settings=[
            {"name": "fsync", "setting": "off", "unit": None},
            {"name": "synchronous_commit", "setting": "off", "unit": None},
            {"name": "full_page_writes", "setting": "on", "unit": None},
            {"name": "checkpoint_timeout", "setting": "30", "unit": "s"},
        ],
        spec={"sweep": {"duration_s": 60}},
    )
    found = run_warnings(run, [])
    assert [(warning.code, warning.detail) for warning in found] == [
        ("unsafe_settings", "fsync=off"),
        ("commits_not_durable", "synchronous_commit=off"),
    ]


def test_a_window_shorter_than_checkpoint_timeout_is_flagged():
    run = RunFactory(
        effective_settings=[{"name": "checkpoint_timeout", "setting": "300", "unit": "s"}]
    )
    (warning,) = run_warnings(run, [make_point(run, duration_s=60.0)])
    assert warning.code == "window_shorter_than_checkpoint_timeout"
    assert warning.detail == "60 s window, checkpoint_timeout 300 s"


def test_requested_settings_count_until_the_server_reports_its_own():
    run = RunFactory(spec={"settings": {"checkpoint_timeout": "1min"}, "sweep": {"duration_s": 30}})
    assert codes(run_warnings(run, [])) == {"window_shorter_than_checkpoint_timeout"}


def test_every_warning_has_a_title_and_a_reason():
    for code, check in validity.CHECKS.items():
        warning = validity.ValidityWarning(code, "seen")
        assert warning.as_dict() == {
            "code": code,
            "title": check.title,
            "detail": "seen",
            "why": check.why,
        }
        assert check.title and len(check.why) > 40


def test_warnings_of_repeats_merge_into_one_per_code_naming_the_repeats():
    one = validity.ValidityWarning("failed_transactions", "3 failed")
    two = validity.ValidityWarning("failed_transactions", "1 failed")
    (merged,) = validity.merge_repeats({2: [two], 1: [one]})
    assert merged.detail == "repeat 1: 3 failed; repeat 2: 1 failed"


@pytest.fixture
def storage_root():
    """Storage targets PostgreSQL's OS user can reach, as tests/agents/conftest.py makes them."""
    root = Path(tempfile.mkdtemp(prefix="benchlab-test-", dir="/var/tmp"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_a_real_run_without_crash_safety_and_short_points_is_flagged(storage_root):
    """A real PostgreSQL 16 and pgbench job, stored as the control worker stores it."""
    spec = jobs.small_spec(
        run_id="warnings",
        storage={"wal": "data"},
        settings={"fsync": "off", "checkpoint_timeout": "45s"},
        workload={"scripts": [{"builtin": "select-only", "weight": 1}]},
        sweep={"clients": [1]},
    )
    result, _ = jobs.run(spec, AgentConfig(storage={"data": storage_root / "data"}))
    assert result["status"] == "succeeded", result["error"]

    run = RunFactory(status=Run.Status.SUCCEEDED, spec=spec)
    run.effective_settings = result["settings"]["effective"]
    run.save()
    stored = [store_point(run, point) for point in result["points"]]

    found = {w.code: w.detail for w in run_warnings(run, stored)}
    assert found == {
        "unsafe_settings": "fsync=off",
        "window_shorter_than_checkpoint_timeout": "2 s window, checkpoint_timeout 45 s",
    }
    samples = PointSamples(
        progress=list(run.progress.all()),
        host=list(run.host_samples.all()),
        server=list(run.server_samples.all()),
    )
    assert samples.server, "the agent stores server samples of the point"
    assert "failed_transactions" not in codes(point_warnings(stored[0], samples))


@pytest.mark.parametrize(
    ("repeats", "flagged"), [([900.0, 1000.0, 1100.0], False), ([890.0, 1000.0, 1110.0], True)]
)
def test_repeats_disagree_above_a_ten_percent_coefficient_of_variation(repeats, flagged):
    # sd / mean is exactly 10 % for the first, 11 % for the second.
    found = codes(validity.cell_warnings(summarize(repeats)))
    assert ("repeats_disagree" in found) is flagged
