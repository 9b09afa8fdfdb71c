"""Comparisons: deltas to the baseline, the spread of repeats, and what differs."""

import pytest
from django.urls import reverse

from runs.compare import beyond_spread, compare_points, differences, setting_text, spread
from runs.models import Comparison
from runs.selectors import results_by_run
from tests.runs.factories import ConfigProfileFactory
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_runs():
    base = finished_run(
        [(1, 1, 1000.0, 1.0), (1, 2, 1100.0, 1.1), (4, 1, 3000.0, 1.3), (4, 2, 3100.0, 1.4)],
        settings={"shared_buffers": "128MB"},
    )
    tuned = finished_run(
        [(1, 1, 1050.0, 0.9), (1, 2, 1080.0, 0.95), (4, 1, 4000.0, 1.0), (4, 2, 4200.0, 0.98)],
        settings={"shared_buffers": "1GB"},
        config_profile=ConfigProfileFactory(name="big buffers"),
    )
    return base, tuned


def test_delta_is_the_mean_against_the_baseline_mean_in_percent(two_runs):
    base, tuned = two_runs
    rows = compare_points([base, tuned], base, results_by_run([base, tuned]))
    tuned_at_4 = next(r for r in rows if r.run == tuned and r.clients == 4)
    assert tuned_at_4.tps.mean == 4100.0
    assert tuned_at_4.tps_delta == pytest.approx((4100.0 - 3050.0) / 3050.0 * 100)
    assert tuned_at_4.tps_beyond is True
    tuned_at_1 = next(r for r in rows if r.run == tuned and r.clients == 1)
    assert tuned_at_1.tps_delta == pytest.approx((1065.0 - 1050.0) / 1050.0 * 100)
    assert tuned_at_1.tps_beyond is False  # 1050..1080 overlaps 1000..1100


def test_one_repeat_has_no_spread_to_judge_by():
    assert beyond_spread(spread([10.0]), spread([20.0, 21.0])) is None


def test_unstable_repeats_are_flagged():
    assert spread([1214.0, 2010.0]).unstable
    assert not spread([1000.0, 1010.0]).unstable


def test_differences_list_only_what_differs(two_runs):
    base, tuned = two_runs
    keys = dict(differences([base, tuned]))
    assert keys["settings.shared_buffers"] == ["128MB", "1GB"]
    assert keys["config"] == [base.config_profile.name, "big buffers"]
    assert "sweep.clients" not in keys
    assert "storage.data" not in keys


def test_comparing_ticked_runs_saves_a_comparison_and_shows_deltas(signed_in, two_runs):
    base, tuned = two_runs
    response = signed_in.post(reverse("comparison-create"), {"runs": [tuned.pk, base.pk]})
    comparison = Comparison.objects.get()
    assert response["Location"] == reverse("comparison-detail", args=[comparison.pk])
    assert comparison.baseline == base  # the lowest id unless a baseline is picked
    page = signed_in.get(response["Location"]).content.decode()
    assert "+34.4 %" in page  # tps at 4 clients: 4100 against 3050
    assert "settings.shared_buffers" in page and "1GB" in page
    assert 'id="diff-table"' in page


def test_comparing_one_run_is_refused_with_a_message(signed_in, two_runs):
    response = signed_in.post(reverse("comparison-create"), {"runs": [two_runs[0].pk]}, follow=True)
    assert "tick at least two runs" in response.content.decode()
    assert not Comparison.objects.exists()


def test_changing_the_baseline_saves_a_new_comparison(signed_in, two_runs):
    base, tuned = two_runs
    signed_in.post(reverse("comparison-create"), {"runs": [base.pk, tuned.pk]})
    first = Comparison.objects.get()
    response = signed_in.post(
        reverse("comparison-baseline", args=[first.pk]), {"baseline": tuned.pk}
    )
    second = Comparison.objects.exclude(pk=first.pk).get()
    assert second.baseline == tuned
    assert response["Location"] == reverse("comparison-detail", args=[second.pk])


def test_settings_are_compared_with_their_units_applied():
    assert setting_text("16384", "8kB") == "128MB"
    assert setting_text("4096", "kB") == "4MB"
    assert setting_text("200", "ms") == "200 ms"
    assert setting_text("-1", "kB") == "-1 kB"
    assert setting_text("on", None) == "on"


def test_free_space_and_cluster_paths_are_not_differences(two_runs):
    base, tuned = two_runs
    for run, free, directory in ((base, 100, "/a"), (tuned, 200, "/b")):
        run.storage_facts = {"data": {"free_bytes": free, "filesystem": "ext4"}}
        run.effective_settings = [
            {"name": "data_directory", "setting": directory, "unit": None},
            {"name": "shared_buffers", "setting": "16384", "unit": "8kB"},
        ]
        run.save()
    keys = dict(differences([base, tuned]))
    assert not any("free_bytes" in key or "data_directory" in key for key in keys)
    assert "settings.shared_buffers" not in keys
