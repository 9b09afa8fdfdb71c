"""A duet: two jobs at once on one host, their measuring windows side by side.

Two cells of an experiment in rounds measured at the same time on one host
see the same host: whatever it does during a window (a neighbour, a slower
period) reaches both sides, and the ratio of their simultaneous windows
cancels it (Bulej et al., ICPE 2020). Each side is an ordinary job
(agents/job.py) with its own cluster and storage directories, its own events
under its own run id, and its own half of the host's CPUs for its server AND
its pgbench (agents/cpusets.py: a cpuset cgroup where the host has the
controller, affinity always). Each point of a side waits, its samplers
running, until the other side's same point arrives; both pgbench start then,
for the same `sweep.duration_s`.

Contract (the duet document, version 1): one task on the agent's queue, signed
as a job is, carrying both sides:

    {"duet": 1,                      # the document's version
     "key": "<the duet's id>",       # the lab's; both sides' results carry it
     "run_id": "<side 0's run id>",  # what the worker claims first and logs
     "token": "<side 0's token>",
     "swapped": false,               # true: side 0 gets the second CPU half
     "sides": [<job spec>, <job spec>]}

Each side is a complete job spec (docs/contracts.md section 1, its own
`run_id`, `token`, `job_id`); the agent claims, cancels and reports each
side's run on its own. The sides' `sweep` sections must be equal (the same
points in the same order; a random order gets one seed for both) and timed
(`duration_s`, not `transactions`: windows of the same length), network
`local`, no CPU-profile pass; else both fail `invalid_spec`. A host with fewer
than two CPUs (one a side) fails both `duet_refused`; fewer than four is a
warning (a side's server and pgbench share one CPU). The CPUs split in
halves, the odd one in the second half; the lab swaps them every round. A
side that ends (failed, cancelled) breaks the barrier: the other side fails
`peer_lost` at its next point and keeps the points it measured. Each
result document carries `cpus` and `duet` (key, side, the other side's run,
swapped).
"""

import logging
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agents.config import AgentConfig
from agents.contract.duet import DUET_VERSION
from agents.contract.errors import Cancelled, JobError
from agents.contract.reports.results import ResultDocument
from agents.contract.spec.document import JobSpec, validate_spec
from agents.cpusets import halves, host_cpus
from agents.events import EventEmitter, now_iso
from agents.job import HostShare, Job, new_result
from agents.sweep.driver import CLIENT_ORDER_SEEDS

logger = logging.getLogger(__name__)

SIDES = 2
# Fewer CPUs than this and a side's server and pgbench share one CPU: allowed, said.
FAIR_CPUS = 4
# How often a side waiting at the barrier looks at its cancel flag.
WAIT_POLL_S = 0.2


def is_duet(document: object) -> bool:
    """Whether a task's document is a duet (else it is one job spec)."""
    return isinstance(document, dict) and "duet" in document


