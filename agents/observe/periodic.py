"""A daemon thread that takes one sample per interval on a drift-free schedule.

Subclasses say how to begin (take a baseline), how to take one sample and how
to end. Ticks are aligned to the start time on the monotonic clock: a slow
sample delays one tick, never every later one, and a missed tick is skipped
rather than taken late. Time comes from a `Clock` (the system's by default),
so tests can drive the schedule without sleeping.
"""

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from agents.contract.reports.results import Sample
from agents.observe.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)

SampleCallback = Callable[[Sample], None]
StepResult = TypeVar("StepResult")


class PeriodicSampler:
    """Base class: `start()` begins sampling, `stop()` ends it and returns every sample.

    A sampler never raises into the job: when it has to stop on its own it keeps
    the samples taken so far and says why in `error`.
    """

    thread_name = "benchlab-sampler"

    def __init__(
        self,
        interval: float = 1.0,
        on_sample: SampleCallback | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ):
        if interval <= 0:
            raise ValueError(f"sampling interval must be positive, got {interval}")
        self.interval = interval
        self.clock = clock
        self.on_sample = on_sample
        self.cpu_seconds = 0.0  # CPU time the thread spent sampling (callbacks excluded)
        self.error: str | None = None  # why sampling stopped on its own, if it did
        self._samples: list[Sample] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_at = 0.0

    def start(self) -> None:
        """Begin sampling in a daemon thread; the first sample comes one interval later."""
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        self._prepare()
        self._started_at = self.clock.monotonic()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> list[Sample]:
        """Stop sampling, wait for the thread, and return all samples taken."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        return list(self._samples)

    @property
    def running(self) -> bool:
        """True while the sampling thread is alive (it ends on stop() or on its own error)."""
        return self._thread is not None and self._thread.is_alive()

    def elapsed(self) -> float:
        """Seconds since `start()`, rounded to milliseconds: the `t` of a sample."""
        return round(self.clock.monotonic() - self._started_at, 3)

    def _prepare(self) -> None:
        """What to settle in the caller's thread before sampling starts (nothing by default)."""

    def _begin(self) -> bool:
        """Prepare (connect, read a baseline); False ends the thread without sampling."""
        return True

    def _sample(self) -> Sample | None:
        """Take one sample; None ends sampling."""
        raise NotImplementedError

    def _end(self) -> None:
        """Release what `_begin` acquired."""

    def _wait_for_next_tick(self) -> bool:
        """Sleep until the next tick on the schedule; False once stop was asked for."""
        since_start = self.clock.monotonic() - self._started_at
        next_tick = (math.floor(since_start / self.interval) + 1) * self.interval
        return not self.clock.wait(next_tick - since_start, self._stopping)

    def _run(self) -> None:
        try:
            self._sample_until_stopped()
        except Exception as error:
            message = "%s: sampling stopped by an unexpected error"
            _stopped_by(self, error, message, self.thread_name)
        finally:
            self._end()

    def _sample_until_stopped(self) -> None:
        if not self._measured(self._begin):
            return
        while self._wait_for_next_tick():
            sample = self._measured(self._sample)
            if sample is None:
                return
            self._samples.append(sample)
            self._deliver(sample)

    def _measured(self, step: Callable[[], StepResult]) -> StepResult:
        """Run one step of the sampler, adding its CPU time (not the callback's) to cpu_seconds."""
        cpu_before = time.thread_time()
        try:
            return step()
        finally:
            self.cpu_seconds += time.thread_time() - cpu_before

    def _deliver(self, sample: Sample) -> None:
        if self.on_sample is None:
            return
        try:
            self.on_sample(sample)
        except Exception:
            logger.exception("%s: sample callback failed; sampling continues", self.thread_name)


class SamplersTogether(PeriodicSampler):
    """Several samplers on one thread and one schedule: a tick wakes one thread, not one
    per sampler, and its samples reach `on_sample` as one document, each under its
    sampler's key ({"host": ..., "server": ...}).

    Each member keeps its own samples (its `stop()` returns them) and its own `error`.
    A member that cannot begin, ends its sampling or fails is left out from then on
    (a failure is logged with its traceback); the others go on.
    """

    thread_name = "benchlab-samplers"

    def __init__(
        self,
        members: Mapping[str, PeriodicSampler],
        interval: float = 1.0,
        on_sample: SampleCallback | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ):
        super().__init__(interval, on_sample, clock)
        self.members = dict(members)
        self._sampling: dict[str, PeriodicSampler] = {}

    def _prepare(self) -> None:
        for member in self.members.values():
            member._prepare()

    def _begin(self) -> bool:
        for key, member in self.members.items():
            member._started_at = self._started_at  # their `t` counts from the same start
            if self._member_step(key, member, member._begin):
                self._sampling[key] = member
        return bool(self._sampling)

    def _sample(self) -> Sample | None:
        together: Sample = {}
        for key, member in list(self._sampling.items()):
            sample = self._member_step(key, member, member._sample)
            if sample is None:
                del self._sampling[key]
                continue
            member._samples.append(sample)
            together[key] = sample
        return together if self._sampling else None

    def _end(self) -> None:
        for key, member in self.members.items():
            self._member_step(key, member, member._end)

    def _member_step(
        self, key: str, member: PeriodicSampler, step: Callable[[], StepResult]
    ) -> StepResult | None:
        """One member's step; None (and the member's `error` set) where it raised."""
        try:
            return step()
        except Exception as error:
            message = "%s: the %s sampler stopped by an unexpected error"
            _stopped_by(member, error, message, self.thread_name, key)
            return None


def _stopped_by(sampler: PeriodicSampler, error: Exception, message: str, *args: object) -> None:
    """A bug must not pass silently, but neither may it take the job down: the traceback is
    logged (`message` % `args`) and the runner sees the sampler's `error`."""
    logger.exception(message, *args)
    sampler.error = f"{type(error).__name__}: {error}"
