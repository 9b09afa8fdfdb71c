"""What the CLI shows a person: one readable line per event on stderr."""

import json
import sys


def human_sink(stream=sys.stderr):
    """A sink printing status, steps, live tps and finished points for a person to read."""

    def write(event: dict) -> None:
        line = describe(event)
        if line:
            stream.write(line + "\n")
            stream.flush()

    return write


def describe(event: dict) -> str | None:
    data, kind = event["data"], event["type"]
    if kind == "status":
        return f"[{data['state']}] {data['message']}"
    if kind == "step":
        percent = f" {data['percent']:.0f}%" if data.get("percent") is not None else ""
        return f"  {data['name']}{percent}: {data['message']}"
    if kind == "progress":
        return (
            f"  point {data['point'] + 1} ({data['clients']} clients, run {data['repeat']}) "
            f"t={data['t']:.0f}s  {data['tps']:.1f} tps  lat {data['latency_ms']:.3f} ms"
        )
    if kind == "point":
        return (
            f"  => {data['clients']} clients, run {data['repeat']}: {data['tps']:.2f} tps, "
            f"latency {data['latency_avg_ms']} ms avg"
        )
    if kind == "log":
        return f"  {data['level']}: {data['message']}"
    return None


def print_json(document) -> None:
    print(json.dumps(document, indent=2, default=str))


def print_summary(result: dict) -> None:
    """A short table of the points after the JSON, on stderr so stdout stays pure JSON."""
    lines = [f"status: {result['status']}"]
    if result.get("error"):
        error = result["error"]
        field = f" ({error['field']})" if error.get("field") else ""
        lines.append(f"error: {error['code']}{field}: {error['message']}")
    if result["points"]:
        lines.append(f"{'clients':>8} {'run':>4} {'tps':>12} {'lat avg ms':>11} {'p95 ms':>9}")
    for point in result["points"]:
        p95 = (point.get("latency_percentiles_ms") or {}).get("p95")
        lines.append(
            f"{point['clients']:>8} {point['repeat']:>4} {point['tps']:>12.2f} "
            f"{point['latency_avg_ms'] or 0:>11.3f} {p95 if p95 is not None else '-':>9}"
        )
    sys.stderr.write("\n".join(lines) + "\n")
