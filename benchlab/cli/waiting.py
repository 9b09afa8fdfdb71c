"""Waiting for an experiment with its progress on the terminal; Ctrl-C detaches (the
experiment keeps running) and says how to come back."""

import time
from collections.abc import Mapping
from typing import Any

from benchlab.cli.client import Api
from benchlab.cli.output import Output

POLL_S = 2.0
OPEN_STATUSES = ("queued", "running")
DONE = ("succeeded", "failed", "cancelled")


class Detached(Exception):
    """The user pressed Ctrl-C while waiting: the experiment goes on without us."""


def progress_words(progress: Mapping[str, Any]) -> str:
    """One line: status, runs done of all, round of the budget, what runs, time left."""
    runs = progress["runs"]
    done = sum(runs.get(status, 0) for status in DONE)
    said = f"experiment {progress['id']}: {progress['status']}, {done}/{runs['total']} runs done"
    unhappy = [f"{runs[s]} {s}" for s in ("failed", "cancelled") if runs.get(s)]
    if unhappy:
        said += f" ({', '.join(unhappy)})"
    if progress["rounds"] is not None and progress["max_rounds"]:
        said += f", round {progress['rounds']} of at most {progress['max_rounds']}"
    for run in progress["running"][:1]:
        said += (
            f"; run {run['id']} ({run['build']}, {run['workload']}): {run['step'] or 'starting'}"
        )
    left = progress["remaining_seconds"]
    if left and progress["status"] in OPEN_STATUSES:
        said += f"; about {_duration(left)} left"
    return said


def _duration(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def wait_for_experiment(api: Api, experiment_id: int, output: Output) -> dict[str, Any]:
    """Poll the experiment's progress until it ends; its last progress. Raises Detached
    on Ctrl-C, after saying how to reattach."""
    try:
        while True:
            progress: dict[str, Any] = api.get(f"experiments/{experiment_id}/progress/")
            output.progress(progress_words(progress))
            if progress["status"] not in OPEN_STATUSES:
                output.end_progress()
                return progress
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        output.message(
            f"detached: experiment {experiment_id} goes on in the lab. Reattach with "
            f"`benchlab status {experiment_id}`; stop it with `benchlab cancel {experiment_id}`."
        )
        raise Detached from None
