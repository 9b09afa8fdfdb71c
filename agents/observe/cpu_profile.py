"""The server's stacks during one pgbench run, recorded with `perf` and folded.

perf runs as the agent (root on a benchmark host) with a fixed command line:
`cpu-clock` (a software event: works in VMs without hardware counters) at 99 Hz,
DWARF call graphs (the prebuilt and Debian binaries are built without frame
pointers: `--call-graph fp` gives only the innermost frame), attached to the
job's own postmaster and its children, which new backends inherit. Nothing in
the command comes from the job spec. It writes its data into a directory only
the agent can reach, runs in the cluster's job directory so the cleanup that
kills a job's leftover processes kills it too (agents/postgres/cluster/
directories.py, `kill_stragglers`), and is stopped and reaped whatever happens.
"""

import errno
import logging
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psutil

from agents.contract.reports.cpu_profiles import (
    MAX_STACK_DEPTH,
    MAX_STACK_LINES,
    MIN_STACK_SHARE,
    CpuProfileResult,
)
from agents.observe.procfs import read_int

logger = logging.getLogger(__name__)

FREQUENCY_HZ = 99
EVENT = "cpu-clock"
CALL_GRAPH = "dwarf"
# perf stops after this long (the point may go on) and never writes more than MAX_DATA.
MAX_SECONDS = 30
MAX_DATA = "256M"
SCRIPT_TIMEOUT_S = 300
ENABLE_TIMEOUT_S = 10
PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")
ENDED_EARLY = "perf record ended before it started"


def cpu_profiling_problem(allowed: bool, perf: str | None = None) -> str | None:
    """Why this host cannot record a CPU profile of a job's server (None: it can), in words
    naming the fix."""
    if not allowed:
        return (
            "this agent's local config does not allow CPU profiles: set "
            '"allow_cpu_profiling": true in its config file'
        )
    if (perf or shutil.which("perf")) is None:
        return (
            "perf is not installed on the agent's host: install it (Debian: apt-get install "
            "linux-perf; Ubuntu: linux-tools-generic; Fedora: dnf install perf)"
        )
    paranoid = read_int(PARANOID)
    if os.geteuid() != 0 and (paranoid is None or paranoid > 1):
        return (
            f"kernel.perf_event_paranoid is {paranoid} and the agent does not run as root: "
            "recording the server's processes needs the agent run as root, or "
            "sysctl kernel.perf_event_paranoid=1"
        )
    return None


def server_pids(postmaster_pid: int) -> list[int]:
    """The postmaster and its children now (backends forked later inherit perf's events)."""
    parent = psutil.Process(postmaster_pid)
    return [postmaster_pid, *(child.pid for child in parent.children())]


def record_argv(perf: str, private: Path, pids: Iterable[int]) -> list[str]:
    """perf's command: fixed options, this job's server pids, its data and control fifos in
    the agent's `private` directory, at most MAX_SECONDS, events off until enabled."""
    return [
        perf,
        "record",
        "--quiet",
        f"--freq={FREQUENCY_HZ}",
        f"--event={EVENT}",
        f"--call-graph={CALL_GRAPH}",
        "--no-buildid-cache",
        f"--max-size={MAX_DATA}",
        f"--output={private / 'perf.data'}",
        "--delay=-1",
        f"--control=fifo:{private / 'ctl'},{private / 'ack'}",
        f"--pid={','.join(str(pid) for pid in pids)}",
        "--",
        "sleep",
        str(MAX_SECONDS),
    ]


@dataclass
class Recording:
    """A perf recording: its command, then how long it ran and its stacks (or why none)."""

    argv: list[str]
    seconds: float = 0.0
    problem: str | None = None
    stacks: dict[str, int] = field(default_factory=dict)


@contextmanager
def recording(perf: str, postmaster_pid: int, cwd: Path) -> Iterator[Recording]:
    """perf recording the server while the block runs; on the way out perf is stopped and
    reaped whatever happened, and its data folded into `stacks` and removed."""
    private = Path(tempfile.mkdtemp(prefix="benchlab-perf-"))
    try:
        os.mkfifo(private / "ctl", 0o600)
        os.mkfifo(private / "ack", 0o600)
        ack = os.open(private / "ack", os.O_RDONLY | os.O_NONBLOCK)
        try:
            with (private / "stderr").open("w+") as stderr:
                yield from _recorded(perf, private, postmaster_pid, cwd, stderr, ack)
        finally:
            os.close(ack)
    finally:
        shutil.rmtree(private)


