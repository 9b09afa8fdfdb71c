"""A clock for sampler tests that moves only when a test lets it."""

import threading
import time
from collections.abc import Callable

REAL_TIMEOUT_S = 10.0  # how long a test waits for the sampler thread, in real seconds
POLL_S = 0.002  # how often a parked waiter looks at its stop event, in real seconds


class FakeClock:
    """Monotonic time under the test's control.

    A sampler's `wait` advances time instantly, but never past the horizon the
    test opened with `run_for`: there it parks until the horizon moves or stop
    is asked for. `spend` stands for a step that takes time (a slow sample).
    Times and intervals in tests are binary fractions (0.25, 0.5), so tick
    arithmetic is exact.
    """

    def __init__(self, origin: float = 1000.0):
        self._now = origin
        self._horizon = origin
        self._parked = False
        self._changed = threading.Condition()
        self.waits: list[float] = []  # every wait the sampler asked for, in seconds

    def monotonic(self) -> float:
        with self._changed:
            return self._now

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        with self._changed:
            self.waits.append(seconds)
            target = self._now + seconds
            while target > self._horizon and not stop.is_set():
                self._now = max(self._now, self._horizon)
                self._parked = True
                self._changed.notify_all()
                self._changed.wait(POLL_S)
            self._parked = False
            if stop.is_set():
                return True
            self._now = target
            return False

    def spend(self, seconds: float) -> None:
        """Time passes inside a step (the sampler's thread is busy, not waiting)."""
        with self._changed:
            self._now += seconds

    def allow(self, seconds: float) -> None:
        """Let time run `seconds` past the current horizon, without waiting for the sampler."""
        with self._changed:
            self._horizon += seconds
            self._parked = False
            self._changed.notify_all()

    def run_for(self, seconds: float) -> None:
        """Let time run `seconds` more and return once the sampler is parked at the horizon."""
        self.allow(seconds)
        with self._changed:
            parked = self._changed.wait_for(lambda: self._parked, REAL_TIMEOUT_S)
        if not parked:
            raise AssertionError(f"the sampler did not reach t+{seconds} s on the fake clock")


def wait_until(condition: Callable[[], bool]) -> None:
    """Wait in real time for something the sampler thread does on its own."""
    deadline = time.monotonic() + REAL_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(POLL_S)
