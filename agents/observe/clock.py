"""The time source of the samplers: read the monotonic clock, wait for the next tick.

Production uses `SystemClock`; tests pass a clock that moves only when told,
so they assert the schedule itself rather than how busy the machine was.
"""

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """What a periodic sampler needs from time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (any origin)."""
        ...

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        """Wait `seconds` or until `stop` is set; True if `stop` is set (as `Event.wait`)."""
        ...


class SystemClock:
    """The real monotonic clock; waiting ends at once when stop is asked for."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        return stop.wait(seconds)


SYSTEM_CLOCK = SystemClock()
