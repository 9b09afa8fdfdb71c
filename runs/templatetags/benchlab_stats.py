"""Template filters for statistics: intervals, differences with their CI, p-values."""

from django import template

from runs.inference.stats import Difference, Summary

register = template.Library()

NOTHING = "—"


def _number(value: float, decimals: int) -> str:
    return f"{value:,.{decimals}f}"


@register.filter
def interval(summary: Summary | str | None, decimals: int = 1) -> str:
    """`1,234.5 – 1,301.2`, the 95 % CI of the (geometric) mean; a dash with one repeat."""
    # A missing value reaches a filter as "" (the template's invalid-variable text).
    if not isinstance(summary, Summary) or summary.ci_low is None:
        return NOTHING
    low, high = summary.ci_low, summary.ci_high or summary.ci_low
    return f"{_number(low, decimals)} – {_number(high, decimals)}"


@register.filter
def diff_ci(difference: Difference | str | None) -> str:
    """`+3.1 % [+1.2, +5.0]`: the difference to the baseline with its 95 % CI."""
    if not isinstance(difference, Difference):
        return NOTHING
    d = difference
    return f"{d.pct:+.1f} % [{d.ci_low_pct:+.1f}, {d.ci_high_pct:+.1f}]"


@register.filter
def pvalue(value: float | str | None) -> str:
    """`0.003`, `<0.001`, or a dash."""
    if not isinstance(value, float | int):
        return NOTHING
    return "<0.001" if value < 0.001 else f"{value:.3f}"


@register.filter
def mde(value: float | str | None) -> str:
    """The minimum detectable effect, `±4.2 %`."""
    return f"±{value:.1f} %" if isinstance(value, float | int) else NOTHING
