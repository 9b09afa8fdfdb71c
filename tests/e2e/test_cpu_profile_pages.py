"""CPU profiles in Chromium: real jobs on PostgreSQL 16 and 17 (the prebuilt binaries, perf
recording each server during its CPU-profile pass), their events stored by the lab; the
run page draws a flame graph reaching into the backends' functions, and the compare page
a differential flame graph of 17 against 16.

Screenshots go to var/screenshots/ (run-flame-graph.png, compare-flame-graph.png; not
tracked): copy them to docs/screenshots/ on purpose to refresh the guide's.
"""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from agents.config import AgentConfig
from runs.models import Comparison, Run
from tests.agents.conftest import config, storage_root  # noqa: F401 (fixtures)
from tests.agents.jobs import small_spec
from tests.runs.factories import PgBuildFactory
from tests.runs.pages.test_cpu_profiles import measured_by_the_agent

pytestmark = pytest.mark.e2e

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def run_with_cpu_profile(version: str, agent_config: AgentConfig, like: Run | None = None) -> Run:
    """A run of `version` with its CPU profile; `like`'s host, config and workload (so the
    comparison's labels name the version only)."""
    spec = small_spec(
        postgres={"version": version, "source": "prebuilt"},
        workload={"scripts": [{"builtin": "select-only", "weight": 1}]},
        sweep={"clients": [2], "duration_s": 3, "repeats": 1, "cpu_profile": True},
    )
    run = measured_by_the_agent(spec, agent_config)
    major = version.split(".")[0]
    run.build = PgBuildFactory(name=f"PostgreSQL {major}", version=major)
    if like is not None:
        run.host, run.config_profile, run.workload = like.host, like.config_profile, like.workload
    run.save(update_fields=["build", "host", "config_profile", "workload"])
    return run


def drawn(page, figure_id: str) -> dict:
    return page.evaluate(
        """(id) => {
          const el = document.querySelector(`[data-figure="${id}"]`);
          return {
            type: el.data[0].type,
            labels: [...el.querySelectorAll('text')].map(t => t.textContent),
            colours: el.data[0].marker.colors.slice(0, 3),
            height: el.getBoundingClientRect().height,
          };
        }""",
        figure_id,
    )


def noise_of(page, figure_id: str) -> dict:
    """The colour values of the frames within and beyond noise, and the fills drawn."""
    return page.evaluate(
        """(id) => {
          const el = document.querySelector(`[data-figure="${id}"]`);
          const trace = el.data[0];
          const pick = (word) => trace.customdata
            .map((row, i) => row[3] === word ? trace.marker.colors[i] : null)
            .filter((value) => value !== null);
          return {
            within: pick('within noise'),
            beyond: pick('beyond noise'),
            fills: [...el.querySelectorAll('path.surface')].map((p) => p.style.fill),
          };
        }""",
        figure_id,
    )


def test_flame_graphs_of_16_and_17_on_the_run_and_compare_pages(
    signed_in_page,
    web,
    config: AgentConfig,  # noqa: F811
) -> None:
    pg16 = run_with_cpu_profile("16.15", config)
    pg17 = run_with_cpu_profile("17.11", config, like=pg16)
    comparison = Comparison.objects.create(name="16 against 17, CPU profiles", baseline=pg16)
    comparison.runs.set([pg16, pg17])
    page = signed_in_page
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    page.goto(f"{web.url}/runs/{pg17.pk}/")
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
    flame = drawn(page, "fig-cpu-profile-0")
    assert flame["type"] == "icicle" and flame["height"] > 300
    assert "PostgresMain" in flame["labels"], flame["labels"][:40]
    expect(page.locator("#cpu-profiles h2")).to_contain_text("not a measured result")
    page.locator("#cpu-profiles").screenshot(path=str(SCREENSHOTS / "run-flame-graph.png"))

    page.goto(f"{web.url}/comparisons/{comparison.pk}/")
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
    difference = drawn(page, f"fig-cpu-profile-diff-{pg17.pk}")
    assert difference["type"] == "icicle"
    assert "PostgresMain" in difference["labels"]
    assert all(isinstance(colour, int | float) for colour in difference["colours"])
    expect(page.locator("#cpu-profile-differences")).to_contain_text("red hotter")
    # Frames within sampling noise sit at 0 on the scale and are drawn grey (the root
    # always is: its share is 1 on both sides); the graph says what it rests on.
    noise = noise_of(page, f"fig-cpu-profile-diff-{pg17.pk}")
    assert noise["within"] and all(value == 0 for value in noise["within"])
    assert all(value != 0 for value in noise["beyond"])
    assert "rgb(189, 189, 189)" in noise["fills"], noise["fills"][:20]
    expect(page.locator(f"#chart-fig-cpu-profile-diff-{pg17.pk}")).to_contain_text(
        "samples against the baseline's"
    )
    expect(page.locator(f"#chart-fig-cpu-profile-diff-{pg17.pk}")).to_contain_text(
        "grey: within noise"
    )
    expect(page.locator(f"#chart-fig-cpu-profile-diff-{pg17.pk}")).to_contain_text(
        "PostgreSQL 17 against PostgreSQL 16, 2 clients"
    )
    page.locator("#cpu-profile-differences").screenshot(
        path=str(SCREENSHOTS / "compare-flame-graph.png")
    )
