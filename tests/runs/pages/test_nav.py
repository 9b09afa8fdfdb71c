"""The main nav marks the link of the page shown, by the page's URL name."""

import re

from django.urls import get_resolver

from runs.templatetags.benchlab_nav import NAV_LINKS
from tests.runs.factories import HostFactory, RunFactory

ACTIVE = re.compile(r'<a href="[^"]*" class="active" aria-current="page">([^<]+)</a>')


def test_every_page_a_link_marks_is_a_url_name_and_belongs_to_one_link() -> None:
    names = {name for name in get_resolver().reverse_dict if isinstance(name, str)}
    pages = [page for item in NAV_LINKS for page in item.pages]

    assert [page for page in pages if page not in names] == []
    assert len(pages) == len(set(pages))


def test_the_link_of_the_page_shown_is_marked_and_no_other(signed_in) -> None:
    run = RunFactory()
    host = HostFactory()
    expected = {
        "/": "Runs",
        f"/runs/{run.pk}/": "Runs",
        "/experiments/new": "Schedule",
        "/schedule/": "Schedule",
        f"/hosts/{host.pk}/": "Hosts",
        f"/hosts/{host.pk}/queue/": "Hosts",
        "/configs/new": "Configs",
        "/comparisons/": "Comparisons",
        "/import/": "Import",
    }

    marked = {path: ACTIVE.findall(signed_in.get(path).content.decode()) for path in expected}

    assert marked == {path: [label] for path, label in expected.items()}
