"""Presets, loaded idempotently, each opening a filled schedule form."""

import pytest
from django.core.management import call_command
from django.urls import reverse

from runs.models import ConfigProfile, PgBuild, Workload
from runs.presets import PRESETS, load_presets

pytestmark = pytest.mark.django_db


def test_load_presets_creates_everything_once():
    first = load_presets()
    assert first["builds"] == 6 and first["workloads"] >= 5
    assert load_presets() == {"builds": 0, "config_profiles": 0, "workloads": 0}
    assert PgBuild.objects.filter(version__in=["16", "17", "18"]).count() == 3
    assert PgBuild.objects.filter(source="build").count() == 3


def test_cumulative_tuning_profiles_build_on_each_other():
    call_command("load_presets")
    fsync_off = ConfigProfile.objects.get(name="tuning 4: fsync off")
    effective = fsync_off.effective_settings()
    assert effective["fsync"] == "off"
    assert effective["shared_buffers"] == "512MB"
    assert effective["wal_buffers"] == "16MB"


def test_upsert_workload_has_setup_sql_and_a_custom_script():
    load_presets()
    upsert = Workload.objects.get(name="PL/pgSQL upsert")
    assert "CREATE FUNCTION upsert_kv" in upsert.setup_sql
    assert "upsert_kv(:id)" in upsert.scripts[0]["text"]


def test_only_the_upsert_workload_asks_for_per_statement_latencies_as_its_write_up_did():
    load_presets()
    with_r = Workload.objects.filter(statement_latencies=True)
    assert list(with_r.values_list("name", flat=True)) == ["PL/pgSQL upsert"]
    assert not Workload.objects.exclude(latency_log="sampled").exists()
    assert not Workload.objects.filter(progress=True).exists(), "no -P 1: it costs ~3 %"


def test_every_preset_opens_the_schedule_form_filled_in(signed_in):
    load_presets()
    for preset in PRESETS:
        page = signed_in.get(reverse("schedule"), {"preset": preset.key}).content.decode()
        assert f'value="{preset.title}"' in page
        clients = ",".join(str(count) for count in preset.sweep["clients"])
        assert f'value="{clients}"' in page
