"""A job's measured part: the Sweep (agents/sweep/driver.py) and its point strategies.

The point strategies (local.py, process_group.py; agents/pair/remote.py for a client host) take a
`PointContext` (context.py), never the Sweep, so they import only the context.
"""

from agents.sweep.context import (
    PointContext,
    PointRunner,
    SweepPlace,
    SweepReporter,
    as_point_result,
)
from agents.sweep.driver import Sweep
from agents.sweep.local import LocalPoints

__all__ = [
    "LocalPoints",
    "PointContext",
    "PointRunner",
    "Sweep",
    "SweepPlace",
    "SweepReporter",
    "as_point_result",
]
