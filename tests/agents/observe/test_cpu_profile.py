"""Folding perf's output and bounding a CPU profile, on `perf script` output captured from a
real PostgreSQL 16 backend under select-only (fixtures/perf-script-pg16.txt, verbatim)."""

import os
from pathlib import Path

import pytest

from agents.contract.reports.cpu_profiles import MAX_STACK_LINES, parse_folded
from agents.contract.spec.document import validate_spec
from agents.observe import cpu_profile
from agents.observe.cpu_profile import bounded, cpu_profiling_problem, fold, frame_name
from agents.sweep.driver import records_cpu_profile

CAPTURE = Path(__file__).parent / "fixtures" / "perf-script-pg16.txt"


def test_perf_script_output_folds_into_root_first_stacks() -> None:
    stacks = fold(CAPTURE.read_text().splitlines())

    assert sum(stacks.values()) == 3
    first = next(iter(stacks))
    frames = first.split(";")
    assert frames[:6] == [
        "_start",
        "__libc_start_main@@GLIBC_2.34",
        "__libc_start_call_main",
        "main",
        "PostmasterMain",
        "ServerLoop.isra.0",
    ]
    assert frames[6] == "PostgresMain"
    assert frames[-1] == "finish_task_switch.isra.0"


def test_frames_without_a_symbol_are_named_after_their_object() -> None:
    assert frame_name("\t    4000 [unknown] ([unknown])") == "[unknown]"
    assert frame_name("\t   1a2b [unknown] (/usr/lib/x86_64-linux-gnu/libc.so.6)") == "[libc.so.6]"
    assert frame_name("\t  10ab59 __libc_send (inlined)") == "__libc_send"


def test_a_cpu_profile_keeps_its_heaviest_stacks_and_drops_the_rare_ones() -> None:
    stacks = {f"main;f{n}": 1 for n in range(5000)} | {"main;hot": 100_000}

    folded, kept = bounded(stacks)

    lines = folded.splitlines()
    assert lines[0] == "main;hot 100000"
    assert len(lines) == 1  # each rare stack is under 0.05 % of the samples
    assert kept == 100_000
    many = {f"main;f{n}": 10 for n in range(MAX_STACK_LINES + 50)}
    folded, kept = bounded(many)
    assert len(parse_folded(folded)) == MAX_STACK_LINES and kept == 10 * MAX_STACK_LINES


def test_a_malformed_folded_line_is_named() -> None:
    with pytest.raises(ValueError, match="line 2"):
        parse_folded("main;a 3\nmain;b three\n")


def test_what_a_cpu_profile_needs_is_said_in_words_naming_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert '"allow_cpu_profiling": true' in (cpu_profiling_problem(allowed=False) or "")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "apt-get install linux-perf" in (cpu_profiling_problem(allowed=True) or "")
    monkeypatch.setattr(cpu_profile.os, "geteuid", lambda: 1000)
    (tmp_path / "paranoid").write_text("2\n")
    monkeypatch.setattr(cpu_profile, "PARANOID", tmp_path / "paranoid")
    message = cpu_profiling_problem(allowed=True, perf="/usr/bin/perf") or ""
    assert "kernel.perf_event_paranoid is 2" in message and "run as root" in message
    (tmp_path / "paranoid").write_text("1\n")
    assert cpu_profiling_problem(allowed=True, perf="/usr/bin/perf") is None


def test_perfs_command_comes_from_the_agent_alone(tmp_path: Path) -> None:
    argv = cpu_profile.record_argv("/usr/bin/perf", tmp_path, [11, 12])
    assert argv[:2] == ["/usr/bin/perf", "record"]
    assert "--event=cpu-clock" in argv and "--freq=99" in argv and "--call-graph=dwarf" in argv
    assert "--pid=11,12" in argv and argv[-3:] == ["--", "sleep", str(cpu_profile.MAX_SECONDS)]


def test_in_rounds_only_the_job_of_the_first_round_records_a_cpu_profile() -> None:
    first = validate_spec({"version": 1, "sweep": {"cpu_profile": True, "duration_s": 5}})["sweep"]
    assert records_cpu_profile(first)
    assert not records_cpu_profile({**first, "first_repeat": 2})
    assert not records_cpu_profile({**first, "cpu_profile": False})


def test_perf_ending_silently_while_it_enables_its_events_is_started_again(tmp_path: Path):
    """As perf does, seen on a loaded machine, when a listed server process is gone: it
    opens its control fifo, reads "enable" and exits 244 saying nothing. The recording
    lists the processes again and starts it twice more before it gives the reason."""
    starts = tmp_path / "starts"
    fake_perf = tmp_path / "perf"
    fake_perf.write_text(
        "#!/bin/sh\n"
        f"echo started >> {starts}\n"
        'ctl=$(printf "%s\\n" "$@" | sed -n "s/^--control=fifo:\\([^,]*\\),.*/\\1/p")\n'
        'read -r _command < "$ctl"\n'
        "exit 244\n"
    )
    fake_perf.chmod(0o755)

    with cpu_profile.recording(str(fake_perf), os.getpid(), tmp_path) as record:
        pass

    assert starts.read_text().split() == ["started"] * 3
    assert record.problem == "perf record did not enable its events (exit 244): no output"