def duet_sides(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The duet's two job specs as sent (each still unvalidated), [] when there are not two."""
    sides = document.get("sides")
    if not isinstance(sides, list) or len(sides) != SIDES:
        return []
    return [side for side in sides if isinstance(side, dict)]


class WindowGate:
    """The barrier both sides' points meet at: a point's window starts when the other
    side's same point has arrived, or fails once the other side has ended."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._waiting = 0
        self._generation = 0
        self._ended: str | None = None

    def arrive(self, should_cancel: Callable[[], bool]) -> None:
        """Wait for the other side; raises Cancelled on cancel, JobError("peer_lost") when
        the other side ended."""
        with self._condition:
            self._refuse_if_ended()
            generation = self._generation
            self._waiting += 1
            if self._waiting == SIDES:
                self._waiting = 0
                self._generation += 1
                self._condition.notify_all()
                return
            while self._generation == generation:
                if self._ended is not None or should_cancel():
                    self._waiting -= 1
                    self._refuse_if_ended()
                    raise Cancelled()
                self._condition.wait(WAIT_POLL_S)

    def end(self, reason: str) -> None:
        """A side ended: the other side's next (or current) wait fails with `reason`."""
        with self._condition:
            self._ended = reason
            self._condition.notify_all()

    def _refuse_if_ended(self) -> None:
        if self._ended is not None:
            raise JobError("peer_lost", self._ended)


@dataclass(frozen=True)
class DuetSide:
    """One side: its spec as sent, its emitter, its own cancel flag."""

    spec: dict[str, Any]
    emitter: EventEmitter
    should_cancel: Callable[[], bool]


def run_duet(
    document: Mapping[str, Any],
    config: AgentConfig,
    sides: list[DuetSide],
    should_cancel: Callable[[], bool] = lambda: False,
) -> list[ResultDocument]:
    """Run both sides at once; each side's result document (also emitted as its
    `result` event). A duet refused before its start fails both sides with the reason."""
    try:
        specs = check_duet(document, [side.spec for side in sides])
        cpus = host_cpus()
        if len(cpus) < SIDES:
            raise JobError(
                "duet_refused",
                f"this host gives the agent {len(cpus)} CPU: a duet needs at least one CPU a "
                "side, so the two sides' servers and pgbench do not share CPUs",
            )
    except JobError as error:
        return [refuse(side, error) for side in sides]
    share_seed(specs, [side.spec for side in sides])
    cpu_halves = halves(cpus, bool(document.get("swapped")))
    return Duet(document, config, sides, should_cancel, cpu_halves).run()


def check_duet(document: Mapping[str, Any], specs: list[dict[str, Any]]) -> list[JobSpec]:
    """Both sides' specs validated, or JobError naming why they cannot run as a duet."""
    if document.get("duet") != DUET_VERSION or len(specs) != SIDES:
        raise JobError(
            "invalid_spec", f"a duet (version {DUET_VERSION}) carries two job specs", "sides"
        )
    validated = [validate_spec(spec) for spec in specs]
    first, second = (spec["sweep"] for spec in validated)
    if first != second:
        raise JobError(
            "invalid_spec",
            "the two sides of a duet measure the same points for the same time: their "
            "sweep sections differ",
            "sweep",
        )
    if first["duration_s"] is None:
        raise JobError(
            "invalid_spec",
            "a duet's windows last the same time: set sweep.duration_s, not transactions",
            "sweep.duration_s",
        )
    if first["cpu_profile"]:
        raise JobError("invalid_spec", "a duet has no CPU-profile pass", "sweep.cpu_profile")
    if any(spec["network"]["role"] != "local" for spec in validated):
        raise JobError("invalid_spec", "a duet runs pgbench on its own host", "network.role")
    return validated


def share_seed(validated: list[JobSpec], specs: list[dict[str, Any]]) -> None:
    """A random client order without a seed: one seed drawn for both sides, so their
    points come in the same order."""
    sweep = validated[0]["sweep"]
    if sweep["order"] != "random" or sweep["seed"] is not None:
        return
    seed = secrets.randbelow(CLIENT_ORDER_SEEDS)
    for spec in specs:
        spec["sweep"] = {**spec.get("sweep", {}), "seed": seed}


def refuse(side: DuetSide, error: JobError) -> ResultDocument:
    """A side that did not start: its result document, failed with `error`, emitted."""
    result = new_result(side.spec)
    result["status"] = "failed"
    result["error"] = error.as_dict()
    result["finished_at"] = now_iso()
    side.emitter.emit("log", {"level": "error", "message": str(error)})
    side.emitter.emit("status", {"state": "finished", "message": "failed"})
    side.emitter.emit("result", result)
    return result


class Duet:
    """Both sides' jobs, each in its own thread, meeting at the window gate."""

    def __init__(
        self,
        document: Mapping[str, Any],
        config: AgentConfig,
        sides: list[DuetSide],
        should_cancel: Callable[[], bool],
        cpu_halves: tuple[tuple[int, ...], tuple[int, ...]],
    ) -> None:
        self.document = document
        self.config = config
        self.sides = sides
        self.should_cancel = should_cancel
        self.cpu_halves = cpu_halves
        self.gate = WindowGate()
        self.interrupted = threading.Event()
        self.results: list[ResultDocument | None] = [None] * SIDES

    def run(self) -> list[ResultDocument]:
        threads = [
            threading.Thread(target=self._run_side, args=(number,), name=f"duet-side-{number}")
            for number in range(SIDES)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            self._join(thread)
        return [result for result in self.results if result is not None]

    def _join(self, thread: threading.Thread) -> None:
        """Wait for a side; Ctrl-C (the main thread's) cancels both, which then clean up."""
        while thread.is_alive():
            try:
                thread.join(WAIT_POLL_S)
            except KeyboardInterrupt:
                self.interrupted.set()

    def _run_side(self, number: int) -> None:
        side = self.sides[number]
        cpus = self.cpu_halves[number]

        def cancelled() -> bool:
            return self.interrupted.is_set() or self.should_cancel() or side.should_cancel()

        def before_window() -> None:
            self.gate.arrive(cancelled)

        other = self.sides[SIDES - 1 - number].spec.get("run_id")
        job = Job(
            side.spec, self.config, side.emitter, cancelled, share=HostShare(cpus, before_window)
        )
        job.result["duet"] = {
            "key": self.document.get("key"),
            "side": number,
            "other_run": other,
            "swapped": bool(self.document.get("swapped")),
        }
        host = len(self.cpu_halves[0]) + len(self.cpu_halves[1])
        if host < FAIR_CPUS:
            side.emitter.emit("log", {"level": "warning", "message": few_cpus_warning(host)})
        try:
            result = job.run()
        finally:
            self.gate.end(f"the other side of the duet (run {side.spec.get('run_id')}) ended")
        self.results[number] = result


def few_cpus_warning(cpus: int) -> str:
    return (
        f"this host has {cpus} CPUs: each side of the duet runs its server and its pgbench "
        f"on {cpus // SIDES} CPU(s), so they compete with each other (at least {FAIR_CPUS} "
        "give each its own)"
    )
