"""Template filters that print numbers the way people read them: tps with
thousands separators, milliseconds with three decimals, a dash for nothing."""

import json
import math
import shlex
from collections.abc import Iterable, Mapping
from typing import TypeGuard, TypeVar

from django import template

from agents.contract.reports.latency import LatencyPercentiles, describe_percentiles
from agents.contract.reports.results import EffectiveSetting
from runs.analysis.compare import setting_text

register = template.Library()

NOTHING = "—"

Key = TypeVar("Key")
Value = TypeVar("Value")


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


@register.filter
def tps(value: object) -> str:
    """`12,345.6` (one decimal, thousands separated)."""
    return f"{value:,.1f}" if _is_number(value) else NOTHING


@register.filter
def ms(value: object) -> str:
    """`1.234` (three decimals; the unit is in the column header)."""
    return f"{value:,.3f}" if _is_number(value) else NOTHING


@register.filter
def count(value: object) -> str:
    """`1,234,567`."""
    return f"{value:,}" if _is_number(value) else NOTHING


@register.filter
def percent(value: object) -> str:
    """`+12.3 %` with an explicit sign, for deltas."""
    return f"{value:+.1f} %" if _is_number(value) else NOTHING


@register.filter
def log_sd_percent(value: object) -> str:
    """A variance of log values as the sd people read as a percent spread: `12.3 %`."""
    return f"{math.sqrt(max(float(value), 0.0)) * 100:.1f} %" if _is_number(value) else NOTHING


@register.filter
def size(value: object) -> str:
    """Bytes as KiB, MiB, GiB."""
    if not _is_number(value):
        return NOTHING
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(amount) < 1024 or unit == "TiB":
            return f"{amount:,.0f} {unit}" if unit == "B" else f"{amount:,.1f} {unit}"
        amount /= 1024
    return NOTHING


@register.filter
def seconds(value: object) -> str:
    """A duration as `1 h 02 min`, `3 min 05 s` or `12 s`."""
    if not _is_number(value):
        return NOTHING
    total = round(value)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


@register.filter
def pretty_json(value: object) -> str:
    """Indented JSON for <pre> blocks."""
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.filter
def shell_join(argv: Iterable[object] | None) -> str:
    """An argv list as one copyable command line."""
    return shlex.join(str(part) for part in argv or [])


@register.filter
def percentile_source(percentiles: LatencyPercentiles | None) -> str:
    """Where a point's percentiles come from: "from a 2 % sample, 41,000 transactions"."""
    return describe_percentiles(percentiles)


@register.filter
def lookup(mapping: Mapping[Key, Value] | None, key: Key) -> Value | None:
    """`mapping[key]` in a template, or None."""
    return (mapping or {}).get(key)


@register.filter
def pg_value(row: EffectiveSetting) -> str:
    """An effective-settings row's value with its unit: `128MB`, `200 ms`, `on`."""
    return setting_text(row.get("setting"), row.get("unit"))


BUILD_LOG_TAIL_LINES = 40


@register.filter
def build_log_tail(log: str | None) -> str:
    """The last lines of a source build's log, where a failure says what went wrong."""
    return "\n".join((log or "").rstrip().splitlines()[-BUILD_LOG_TAIL_LINES:])


@register.filter
def significant(value: float | None) -> str:
    """A value to 3 significant digits (a counter per transaction), "—" when unknown."""
    return "—" if value is None else f"{value:.3g}"


@register.filter
def per_call(total: int, calls: int) -> float | None:
    """A statement's total over its calls (rows or blocks per call); None without calls."""
    return total / calls if calls else None
