"""`{% main_nav %}`: the top bar's links, the one for the page shown marked active.

Each link names the pages it stands for by their URL names (runs/urls_pages.py), so
the mark follows the URL conf, not the spelling of a path or of a name's prefix.
"""

from dataclasses import dataclass
from typing import Any

from django import template
from django.urls import reverse

register = template.Library()


@dataclass(frozen=True)
class NavLink:
    """A link of the main nav: its label, the page it opens and the pages it marks."""

    label: str
    url_name: str
    pages: frozenset[str]


def link(label: str, url_name: str, *other_pages: str) -> NavLink:
    return NavLink(label, url_name, frozenset({url_name, *other_pages}))


NAV_LINKS = (
    link("Runs", "run-list", "run-detail"),
    link("Experiments", "experiment-list", "experiment-detail"),
    link("Schedule", "schedule", "schedule-first-address"),
    link("Bisections", "bisection-list", "bisection-new", "bisection-detail"),
    link("Comparisons", "comparison-list", "comparison-detail"),
    link("Hosts", "host-list", "host-detail", "host-queue"),
    link("Builds", "build-list"),
    link("Configs", "config-list", "config-new", "config-detail"),
    link("Workloads", "workload-list", "workload-new", "workload-detail"),
    link("Series", "series-list", "series-detail"),
    link("Alerts", "alert-list"),
    link("Import", "import"),
)


@register.inclusion_tag("runs/_nav.html", takes_context=True)
def main_nav(context: template.Context) -> dict[str, Any]:
    """The nav's links as (label, address, whether it is the page's)."""
    match = getattr(context.get("request"), "resolver_match", None)
    page = match.url_name if match is not None else None
    return {
        "links": [(item.label, reverse(item.url_name), page in item.pages) for item in NAV_LINKS]
    }
