"""The verdict report (runs/verdict_report/) through the API: every number it prints is
the statistics API's, as text (72 columns, ASCII), Markdown and JSON; an experiment's
statistics and report; cancelling an experiment."""

import re

import pytest

from runs.models import Comparison, Run
from tests.runs.factories import RunFactory
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.django_db

BASE = [(4, r, tps, 4.0) for r, tps in enumerate([1000.0, 1031.0, 987.0, 1012.0], 1)] + [
    (8, r, tps, 4.2) for r, tps in enumerate([1900.0, 1950.0, 1880.0, 1930.0], 1)
]
SLOWER = [(4, r, tps, 4.4) for r, tps in enumerate([901.0, 922.0, 893.0], 1)] + [
    (8, r, tps, 4.2) for r, tps in enumerate([1910.0, 1940.0, 1905.0], 1)
]
QUERY = {"min_effect": 2.0, "margin": 5.0}


@pytest.fixture
def comparison() -> Comparison:
    base = finished_run(BASE)
    patched = finished_run(SLOWER, experiment=base.experiment)
    saved = Comparison.objects.create(name="patch review", baseline=base)
    saved.runs.set([base, patched])
    return saved


def statistics_rows(api_client, url: str) -> dict[tuple[int, int], dict]:
    body = api_client.get(url, QUERY).json()
    return {(row["run_id"], row["clients"]): row for row in body["rows"] if row["metric"] == "tps"}


def test_json_report_cells_are_the_statistics_apis(api_client, comparison):
    rows = statistics_rows(api_client, f"/api/comparisons/{comparison.pk}/statistics/")
    answer = api_client.get(
        f"/api/comparisons/{comparison.pk}/report/", {**QUERY, "format": "json"}
    )
    report = answer.json()
    assert answer.status_code == 200 and len(report["cells"]) == 2
    for cell in report["cells"]:
        row, base = (
            rows[(cell["run_id"], cell["clients"])],
            rows[(comparison.baseline_id, cell["clients"])],
        )
        assert cell["baseline_mean"] == base["mean"] and cell["mean"] == row["mean"]
        for name in ("diff_pct", "diff_ci_low_pct", "diff_ci_high_pct", "verdict"):
            assert cell[name] == row[name], name
    assert {cell["verdict"] for cell in report["cells"]} >= {"slower"}
    assert report["outcome"] == "slower"
    assert report["url"] == f"http://testserver/comparisons/{comparison.pk}/"


def test_text_report_prints_the_statistics_numbers_in_72_ascii_columns(api_client, comparison):
    rows = statistics_rows(api_client, f"/api/comparisons/{comparison.pk}/statistics/")
    answer = api_client.get(
        f"/api/comparisons/{comparison.pk}/report/", {**QUERY, "format": "text"}
    )
    text = answer.content.decode()
    assert answer["Content-Type"].startswith("text/plain")
    assert text.isascii() and all(len(line) <= 72 for line in text.splitlines()), text
    patched = next(run_id for run_id, _ in rows if run_id != comparison.baseline_id)
    for clients in (4, 8):
        row, base = rows[(patched, clients)], rows[(comparison.baseline_id, clients)]
        line = next(line for line in text.splitlines() if re.match(rf"\s+{clients}\s", line))
        expected = [
            f"{base['mean']:.1f}", f"{row['mean']:.1f}", f"{row['diff_pct']:+.1f}%",
            f"[{row['diff_ci_low_pct']:+.1f},", f"{row['diff_ci_high_pct']:+.1f}]", row["verdict"],
        ]  # fmt: skip
        assert line.split()[1:] == expected


def test_markdown_report_is_a_table(api_client, comparison):
    answer = api_client.get(f"/api/comparisons/{comparison.pk}/report/", {"format": "markdown"})
    assert answer["Content-Type"].startswith("text/markdown")
    table = [line for line in answer.content.decode().splitlines() if line.startswith("|")]
    assert table[0].startswith("| cell | clients |") and len(table) == 4


def test_a_bad_query_is_a_400_naming_the_field(api_client, comparison):
    answer = api_client.get(
        f"/api/comparisons/{comparison.pk}/report/", {"margin": "lots", "format": "text"}
    )
    assert answer.status_code == 400 and "margin" in answer.content.decode()


def test_experiment_statistics_and_report_compare_with_the_first_cell(api_client, comparison):
    base = comparison.baseline
    Run.objects.filter(pk=base.pk).update(cell=0)
    Run.objects.filter(experiment=base.experiment).exclude(pk=base.pk).update(cell=1)
    url = f"/api/experiments/{base.experiment_id}/"
    rows = statistics_rows(api_client, f"{url}statistics/")
    assert {row["is_baseline"] for (run_id, _), row in rows.items() if run_id == base.pk} == {True}
    report = api_client.get(f"{url}report/", QUERY).json()
    assert report["kind"] == "experiment" and report["outcome"] == "slower"
    assert report["reproduce"] == f"benchlab run --experiment {base.experiment_id}"
    assert [cell["mean"] for cell in report["cells"]] == [
        rows[(cell["run_id"], cell["clients"])]["mean"] for cell in report["cells"]
    ]


def test_cancelling_an_experiment_cancels_its_open_runs(api_client, user):
    queued = RunFactory(experiment__created_by=user)
    done = RunFactory(experiment=queued.experiment, status=Run.Status.SUCCEEDED)
    answer = api_client.post(f"/api/experiments/{queued.experiment_id}/cancel/")
    assert answer.status_code == 200
    assert [run["id"] for run in answer.json()] == [queued.pk]
    queued.refresh_from_db(), done.refresh_from_db()
    assert (queued.status, done.status) == (Run.Status.CANCELLED, Run.Status.SUCCEEDED)


def test_the_comparison_page_links_its_report(client, user, comparison):
    client.force_login(user)
    signed_in = client
    html = signed_in.get(f"/comparisons/{comparison.pk}/").content.decode()
    link = f'href="/api/comparisons/{comparison.pk}/report/?format=text'
    assert link in html
    start = html.index(link) + len('href="')
    answer = signed_in.get(html[start : html.index('"', start)].replace("&amp;", "&"))
    assert answer.status_code == 200 and answer.content.decode().startswith("BenchLab report")
