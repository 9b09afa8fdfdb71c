"""Hosts, builds, config profiles and workloads."""

import re

import pytest
from django.urls import reverse

from runs.models import ConfigProfile, PgBuild, Workload
from tests.runs.factories import (
    ConfigProfileFactory,
    HostFactory,
    PgBuildFactory,
    WorkloadFactory,
)

pytestmark = pytest.mark.django_db


def test_hosts_empty_state_says_how_to_start_an_agent(signed_in):
    page = signed_in.get(reverse("host-list")).content.decode()
    assert "No hosts yet" in page and "python -m agents worker --name NAME" in page


def test_host_card_shows_profile_storage_and_status(signed_in):
    host = HostFactory(
        name="bench1",
        facts={"cpu": {"model": "Xeon E5", "threads": 8}, "memory": {"total_bytes": 2**34}},
    )
    host.storage_targets.create(name="nvme", path="/mnt/nvme", filesystem="xfs")
    page = signed_in.get(reverse("host-list")).content.decode()
    assert "bench1" in page and "Xeon E5" in page and "16.0 GiB" in page
    assert "nvme" in page and "(xfs)" in page and "online" in page


def test_host_notes_and_labels_are_saved(signed_in):
    host = HostFactory()
    url = reverse("host-detail", args=[host.pk])
    signed_in.post(url, {"notes": "two SATA disks", "labels_text": "RAID1 write-through, ext4"})
    host.refresh_from_db()
    assert host.notes == "two SATA disks"
    assert host.labels == ["RAID1 write-through", "ext4"]


def test_build_with_a_bad_version_is_refused_next_to_the_field(signed_in):
    page = signed_in.post(
        reverse("build-list"), {"name": "x", "version": "sixteen", "source": "auto"}
    ).content.decode()
    assert 'id="field-version"' in page and "a version looks like 16 or 16.15" in page
    assert not PgBuild.objects.exists()


def test_config_profile_setting_errors_come_from_the_versions_catalogue(signed_in, pg_catalogue):
    PgBuildFactory(version=pg_catalogue.version)
    page = signed_in.post(
        reverse("config-new"), {"name": "bad", "settings_text": "shared_buffers = lots"}
    ).content.decode()
    assert '<div class="field has-error" id="field-settings_text">' in page
    assert "shared_buffers" in page
    assert not ConfigProfile.objects.filter(name="bad").exists()


def test_config_profile_is_saved_and_shows_its_diff_against_the_parent(signed_in, pg_catalogue):
    PgBuildFactory(version=pg_catalogue.version)
    parent = ConfigProfileFactory(name="wal", settings={"max_wal_size": "1GB", "work_mem": "4MB"})
    response = signed_in.post(
        reverse("config-new"),
        {
            "name": "memory",
            "parent": parent.pk,
            "settings_text": "work_mem = 16MB\nshared_buffers = 256MB  # fits",
        },
        follow=True,
    )
    profile = ConfigProfile.objects.get(name="memory")
    assert profile.settings == {"work_mem": "16MB", "shared_buffers": "256MB"}
    page = response.content.decode()
    assert 'id="profile-diff"' in page
    assert "4MB" in page and "16MB" in page and "256MB" in page


def test_unreadable_settings_line_says_which_line(signed_in):
    page = signed_in.post(
        reverse("config-new"), {"name": "p", "settings_text": "work_mem = 4MB\nwhat"}
    ).content.decode()
    assert "line 2" in page


def test_workload_with_a_custom_script_and_setup_sql_is_saved(signed_in):
    signed_in.post(
        reverse("workload-new"),
        {
            "name": "upsert",
            "scale": "1",
            "init_steps": "dtgvp",
            "query_mode": "prepared",
            "latency_log": "sampled",
            "setup_sql": "CREATE TABLE kv (id int);",
            "script_text": "\\set id random(1, 1000)\nSELECT :id;\n",
            "defines_text": "nrows=1000",
        },
    )
    workload = Workload.objects.get(name="upsert")
    assert workload.scripts == [
        {"name": "custom", "text": "\\set id random(1, 1000)\nSELECT :id;\n", "weight": 1}
    ]
    assert workload.defines == {"nrows": "1000"}
    assert workload.setup_sql == "CREATE TABLE kv (id int);"


def test_workload_script_with_shell_is_refused_next_to_the_script(signed_in):
    page = signed_in.post(
        reverse("workload-new"),
        {
            "name": "evil",
            "scale": "1",
            "init_steps": "dtgvp",
            "query_mode": "simple",
            "latency_log": "sampled",
            "script_text": "\\shell rm -rf /\nSELECT 1;\n",
        },
    ).content.decode()
    assert '<div class="field has-error" id="field-script_text">' in page
    assert not Workload.objects.filter(name="evil").exists()


def is_ticked(page: str, name: str) -> bool:
    """Whether the page's checkbox `name` is ticked (it must be on the page)."""
    (tag,) = re.findall(rf'<input type="checkbox" name="{name}"[^>]*>', page)
    return re.search(r"\schecked[\s>]", tag) is not None


def test_workload_measurement_options_are_saved_and_shown_with_their_cost(signed_in):
    signed_in.post(
        reverse("workload-new"),
        {
            "name": "diagnosis",
            "scale": "1",
            "init_steps": "dtgvp",
            "query_mode": "simple",
            "builtins": ["select-only"],
            "latency_log": "full",
            "statement_latencies": "on",
        },
    )
    workload = Workload.objects.get(name="diagnosis")
    assert workload.latency_log == "full"
    assert workload.statement_latencies is True
    assert workload.progress is False  # an unticked checkbox is not sent

    page = signed_in.get(reverse("workload-detail", args=[workload.pk])).content.decode()
    assert is_ticked(page, "statement_latencies")
    assert '<option value="full" selected>' in page
    assert "-r costs about 0.25 % of throughput on the shortest transactions" in page
    assert "costs 5-13 % of select-only tps: for studying single slow transactions only" in page


def test_new_workload_form_starts_from_the_cheap_measurement_defaults(signed_in):
    page = signed_in.get(reverse("workload-new")).content.decode()
    assert '<option value="sampled" selected>' in page
    assert not is_ticked(page, "progress")
    assert not is_ticked(page, "statement_latencies")


def test_workload_with_an_unknown_latency_log_is_refused_next_to_the_field(signed_in):
    page = signed_in.post(
        reverse("workload-new"),
        {
            "name": "odd",
            "scale": "1",
            "init_steps": "dtgvp",
            "query_mode": "simple",
            "builtins": ["tpcb-like"],
            "latency_log": "everything",
        },
    ).content.decode()
    assert '<div class="field has-error" id="field-latency_log">' in page
    assert not Workload.objects.filter(name="odd").exists()


def test_workload_list_says_what_each_workload_measures(signed_in):
    WorkloadFactory(name="plain")
    WorkloadFactory(name="diagnosis", latency_log="full", statement_latencies=True, progress=True)

    page = signed_in.get(reverse("workload-list")).content.decode()

    rows = dict(
        re.findall(
            r'<a href="/workloads/\d+/">(\w+)</a>.*?<td class="mono small">(.*?)</td>', page, re.S
        )
    )
    assert rows == {"plain": "sampled log", "diagnosis": "full log · -P 1 · -r"}
