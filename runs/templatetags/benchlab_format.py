"""Template filters that print numbers the way people read them: tps with
thousands separators, milliseconds with three decimals, a dash for nothing."""

import json
import shlex

from django import template

register = template.Library()

NOTHING = "—"


@register.filter
def tps(value: float | None) -> str:
    """`12,345.6` (one decimal, thousands separated)."""
    return NOTHING if value is None else f"{value:,.1f}"


@register.filter
def ms(value: float | None) -> str:
    """`1.234` (three decimals; the unit is in the column header)."""
    return NOTHING if value is None else f"{value:,.3f}"


@register.filter
def count(value: int | None) -> str:
    """`1,234,567`."""
    return NOTHING if value is None else f"{value:,}"


@register.filter
def percent(value: float | None) -> str:
    """`+12.3 %` with an explicit sign, for deltas."""
    return NOTHING if value is None else f"{value:+.1f} %"


@register.filter
def size(value: int | None) -> str:
    """Bytes as KiB, MiB, GiB."""
    if value is None:
        return NOTHING
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(amount) < 1024 or unit == "TiB":
            return f"{amount:,.0f} {unit}" if unit == "B" else f"{amount:,.1f} {unit}"
        amount /= 1024
    return NOTHING


@register.filter
def seconds(value: float | None) -> str:
    """A duration as `1 h 02 min`, `3 min 05 s` or `12 s`."""
    if value is None:
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
def pretty_json(value) -> str:
    """Indented JSON for <pre> blocks."""
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.filter
def shell_join(argv: list | None) -> str:
    """An argv list as one copyable command line."""
    return shlex.join(str(part) for part in argv or [])


@register.filter
def lookup(mapping: dict | None, key):
    """`mapping[key]` in a template, or None."""
    return (mapping or {}).get(key)
