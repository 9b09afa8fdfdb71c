"""The compare page at the presets' size in Chromium at 1,280 px: preset 1 (2 versions x 4
configs x 2 storage layouts, 16 cells) and preset 3 (2 versions x 3 workloads x 3 client
counts), with results made by factories. The chosen axes and facets are drawn, legends
are unique and smaller than their plots, every trace is told apart, no label lands on
another, no interval goes below zero and no bar is on a log axis (tests/e2e/honesty.py),
nothing scrolls sideways, the baseline changes in place, and a share link draws the same.
The experiment page of preset 1's 16 cells reads the same way.

Screenshots go to var/screenshots/ (not tracked); copy them to docs/screenshots/ on
purpose to refresh the guide's.
"""

import itertools
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from runs.models import Comparison, Run
from tests.e2e.honesty import assert_honest, overlapping_labels, watch_other_hosts
from tests.runs.factories import (
    ConfigProfileFactory,
    ExperimentFactory,
    HostFactory,
    PgBuildFactory,
    WorkloadFactory,
)
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.e2e

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
VERSIONS = ("PostgreSQL 16", "PostgreSQL 17")
LADDER = {
    "defaults": {},
    "tuning 1: WAL": {"wal_buffers": "16MB", "max_wal_size": "4GB"},
    "tuning 2: memory": {"wal_buffers": "16MB", "max_wal_size": "4GB", "shared_buffers": "256MB"},
    "tuning 3: more memory": {
        "wal_buffers": "16MB",
        "max_wal_size": "4GB",
        "shared_buffers": "512MB",
    },
}
STORAGE_FACTS = {
    "data": {"name": "default", "device": "/dev/sda1", "filesystem": "ext4"},
    "wal": {"name": "wal", "device": "/dev/sda1", "filesystem": "ext4"},
}


def repeats(clients: list[int], tps: float) -> list[tuple[int, int, float, float]]:
    """Three repeats at each client count, 1 % apart, latency following tps."""
    return [
        (c, r, tps * (1 + 0.2 * n) * f, c * 1000 / (tps * f))
        for n, c in enumerate(clients)
        for r, f in ((1, 0.99), (2, 1.0), (3, 1.01))
    ]


def compared(runs: list[Run], name: str) -> Comparison:
    comparison = Comparison.objects.create(name=name, baseline=runs[0])
    comparison.runs.set(runs)
    return comparison


def preset_1() -> Comparison:
    experiment = ExperimentFactory(execution="blocks")
    host, workload = HostFactory(), WorkloadFactory(name="TPC-B scale 20")
    builds = [PgBuildFactory(name=v) for v in VERSIONS]
    profiles = {name: ConfigProfileFactory(name=name, settings=s) for name, s in LADDER.items()}
    runs = []
    cells = itertools.product(enumerate(builds), enumerate(profiles), ("", "wal"))
    for n, ((v, build), (c, profile), wal) in enumerate(cells):
        tps = 450 * (1 + 0.6 * c) * (1 + 0.1 * v) * (1.8 if wal else 1)
        runs.append(
            finished_run(
                repeats([10, 20], tps),
                experiment=experiment,
                host=host,
                workload=workload,
                build=build,
                config_profile=profiles[profile],
                settings=LADDER[profile],
                storage_wal=wal,
                storage_facts=STORAGE_FACTS if wal else {"data": STORAGE_FACTS["data"]},
                cell=n,
            )
        )
    return compared(runs, "Preset 1: tuning ladder, 16 vs 17, WAL apart")


INSERT_SQL = "".join(f"CREATE TABLE ins_{n} (id bigserial PRIMARY KEY, v int);\n" for n in range(6))


def preset_3() -> Comparison:
    experiment = ExperimentFactory(execution="blocks")
    host, profile = HostFactory(), ConfigProfileFactory(name="tuned")
    builds = [PgBuildFactory(name=v) for v in VERSIONS]
    workloads = [
        (WorkloadFactory(name="select-only"), 20000.0, ""),
        (WorkloadFactory(name="update by key"), 1500.0, ""),
        (WorkloadFactory(name="single-table inserts"), 1200.0, INSERT_SQL),
    ]
    runs = []
    cells = itertools.product(enumerate(builds), workloads)
    for n, ((v, build), (workload, tps, setup_sql)) in enumerate(cells):
        run = finished_run(
            repeats([1, 4, 16], tps * (1 + 0.15 * v)),
            experiment=experiment,
            host=host,
            config_profile=profile,
            build=build,
            workload=workload,
            cell=n,
        )
        run.spec["workload"] = {"setup_sql": setup_sql} if setup_sql else {}
        run.save(update_fields=["spec"])
        runs.append(run)
    return compared(runs, "Preset 3: 16 vs 17 over workloads and clients")


def experiment_of(comparison: Comparison) -> int:
    return comparison.runs.first().experiment_id


def open_comparison(page, url: str) -> None:
    page.goto(url)
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")


