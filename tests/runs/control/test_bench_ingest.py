"""A tiny run of the ingest benchmark command (the benchmark itself is `scripts/bench ingest`)."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from runs.models import ProgressSample

pytestmark = pytest.mark.django_db


def test_the_ingest_benchmark_stores_what_its_agents_sent_and_prints_the_rate(monkeypatch):
    monkeypatch.setenv("BENCHLAB_THROWAWAY_DB", "1")
    out = StringIO()
    call_command("bench_ingest", agents=3, seconds=5, batch=7, stdout=out, stderr=StringIO())
    assert ProgressSample.objects.filter(run__host__name__startswith="agent-").count() == 15
    assert "33 events of 3 agents stored" in out.getvalue()


def test_the_benchmarks_refuse_a_lab_database_that_is_not_throw_away(monkeypatch):
    monkeypatch.delenv("BENCHLAB_THROWAWAY_DB", raising=False)
    with pytest.raises(CommandError, match="scripts/bench"):
        call_command("bench_ingest", agents=1, seconds=1)
