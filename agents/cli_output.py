"""What the CLI shows a person: one readable line per event on stderr."""

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from agents.contract.reports.results import ResultDocument
from agents.contract.spec.manifest import Manifest, command_shape
from agents.events import Sink


def human_sink(stream: TextIO = sys.stderr) -> Sink:
    """A sink printing status, steps, live tps and finished points for a person to read."""

    def write(event: Mapping[str, Any]) -> None:
        line = describe(event)
        if line:
            stream.write(line + "\n")
            stream.flush()

    return write


def describe(event: Mapping[str, Any]) -> str | None:
    """One line for a person, or None for events a person need not see (samples, result)."""
    data, kind = event["data"], event["type"]
    if kind == "status":
        return f"[{data['state']}] {data['message']}"
    if kind == "step":
        percent = f" {data['percent']:.0f}%" if data.get("percent") is not None else ""
        return f"  {data['name']}{percent}: {data['message']}"
    if kind == "progress":
        estimated = (data.get("sampling_rate") or 1.0) < 1.0
        return (
            f"  point {data['point'] + 1} ({data['clients']} clients, run {data['repeat']}) "
            f"t={data['t']:.0f}s  {'~' if estimated else ''}{data['tps']:.1f} tps  "
            f"lat {data['latency_ms']:.3f} ms"
            + (f"  (from {data.get('sampled')} sampled transactions)" if estimated else "")
        )
    if kind == "point":
        return (
            f"  => {data['clients']} clients, run {data['repeat']}: {data['tps']:.2f} tps, "
            f"latency {data['latency_avg_ms']} ms avg"
        )
    if kind == "log":
        return f"  {data['level']}: {data['message']}"
    return None


def print_json(document: object) -> None:
    print(json.dumps(document, indent=2, default=str))


def print_summary(result: ResultDocument) -> None:
    """A short table of the points after the JSON, on stderr so stdout stays pure JSON."""
    lines = [f"status: {result['status']}"]
    error = result["error"]
    if error:
        field = f" ({error['field']})" if error["field"] else ""
        lines.append(f"error: {error['code']}{field}: {error['message']}")
    if result["points"]:
        lines.append(f"{'clients':>8} {'run':>4} {'tps':>12} {'lat avg ms':>11} {'p95 ms':>9}")
    for point in result["points"]:
        percentiles = point["latency_percentiles_ms"]
        p95 = percentiles["p95"] if percentiles else None
        lines.append(
            f"{point['clients']:>8} {point['repeat']:>4} {_number(point['tps'], 12, 2)} "
            f"{_number(point['latency_avg_ms'], 11, 3)} {_number(p95, 9)}"
        )
    sys.stderr.write("\n".join(lines) + "\n")


def _number(value: float | None, width: int, decimals: int | None = None) -> str:
    """`value` right-aligned in `width` (to `decimals` places), or a dash for a point without it."""
    if value is None:
        return "-".rjust(width)
    text = str(value) if decimals is None else f"{value:.{decimals}f}"
    return text.rjust(width)


def print_replay(manifest: Manifest, result: ResultDocument) -> None:
    """On stderr: each replayed point next to the recorded one, and whether the commands match."""
    recorded = {(p["clients"], p["repeat"]): p["tps"] for p in manifest["points"]}
    lines = [f"{'clients':>8} {'run':>4} {'recorded tps':>13} {'replayed tps':>13}"]
    for point in result["points"]:
        before = recorded.get((point["clients"], point["repeat"]))
        lines.append(
            f"{point['clients']:>8} {point['repeat']:>4} {_number(before, 13, 2)} "
            f"{_number(point['tps'], 13, 2)}"
        )
    shapes = [command_shape(c["argv"]) for c in manifest["commands"]]
    same = shapes == [command_shape(c["argv"]) for c in result["steps"]]
    lines.append(f"commands: {'same as recorded' if same else 'differ from the recorded ones'}")
    sys.stderr.write("\n".join(lines) + "\n")


def build_progress_printer(stream: TextIO = sys.stderr) -> Callable[[str, float | None], None]:
    """A build progress callback printing "build 42%: compiling (...)" lines, one per change."""
    last: list[str] = []

    def show(message: str, percent: float | None) -> None:
        line = (
            f"  build {percent:.0f}%: {message}" if percent is not None else f"  build: {message}"
        )
        if last[-1:] != [line]:
            stream.write(line + "\n")
            stream.flush()
            last[:] = [line]

    return show