def drawn(page, element_id: str) -> dict:
    """What plotly drew in a chart: trace types, names and axes, the legend's entries and
    height, the plot area's height, and the facet titles."""
    return page.evaluate(
        """(id) => {
          const el = document.querySelector(`[data-figure="${id}"]`);
          const legend = el.querySelector('.legend');
          return {
            types: el.data.map(t => t.type),
            xaxes: [...new Set(el.data.map(t => t.xaxis))],
            legend: [...el.querySelectorAll('.legend .traces .legendtext')].map(t => t.textContent),
            legendHeight: legend ? legend.getBoundingClientRect().height : 0,
            plotHeight: el._fullLayout._size.h,
            facets: (el.layout.annotations || []).map(a => a.text),
            categories: el.layout.xaxis.categoryarray || null,
            independentY: el.layout.yaxis2 ? !el.layout.yaxis2.matches : null,
          };
        }""",
        element_id,
    )


def trace_looks(page, element_id: str) -> list[list]:
    """Each legend entry's (colour, dash, marker, bar pattern) as plotly drew it."""
    return page.evaluate(
        """(id) => document.querySelector(`[data-figure="${id}"]`)._fullData
          .filter(t => t.showlegend)
          .map(t => [
            t.marker.color,
            t.line ? t.line.dash : null,
            [].concat(t.marker.symbol)[0],
            t.marker.pattern ? [].concat(t.marker.pattern.shape)[0] : null,
          ])""",
        element_id,
    )


def fits(page) -> dict:
    """Sideways overflow at this width: the page, and each table against its box."""
    return page.evaluate(
        """() => ({
          page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
          tables: Object.fromEntries([...document.querySelectorAll('.table-wrap')]
            .filter(w => w.querySelector('#compare-table, .pivot-table'))
            .map(w => [w.querySelector('table').id, w.scrollWidth - w.clientWidth])),
          cols: [...document.querySelectorAll('#compare-table tbody tr:nth-child(2) td')].map(
            td => [td.getBoundingClientRect().width | 0, td.textContent.trim().slice(0, 30)]),
        })"""
    )


def assert_apart(page, figure_id: str) -> dict:
    """Legend entries unique, each drawn its own way, the legend no taller than the plot,
    and no label on another."""
    chart = drawn(page, figure_id)
    assert len(chart["legend"]) == len(set(chart["legend"])), chart["legend"]
    looks = trace_looks(page, figure_id)
    assert len(looks) == len(chart["legend"]) and len({tuple(x) for x in looks}) == len(looks)
    assert chart["legendHeight"] < chart["plotHeight"], chart
    assert overlapping_labels(page, figure_id) == []
    assert_honest(page)
    return chart


def assert_readable(page, figure_id: str) -> dict:
    chart = assert_apart(page, figure_id)
    overflow = fits(page)
    assert overflow["page"] <= 0, overflow
    assert all(px <= 0 for px in overflow["tables"].values()), overflow
    assert set(overflow["tables"]) == {"compare-table", "pivot-tps", "pivot-latency_avg_ms"}
    return chart


def test_preset_1_at_16_cells_reads_as_configs_per_version_and_layouts_from_the_url(
    signed_in_page, web, browser
):
    comparison = preset_1()
    page = signed_in_page
    elsewhere = watch_other_hosts(page, web.url)
    url = f"{web.url}/comparisons/{comparison.pk}/"
    open_comparison(page, url)
    chart = assert_readable(page, "fig-cmp-tps")
    assert chart["types"] == ["bar"] * 4  # a trace per version in each storage facet
    assert chart["legend"] == list(VERSIONS)
    assert chart["categories"] == list(LADDER)
    assert chart["facets"] == ["<b>storage: default</b>", "<b>storage: default, WAL on wal</b>"]
    expect(page.locator("select[name=only_clients] option:checked")).to_have_text("20")
    expect(page.locator(".wal-warning")).to_contain_text("(/dev/sda1) for 8 cells")
    expect(page.locator("#diff-table thead")).to_contain_text("default, WAL on wal")
    expect(page.locator("#peaks-table tbody tr")).to_have_count(16)
    expect(page.locator("#peaks-table")).not_to_contain_text("None")
    hidden = ".modebar-btn[data-title*='Cloud'], .modebar-btn[data-title*='Chart Studio']"
    assert page.locator(f"{hidden}, .modebar-btn--logo").count() == 0
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "compare-preset-1.png"), clip=_top(page), full_page=True)

    # Each repeat one click away in the pivot.
    first = page.locator("#pivot-tps details.repeats").first
    first.locator("summary").click()
    expect(first).to_contain_text("#3")

    # Colour by storage instead, no facets, clients 10: the URL carries it.
    page.select_option("select[name=colour]", "storage")
    page.select_option("select[name=facet_col]", "none")
    page.click("#layout-form button[type=submit]")
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
    assert "colour=storage" in page.url and "facet_col=none" in page.url
    page.select_option("select[name=only_clients]", "10")
    page.select_option("select[name=only_version]", "PostgreSQL 17")
    page.click("#layout-form button[type=submit]")
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
    chart = assert_readable(page, "fig-cmp-tps")
    assert chart["legend"] == ["default", "default, WAL on wal"] and chart["facets"] == []
    assert "only_clients=10" in page.url

    # The baseline, by label, changes in place.
    baseline = "PostgreSQL 17 · tuning 2: memory · default, WAL on wal"
    page.select_option("#baseline-select", label=baseline)
    page.click("#layout-form button[type=submit]")
    expect(page.locator("#baseline-label")).to_have_text(baseline)
    assert re.search(rf"/comparisons/{comparison.pk}/\?", page.url)
    assert Comparison.objects.count() == 1
    expect(page.locator("#compare-table tr.baseline").first).to_contain_text(baseline)
    assert_readable(page, "fig-cmp-tps")

    # A share link made now draws the same chart layout against the same baseline.
    layout = drawn(page, "fig-cmp-tps")
    page.click("summary:has-text('Share')")
    page.click("button:has-text('Create share link')")
    link = page.locator("[data-share-link]").first.get_attribute("href")
    visitor = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    open_comparison(visitor, f"{web.url}{link}")
    assert drawn(visitor, "fig-cmp-tps") == layout
    expect(visitor.locator("#baseline-label")).to_have_text(baseline)
    assert_honest(visitor)
    visitor.context.close()
    assert elsewhere == []


