"""Validity warnings that name their cause: what corrupts apart from what loses commits,
pgbench saturated apart from a host busy with other work (no database needed)."""

from runs.analysis.run_checks import run_warnings
from runs.analysis.validity import CHECKS, PointSamples, point_steady_state, result_warnings
from runs.analysis.validity import sample_warnings as found_in_samples
from runs.models import HostSample, Result, Run


def settings_run(**settings: str) -> Run:
    rows = [{"name": name, "setting": value, "unit": None} for name, value in settings.items()]
    return Run(effective_settings=rows, spec={"sweep": {"duration_s": 600}})


def warned(run: Run) -> dict[str, str]:
    return {warning.code: warning.detail for warning in run_warnings(run, [])}


def test_synchronous_commit_off_is_not_called_a_loss_of_crash_safety():
    found = warned(settings_run(synchronous_commit="off", checkpoint_timeout="300"))

    assert found == {"commits_not_durable": "synchronous_commit=off"}
    why = CHECKS["commits_not_durable"].why
    assert "lose the last commits" in why and "not corrupted" in why


def test_fsync_and_full_page_writes_off_are_unsafe_because_a_crash_can_corrupt():
    found = warned(settings_run(fsync="off", full_page_writes="off", synchronous_commit="off"))

    assert found == {
        "unsafe_settings": "fsync=off; full_page_writes=off",
        "commits_not_durable": "synchronous_commit=off",
    }
    assert "corrupt" in CHECKS["unsafe_settings"].why


def host_without_idle_cpu(idle: float = 1.0) -> PointSamples:
    return PointSamples(
        host=[HostSample(point=0, t=float(t), data={"cpu_idle": idle}) for t in range(1, 6)]
    )


def point(pgbench_cpu_s: float | None, threads: int = 1) -> Result:
    """A 10 s point whose pgbench threads could use `threads` CPUs."""
    return Result(index=0, clients=8, threads=threads, duration_s=10.0, pgbench_cpu_s=pgbench_cpu_s)


def codes_and_details(result: Result, samples: PointSamples) -> dict[str, str]:
    found = result_warnings(result, found_in_samples(0, samples, point_steady_state(samples)))
    return {warning.code: warning.detail for warning in found}


def test_a_full_host_with_pgbench_using_little_is_a_host_busy_with_other_processes():
    """A host busy elsewhere: pgbench used 3 to 14 % while something else kept every CPU busy."""
    for share in (0.03, 0.14):
        found = codes_and_details(point(pgbench_cpu_s=share * 10), host_without_idle_cpu())

        assert list(found) == ["host_busy"]
        assert found["host_busy"] == (
            "host CPU idle 1.0 % (with I/O wait, median over the window); "
            f"pgbench used {share * 100:.0f} % of the CPU its threads could use"
        )
    assert CHECKS["host_busy"].title == "host busy with other processes"


def test_a_full_host_with_pgbench_using_much_of_it_is_a_saturated_load_generator():
    found = codes_and_details(point(pgbench_cpu_s=14.0, threads=2), host_without_idle_cpu())

    assert list(found) == ["load_generator_saturated"]
    assert found["load_generator_saturated"].endswith(
        "pgbench used 70 % of the CPU its threads could use"
    )


def test_a_full_host_without_pgbench_cpu_measured_blames_no_one():
    found = codes_and_details(point(pgbench_cpu_s=None), host_without_idle_cpu())

    assert list(found) == ["host_busy"]
    assert found["host_busy"].endswith("pgbench's own CPU not measured")


def test_pgbench_busy_on_its_threads_is_saturated_with_idle_cpu_left_on_the_host():
    found = codes_and_details(point(pgbench_cpu_s=9.5), host_without_idle_cpu(idle=40.0))

    assert list(found) == ["load_generator_saturated"]