def _recorded(
    perf: str, private: Path, postmaster_pid: int, cwd: Path, stderr: IO[str], ack: int
) -> Iterator[Recording]:
    """`recording`'s middle: perf from its start to its reaped end, then its stacks."""
    started = time.monotonic()
    process, record = _started(perf, private, postmaster_pid, cwd, stderr, ack)
    try:
        yield record
    finally:
        exit_code = _stop(process)
        record.seconds = round(min(time.monotonic() - started, MAX_SECONDS), 3)
        if record.problem is None:
            _fold_data(record, perf, private / "perf.data", exit_code, _said(stderr))
        else:
            record.problem += f": {_said(stderr) or 'no output'}"


def _started(
    perf: str, private: Path, postmaster_pid: int, cwd: Path, stderr: IO[str], ack: int
) -> tuple["subprocess.Popen[bytes]", Recording]:
    """perf started and its events enabled. A server process that exits between listing
    and attaching (a backend ending) makes perf refuse to start, saying so or, seen on a
    loaded machine, exiting 244 with nothing said, before its control fifo opened or
    while it enabled the events: listed again, twice."""
    for _attempt in range(3):
        record = Recording(record_argv(perf, private, server_pids(postmaster_pid)))
        stderr.truncate(0)
        process = subprocess.Popen(
            record.argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        record.problem = _enable(process, private / "ctl", ack)
        if record.problem is None or not _may_retry(_said(stderr), process.poll()):
            return process, record
        _stop(process)
    return process, record


def _may_retry(said: str, exit_code: int | None) -> bool:
    """Whether perf failed as a vanished server process makes it fail: saying so, or
    exiting before its events counted with nothing said (not when it is still running
    past the deadline)."""
    return "No such process" in said or (exit_code is not None and not said)


def _said(stderr: IO[str]) -> str:
    """The end of what perf wrote to its error output so far."""
    stderr.seek(0)
    return stderr.read().strip()[-500:]


def _enable(process: "subprocess.Popen[bytes]", ctl: Path, ack: int) -> str | None:
    """Enable perf's events through its control fifo and wait for its ack; None once they
    count, else why not. perf starts with them disabled (`--delay=-1`): a backend forked
    before they are enabled would never count, and pgbench connects its clients at once."""
    deadline = time.monotonic() + ENABLE_TIMEOUT_S
    while True:
        try:
            fd = os.open(ctl, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as error:  # ENXIO: perf has not opened its end yet
            if error.errno != errno.ENXIO or process.poll() is not None:
                return f"{ENDED_EARLY} (exit {process.poll()})"
            if time.monotonic() > deadline:
                return f"perf record did not start within {ENABLE_TIMEOUT_S} s"
            time.sleep(0.02)
    with os.fdopen(fd, "w") as control:
        control.write("enable\n")
    answer = b""
    while b"ack" not in answer:
        if process.poll() is not None or time.monotonic() > deadline:
            return f"perf record did not enable its events (exit {process.poll()})"
        readable, _, _ = select.select([ack], [], [], 0.05)
        answer += os.read(ack, 64) if readable else b""
    return None


def _stop(process: "subprocess.Popen[bytes]") -> int:
    """SIGINT to perf and its sleep (perf writes its data and exits), then reap; killed
    when it does not end within 30 s."""
    if process.poll() is None:
        with _gone_ok():
            os.killpg(process.pid, signal.SIGINT)
    try:
        return process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        logger.warning("perf %s did not stop on SIGINT; killing it", process.pid)
        with _gone_ok():
            os.killpg(process.pid, signal.SIGKILL)
        return process.wait()


@contextmanager
def _gone_ok() -> Iterator[None]:
    """A process group that ended meanwhile is what we wanted."""
    try:
        yield
    except ProcessLookupError:
        return


def _fold_data(record: Recording, perf: str, data: Path, exit_code: int, said: str) -> None:
    """perf's data as folded stacks in `record.stacks`, or the reason in `record.problem`.

    perf record ends with -SIGINT's code or 0 when stopped; anything else, or no data,
    is a failure, named with what perf said."""
    if not data.exists() or exit_code not in (0, -signal.SIGINT, 128 + signal.SIGINT):
        record.problem = f"perf record failed (exit {exit_code}): {said or 'no output'}"
        return
    argv = [perf, "script", f"--input={data}", "--fields=comm,ip,sym,dso", "--no-inline"]
    try:
        script = subprocess.run(
            argv,
            cwd=data.parent,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=SCRIPT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        record.problem = f"perf script took longer than {SCRIPT_TIMEOUT_S} s"
        return
    if script.returncode != 0:
        record.problem = f"perf script failed (exit {script.returncode}): {script.stderr[-500:]}"
        return
    record.stacks = fold(script.stdout.splitlines())


def fold(lines: Iterable[str]) -> dict[str, int]:
    """`perf script` output (one block per sample: a header line, the command's name padded
    with spaces, then one tab-indented line per frame, innermost first, `address symbol
    (dso)`) as folded stacks and their sample counts."""
    stacks: dict[str, int] = {}
    frames: list[str] = []
    in_sample = False
    for line in [*lines, ""]:
        if not line.strip():
            if frames:
                stack = ";".join(reversed(frames[-MAX_STACK_DEPTH:]))
                stacks[stack] = stacks.get(stack, 0) + 1
            frames, in_sample = [], False
        elif line.startswith("\t") and in_sample:
            frames.append(frame_name(line))
        else:
            in_sample = True
    return stacks


def frame_name(line: str) -> str:
    """`  55d0c4 ExecScan (/usr/lib/postgresql/16/bin/postgres)` -> `ExecScan`; an unknown
    symbol is named after its object (`[libc.so.6]`); `;` and spaces never stay in a name."""
    _address, _, rest = line.strip().partition(" ")
    symbol, _, dso = rest.rpartition(" (")
    if not symbol or symbol == "[unknown]":
        symbol = f"[{Path(dso.rstrip(')')).name.strip('[]') or 'unknown'}]"
    return symbol.replace(";", ":").replace(" ", "_")


def bounded(stacks: dict[str, int]) -> tuple[str, int]:
    """(folded text, samples kept): the heaviest stacks, none under MIN_STACK_SHARE of all
    samples, at most MAX_STACK_LINES lines."""
    floor = sum(stacks.values()) * MIN_STACK_SHARE
    heaviest = sorted(stacks.items(), key=lambda item: (-item[1], item[0]))
    kept = [(stack, count) for stack, count in heaviest if count >= floor][:MAX_STACK_LINES]
    return "".join(f"{stack} {count}\n" for stack, count in kept), sum(c for _, c in kept)


def perf_for_job(wanted: bool, allowed: bool) -> tuple[str | None, str | None]:
    """(perf's path, None) when a job that wants a CPU profile can have one; (None, why not)
    when it cannot; (None, None) when it wants none."""
    if not wanted:
        return None, None
    problem = cpu_profiling_problem(allowed)
    return (shutil.which("perf"), None) if problem is None else (None, problem)


def cpu_profile_document(
    index: int, clients: int | None, tps: float | None, record: Recording
) -> CpuProfileResult:
    """One point of the CPU-profile pass as the contract carries it, its stacks bounded."""
    folded, kept = bounded(record.stacks)
    return {
        "index": index,
        "clients": clients,
        "tps": tps,
        "seconds": record.seconds,
        "frequency_hz": FREQUENCY_HZ,
        "event": EVENT,
        "call_graph": CALL_GRAPH,
        "samples": sum(record.stacks.values()),
        "kept_samples": kept,
        "folded": folded,
        "argv": record.argv,
        "error": record.problem,
    }


def no_cpu_profile(problem: str, index: int = 0, clients: int | None = None) -> CpuProfileResult:
    """The CPU profile a job could not record, saying why."""
    return cpu_profile_document(index, clients, None, Recording([], problem=problem))
