"""Helpers for tests that run whole jobs: a small spec, and running it while keeping its events."""

from collections.abc import Callable
from typing import Any

from agents.config import AgentConfig
from agents.contract.reports.results import ResultDocument
from agents.events import EventEmitter
from agents.job import run_job

Event = dict[str, Any]


def small_spec(**overrides: Any) -> dict:
    """A two-point job (1 and 2 clients, 2 s each) on PostgreSQL 16, scale 1, tpcb-like;
    a dict override is merged into its section, anything else replaces it."""
    spec: dict[str, Any] = {
        "version": 1,
        "run_id": "test",
        "postgres": {"version": "16", "source": "prebuilt"},
        "storage": {"data": "data", "wal": "wal"},
        "dataset": {"scale": 1},
        "workload": {"scripts": [{"builtin": "tpcb-like", "weight": 1}]},
        "sweep": {"clients": [1, 2], "duration_s": 2, "repeats": 1},
    }
    for section, value in overrides.items():
        spec[section] = {**spec.get(section, {}), **value} if isinstance(value, dict) else value
    return spec


class Recorder:
    """An event sink keeping every event, with an optional hook per event."""

    def __init__(self, hook: Callable[[Event], None] | None = None):
        self.events: list[Event] = []
        self.hook = hook

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if self.hook:
            self.hook(event)

    def of_type(self, event_type: str) -> list[Event]:
        return [event for event in self.events if event["type"] == event_type]


def run(
    spec: dict,
    config: AgentConfig,
    hook: Callable[[Event], None] | None = None,
    should_cancel: Callable[[], bool] = lambda: False,
) -> tuple[ResultDocument, Recorder]:
    """Run `spec` as the worker would; its result document and the events it sent."""
    recorder = Recorder(hook)
    emitter = EventEmitter([recorder], run_id=spec.get("run_id"))
    return run_job(spec, config, emitter, should_cancel), recorder
