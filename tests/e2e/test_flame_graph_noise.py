"""Differential flame graphs in Chromium tell a real change from sampling noise: real jobs
on PostgreSQL 16 (perf recording each server during its CPU-profile pass, TPC-B at scale 1,
2 clients). An A/A (the same settings twice, two clusters) draws every frame grey;
`synchronous_commit` on against off draws the commit's WAL flush (XLogFlush, where a
backend waits for its commit record to reach the disk) hotter beyond noise, in red; off
against on cannot draw it (the graph takes the compared run's shape) and lists it under
the graph as gone beyond noise.
"""

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agents.config import AgentConfig
from runs.models import Comparison, Run
from tests.agents.conftest import config, storage_root  # noqa: F401 (fixtures)
from tests.agents.jobs import small_spec
from tests.runs.factories import ConfigProfileFactory
from tests.runs.pages.test_cpu_profiles import measured_by_the_agent

pytestmark = pytest.mark.e2e

WAL_FLUSH = "XLogFlush"


def tpcb_with_cpu_profile(
    synchronous_commit: str, agent_config: AgentConfig, like: Run | None = None
) -> Run:
    """A run of TPC-B with its CPU profile on a cluster of its own; `like`'s host, build and
    workload, so that a comparison's labels name the setting only."""
    spec = small_spec(
        settings={"synchronous_commit": synchronous_commit},
        sweep={"clients": [2], "duration_s": 6, "repeats": 1, "cpu_profile": True},
    )
    run = measured_by_the_agent(spec, agent_config)
    run.config_profile = ConfigProfileFactory(
        name=f"synchronous_commit {synchronous_commit} ({run.pk})",
        settings={"synchronous_commit": synchronous_commit},
    )
    if like is not None:
        run.host, run.build, run.workload = like.host, like.build, like.workload
    run.save(update_fields=["config_profile", "host", "build", "workload"])
    return run


def frames_of(page: Page, figure_id: str) -> list[dict[str, Any]]:
    """Each frame of a drawn differential flame graph: its name, change in points, whether
    it is beyond noise, and the colour value it is drawn with (0: grey)."""
    return page.evaluate(
        """(id) => {
          const trace = document.querySelector(`[data-figure="${id}"]`).data[0];
          return trace.labels.map((label, i) => ({
            label,
            parent: trace.parents[i] === '' ? '' : trace.labels[Number(trace.parents[i])],
            samples: trace.values[i],
            points: trace.customdata[i][2],
            beyond: trace.customdata[i][3] === 'beyond noise',
            colour: trace.marker.colors[i],
          }));
        }""",
        figure_id,
    )


def compared(page: Page, url: str, baseline: Run, other: Run, name: str) -> list[dict[str, Any]]:
    comparison = Comparison.objects.create(name=name, baseline=baseline)
    comparison.runs.set([baseline, other])
    page.goto(f"{url}/comparisons/{comparison.pk}/")
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
    return frames_of(page, f"fig-cpu-profile-diff-{other.pk}")


# Alone on the machine (solo): the frames' test is of sampling noise, and two runs beside
# other tests' changing load differ by more than that (socket_flush 11 points in an A/A
# under three workers, docs/decisions.md).
@pytest.mark.solo
def test_an_a_a_is_grey_and_synchronous_commit_moves_the_wal_flush_beyond_noise(
    signed_in_page,
    web,
    config: AgentConfig,  # noqa: F811
) -> None:
    on = tpcb_with_cpu_profile("on", config)
    on_again = tpcb_with_cpu_profile("on", config, like=on)
    off = tpcb_with_cpu_profile("off", config, like=on)
    page = signed_in_page

    same = compared(page, web.url, on, on_again, "A/A: synchronous_commit on twice")
    coloured = [frame for frame in same if frame["beyond"] or frame["colour"] != 0]
    assert len(same) > 50 and not coloured, coloured

    changed = compared(page, web.url, off, on, "synchronous_commit on against off")
    flushes = [frame for frame in changed if frame["label"] == WAL_FLUSH]
    assert flushes, [frame["label"] for frame in changed]
    assert any(frame["beyond"] and frame["colour"] > 0 for frame in flushes), flushes
    assert all(frame["points"] > 0 for frame in flushes), flushes

    compared(page, web.url, on, off, "synchronous_commit off against on")
    gone = page.locator(f".cpu-profile-diff[data-run='{off.pk}'] table.gone-frames tbody tr")
    expect(gone.filter(has_text=WAL_FLUSH)).to_contain_text(re.compile(r"CommitTransaction.*-\d"))
