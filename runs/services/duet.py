"""Duet experiments: two cells measured at the same time on one host (agents/duet.py).

A duet experiment runs in rounds, and each round is ONE job carrying both cells:
the agent runs their clusters side by side, each on its own half of the host's
CPUs (the halves swapped every other round, so neither cell always gets the
same CPUs), and starts each point's windows of both together. Whatever the host
does during a window reaches both sides, and the paired module
(runs/inference/paired.py) compares the rounds' simultaneous windows.

Exactly two cells, the first the baseline: a host holds two sides at once and no
more (the agent splits its CPUs in two), and the lab's answers compare each cell
with the first. A matrix of more cells would have the baseline run beside each of
the others in turn, a duet per pair and round: the baseline's runs multiplied, a
round no longer one window. Two cells keep a round one window and one job.

Refused before the start, each naming its field (a 400 through the API, the
form's error beside the field): blocks, a matrix of other than two cells, two
hosts, a client host, a sweep by transactions (windows of one length), a CPU-profile
pass, a host that reported fewer than two CPUs, and pgbench threads beyond a
side's half of the CPUs. Said as notes at review: a host of fewer than four CPUs
(a side's server and pgbench share its CPU), a host that has not reported its
CPUs, and both sides' data on one device for a workload that writes or whose
dataset outgrows memory (their I/O competes).
"""

from agents.contract.errors import JobError
from agents.contract.spec.document import JobSpec
from runs.agentlink.execution import ROUNDS, Slot
from runs.models import Experiment, Run, StorageTarget
from runs.services.jobs.dispatch import duet_dispatch
from runs.services.queueing import Cell, CheckedCell, User, create_slot_run

DUET_CELLS = 2
# Fewer CPUs than this and a side's server and pgbench share one CPU.
FAIR_CPUS = 4
# The builtin scripts that only read.
READ_ONLY_BUILTINS = {"select-only"}
# About one pgbench scale unit's bytes on disk (tables and indexes).
BYTES_PER_SCALE = 16 * 1024 * 1024


def require_duet_design(experiment: Experiment, cells: list[Cell]) -> list[str]:
    """Raise JobError naming the field when a duet experiment cannot share its host fairly;
    otherwise the warnings to show at review (none for an experiment that is no duet)."""
    if not experiment.duet:
        return []
    if experiment.execution != ROUNDS:
        raise JobError("invalid_spec", "a duet runs in rounds: choose rounds", "execution")
    if len(cells) != DUET_CELLS:
        raise JobError(
            "invalid_spec",
            f"a duet measures exactly two cells at the same time, the first the baseline; this "
            f"matrix has {len(cells)}: pick two builds, config profiles, storage layouts or "
            "workloads (one of each other axis)",
            "duet",
        )
    if len({cell.host.pk for cell in cells}) != 1:
        raise JobError("invalid_spec", "a duet runs both cells on one host: pick one", "hosts")
    if experiment.client_host is not None:
        message = "a duet runs each side's pgbench on its own CPUs of the host: no client host"
        raise JobError("invalid_spec", message, "client_host")
    if experiment.transactions or not experiment.duration_s:
        message = "a duet's windows last the same time: give a duration, not transactions"
        raise JobError("invalid_spec", message, "sweep.duration_s")
    if experiment.cpu_profile:
        raise JobError("invalid_spec", "a duet has no CPU-profile pass", "sweep.cpu_profile")
    return _host_notes(experiment, cells)


def _host_notes(experiment: Experiment, cells: list[Cell]) -> list[str]:
    host = cells[0].host
    cpus = (host.facts.get("cpu") or {}).get("threads")
    if not isinstance(cpus, int):
        return [
            f"host {host.name} has not reported its CPUs: the agent refuses the duet if it has "
            "fewer than two"
        ]
    if cpus < DUET_CELLS:
        raise JobError(
            "duet_refused",
            f"host {host.name} has {cpus} CPU: a duet needs at least one CPU a side",
            "hosts",
        )
    side = cpus // DUET_CELLS
    if experiment.threads and experiment.threads > side:
        raise JobError(
            "duet_refused",
            f"each side of the duet has {side} of host {host.name}'s {cpus} CPUs: give pgbench "
            f"at most {side} threads",
            "sweep.threads",
        )
    notes = []
    if cpus < FAIR_CPUS:
        notes.append(
            f"host {host.name} has {cpus} CPUs: each side of the duet runs its server and its "
            f"pgbench on {side} CPU, so they compete with each other (at least {FAIR_CPUS} "
            "give each its own)"
        )
    if _share_a_device(cells) and any(_io_bound(cell) for cell in cells):
        notes.append(
            "both sides' data sit on one device and the workload writes or outgrows memory: "
            "their I/O competes, and the duet compares them on a shared disk (put each "
            "cell's data on its own storage target to avoid it)"
        )
    return notes


def _share_a_device(cells: list[Cell]) -> bool:
    """Both cells' data targets are one target, or report one device (unknown: shared)."""
    names = {cell.storage.get("data") or "default" for cell in cells}
    if len(names) == 1:
        return True
    targets = StorageTarget.objects.filter(host=cells[0].host, name__in=names)
    devices = {target.device for target in targets}
    return len(devices) < len(names) or "" in devices


def _io_bound(cell: Cell) -> bool:
    """The cell's workload writes (a builtin other than select-only, or a script of its
    own), or its dataset outgrows half the host's memory (two sides share it)."""
    scripts = cell.workload.scripts or []
    writes = any(script.get("builtin") not in READ_ONLY_BUILTINS for script in scripts)
    memory = (cell.host.facts.get("memory") or {}).get("total_bytes")
    big = isinstance(memory, int) and cell.workload.scale * BYTES_PER_SCALE > memory // 4
    return writes or big


def queue_duet_round(
    experiment: Experiment, pair: list[tuple[CheckedCell, Slot]], user: User
) -> list[Run]:
    """Create the round's two runs (the baseline cell first) and send them as one duet job
    once the transaction commits: one random client order for both, CPU halves swapped on
    even rounds."""
    ordered = sorted(pair, key=lambda item: item[0].cell.index)
    made = [create_slot_run(experiment, checked, slot, user) for checked, slot in ordered]
    seed = made[0][1]["sweep"]["seed"]
    specs: list[JobSpec] = []
    for _run, spec in made:
        spec["sweep"]["seed"] = seed
        specs.append(spec)
    round_number = ordered[0][1].round or 1
    runs = [run for run, _spec in made]
    key = f"experiment-{experiment.pk}-round-{round_number}-run-{runs[0].pk}"
    duet_dispatch(runs, specs, key, swapped=round_number % 2 == 0)
    return runs
