"""`{% with around=alert|commits_around %}`: the commits an alert's change point lies
between, when a bisection can search them (runs/bisection/origins.py)."""

from django import template

from runs.bisection.origins import alert_commits
from runs.models import Alert

register = template.Library()


@register.filter
def commits_around(alert: Alert) -> dict[str, str]:
    """{"good", "bad"} commits around the alert, or {"why": the reason there are none}."""
    found = alert_commits(alert)
    if isinstance(found, str):
        return {"why": found}
    _repository, good, bad = found
    return {"good": good, "bad": bad}