def test_preset_3_draws_tps_against_clients_a_line_per_version_a_facet_per_workload(
    signed_in_page, web
):
    comparison = preset_3()
    page = signed_in_page
    open_comparison(page, f"{web.url}/comparisons/{comparison.pk}/")
    chart = assert_readable(page, "fig-cmp-tps")
    assert chart["types"] == ["scatter"] * 6
    assert chart["xaxes"] == ["x", "x2", "x3"]
    assert chart["legend"] == list(VERSIONS)
    assert chart["facets"] == [
        "<b>workload: select-only</b>",
        "<b>workload: update by key</b>",
        "<b>workload: single-table inserts</b>",
    ]
    assert chart["independentY"] is True  # select-only at 20k beside inserts at 1k
    title = page.locator("[data-figure=fig-cmp-tps] .g-gtitle")
    expect(title).to_contain_text("each panel has its own y axis")
    rows = page.locator("#pivot-tps tbody tr")
    expect(rows).to_have_count(9)  # workload x clients, versions as columns
    expect(page.locator("#pivot-tps thead")).to_contain_text("PostgreSQL 17")
    long_value = page.locator("#diff-table details.long-value").first
    expect(long_value.locator("summary")).to_contain_text("sha256")
    long_value.locator("summary").click()
    expect(long_value.locator("pre")).to_contain_text("CREATE TABLE ins_5")
    favicon = page.evaluate(
        "fetch(document.querySelector('link[rel=icon]').href).then(r => r.status)"
    )
    assert favicon == 200
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "compare-preset-3.png"), clip=_top(page), full_page=True)

    # Versions side by side as facets, a line per workload.
    page.select_option("select[name=colour]", "workload")
    page.select_option("select[name=facet_col]", "version")
    page.click("#layout-form button[type=submit]")
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
    chart = assert_readable(page, "fig-cmp-tps")
    assert chart["legend"] == ["select-only", "update by key", "single-table inserts"]
    assert chart["facets"] == [f"<b>version: {v}</b>" for v in VERSIONS]


def test_experiment_pages_tell_16_cells_apart_and_keep_peak_labels_apart(signed_in_page, web):
    experiment = experiment_of(preset_1())
    page = signed_in_page
    open_comparison(page, f"{web.url}/experiments/{experiment}/")
    chart = assert_apart(page, "fig-experiment")
    assert len(chart["legend"]) == 16
    assert chart["facets"] == []  # sixteen peak labels would bury the chart
    peaks = page.locator("#peaks-table")
    expect(peaks.locator("tbody tr")).to_have_count(16)
    chart_box = page.locator("[data-figure=fig-experiment]").bounding_box()
    assert peaks.bounding_box()["y"] >= chart_box["y"] + chart_box["height"]
    assert peaks.bounding_box()["y"] < page.locator("#experiment-stats").bounding_box()["y"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "experiment-preset-1.png"), full_page=True)

    # Three runs peaking at neighbouring client counts on a log axis: their labels,
    # placed at their points, would overlap; the page moves them apart.
    few = ExperimentFactory()
    for cell, best in enumerate((8, 9, 10)):
        tps = {c: 2500.0 - 10 * cell if c == best else 1000.0 + c for c in (1, 8, 9, 10)}
        finished_run([(c, 1, tps[c], 1.0) for c in tps], experiment=few, cell=cell)
    open_comparison(page, f"{web.url}/experiments/{few.pk}/")
    chart = assert_apart(page, "fig-experiment")
    assert len(chart["facets"]) == 3  # three peak labels, none on another nor on the title
    page.screenshot(path=str(SCREENSHOTS / "experiment-close-peaks.png"))


def _top(page) -> dict:
    """The page from its top to the end of the latency pivot: charts and tables."""
    bottom = page.evaluate(
        "document.getElementById('pivot-latency_avg_ms').getBoundingClientRect().bottom"
        " + window.scrollY"
    )
    return {"x": 0, "y": 0, "width": 1280, "height": bottom + 16}
