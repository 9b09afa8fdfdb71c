"""The host canary: a fixed CPU loop, an fsync probe and a memory copy, timed before a job's
cluster starts.

A job's numbers move when PostgreSQL changes and when the host does (a
neighbour on the same VM host, a throttled CPU, a busier disk). The canary
times the same work every job, before anything of the job runs, so the lab
keeps each host's series and can tell which runs started on a host outside
its usual spread (runs/services/hosts/noise.py). It takes about two seconds:
medians of short runs, so one preempted run does not move it.

The memory copy is one C memmove (a memoryview's slice assignment) of a buffer four
times the size of a large last-level cache (32 MiB on the lab's EPYC VMs), so it reads
and writes main memory, not the cache: neighbours taking a visible share of the
memory's bandwidth lower its rate where the CPU loop, which lives in the L1 cache,
barely moves. One vCPU's copy loop did on the EPYC VM (by the wall clock) and did not
on a Xeon VM with a 260 MiB L3 (docs/benchmarks.md).

The two sides of a duet (agents/duet.py) are jobs in threads of one process:
their canaries take turns (`CANARY_TURN`), since two Python loops at once
would share the interpreter's lock and each time about twice its usual.
"""

import os
import statistics
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from agents.contract.reports.noise import HostCanary

CPU_LOOP_ITERATIONS = 200_000
CPU_LOOP_RUNS = 25
FSYNC_COUNT = 20
FSYNC_BLOCK = b"\0" * 8192
# 128 MiB each way: four times a 32 MiB last-level cache.
MEMORY_COPY_MIB = 128
MEMORY_COPY_RUNS = 7
PROBE_NAME = ".benchlab-canary"
# One canary at a time in this process.
CANARY_TURN = threading.Lock()


def cpu_loop(iterations: int) -> int:
    """A linear congruential generator: integer work only, the same every time."""
    value = 1
    for _ in range(iterations):
        value = (value * 1103515245 + 12345) & 0xFFFFFFFF
    return value


def cpu_loop_ns(iterations: int = CPU_LOOP_ITERATIONS, runs: int = CPU_LOOP_RUNS) -> float:
    """The median time of one loop iteration over `runs` timed runs, in nanoseconds."""
    per_iteration = []
    for _ in range(runs):
        started = time.perf_counter_ns()
        cpu_loop(iterations)
        per_iteration.append((time.perf_counter_ns() - started) / iterations)
    return statistics.median(per_iteration)


def memory_copy_gbps(mib: int = MEMORY_COPY_MIB, runs: int = MEMORY_COPY_RUNS) -> float:
    """The median rate, over `runs` timed copies of a `mib` MiB buffer into another, in
    GB/s (10^9 bytes copied a second). One untimed copy first touches every page of both,
    so the timed ones measure memory, not the kernel's page faults."""
    size = mib * 1024 * 1024
    source, target = memoryview(bytearray(size)), memoryview(bytearray(size))
    target[:] = source
    rates = []
    for _ in range(runs):
        started = time.perf_counter_ns()
        target[:] = source
        rates.append(size / (time.perf_counter_ns() - started))
    return statistics.median(rates)


def existing_directory(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (a storage directory the job makes later
    lies on the same file system as that ancestor)."""
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path


def fsync_latencies_ms(directory: Path, count: int = FSYNC_COUNT) -> list[float]:
    """`count` 8 kB appends to a probe file in `directory`, each fsynced; each write plus
    fsync in milliseconds. The file is removed after."""
    probe = directory / f"{PROBE_NAME}-{os.getpid()}"
    latencies = []
    descriptor = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(count):
            started = time.perf_counter_ns()
            os.write(descriptor, FSYNC_BLOCK)
            os.fsync(descriptor)
            latencies.append((time.perf_counter_ns() - started) / 1e6)
    finally:
        os.close(descriptor)
        probe.unlink()
    return latencies


def run_canary(storage: Path) -> HostCanary:
    """Time the CPU loop, the fsync probe on the storage at `storage`, then the memory
    copy; after any canary another thread of this process is timing."""
    with CANARY_TURN:
        at = datetime.now(UTC).isoformat()
        started = time.monotonic()
        loop_ns = cpu_loop_ns()
        directory = existing_directory(storage)
        fsyncs = fsync_latencies_ms(directory)
        memory_gbps = memory_copy_gbps()
        seconds = time.monotonic() - started
    return {
        "at": at,
        "seconds": round(seconds, 3),
        "cpu_loop_iterations": CPU_LOOP_ITERATIONS,
        "cpu_loop_runs": CPU_LOOP_RUNS,
        "cpu_loop_ns": round(loop_ns, 3),
        "fsync_directory": str(directory),
        "fsync_count": FSYNC_COUNT,
        "fsync_ms": round(statistics.median(fsyncs), 3),
        "fsync_max_ms": round(max(fsyncs), 3),
        "memory_copy_mib": MEMORY_COPY_MIB,
        "memory_copy_runs": MEMORY_COPY_RUNS,
        "memory_gbps": round(memory_gbps, 3),
    }
