"""Access to the captured pgbench fixtures (see fixtures/README.md)."""

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
CAPTURED = ["pg14", "pg15", "pg15_debian_client", "pg16", "pg17", "pg18"]
VERSIONS = ["pg14", "pg15", "pg16", "pg17", "pg18"]


@dataclass(frozen=True)
class Capture:
    """One captured run: its two streams, its exit code and its log files."""

    label: str
    scenario: str
    stdout: str
    stderr: str
    exit_code: int
    argv: tuple[str, ...]

    @property
    def text(self) -> str:
        return self.stdout + self.stderr

    @property
    def log_files(self) -> list[Path]:
        return sorted((FIXTURES / self.label / f"{self.scenario}.logs").iterdir())


@cache
def manifest(label: str) -> dict:
    return json.loads((FIXTURES / label / "manifest.json").read_text())


def capture(label: str, scenario: str) -> Capture:
    directory = FIXTURES / label
    entry = manifest(label)[scenario]
    return Capture(
        label=label,
        scenario=scenario,
        stdout=(directory / f"{scenario}.stdout").read_text(),
        stderr=(directory / f"{scenario}.stderr").read_text(),
        exit_code=entry["exit_code"],
        argv=tuple(entry["argv"]),
    )


def all_captures(prefix: str = "") -> list[tuple[str, str]]:
    """(label, scenario) of every capture whose scenario name starts with `prefix`."""
    return [
        (label, scenario)
        for label in CAPTURED
        for scenario in manifest(label)
        if scenario.startswith(prefix)
    ]
