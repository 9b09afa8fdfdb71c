"""One way for tests to wait for something that happens in another thread or process."""

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T],
    timeout: float = 10.0,
    what: str = "the condition",
    context: Callable[[], str] = lambda: "",
    interval: float = 0.05,
) -> T:
    """Poll `condition` until it returns something truthy and return that.

    After `timeout` seconds the test fails naming `what`, followed by
    `context()` (a process's log, say) to show why.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{context()}")
