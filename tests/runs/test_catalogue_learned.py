"""The lab learns a version's pg_settings catalogue from the first run of that version, not
only when an agent starts (a lab whose agents rarely restart had learned none after about
90 runs)."""

import pytest
from django.db import connection

from agents.contract.errors import JobError
from agents.contract.settings.catalogue import CATALOGUE_QUERY, catalogue_from_rows
from runs import services
from runs.models import PgCatalogue, Run
from runs.services.validation import NO_CATALOGUE_NOTE, check_settings
from tests.runs import events
from tests.runs.factories import RunFactory

pytestmark = pytest.mark.django_db


def real_catalogue(version: str) -> dict:
    """The lab database's own pg_settings, reported as PostgreSQL `version`'s."""
    with connection.cursor() as cursor:
        cursor.execute(CATALOGUE_QUERY)
        rows = cursor.fetchall()
    return catalogue_from_rows(version, rows).as_dict()


def finish_with(run: Run, settings: dict) -> None:
    result = events.result(run)
    result["settings"] = {**result["settings"], **settings}
    services.run_record_event(events.run_event(run, 1, "result", result))


def test_a_runs_result_with_the_catalogue_its_agent_read_teaches_the_lab() -> None:
    run = RunFactory(status=Run.Status.RUNNING)
    assert check_settings({"work_mem": "64MB"}, "16") == [NO_CATALOGUE_NOTE.format(version="16")]

    finish_with(run, {"catalogue": real_catalogue("16.15")})

    stored = PgCatalogue.objects.get(version="16.15")
    assert stored.reported_by == run.host.name
    assert check_settings({"work_mem": "64MB"}, "16") == []
    with pytest.raises(JobError) as refused:
        check_settings({"work_mem": "lots"}, "16.15")
    assert refused.value.field == "settings.work_mem"


def test_a_result_without_a_catalogue_leaves_the_known_ones_alone() -> None:
    PgCatalogue.objects.create(version="16.15", catalogue=real_catalogue("16.15"), reported_by="a")
    run = RunFactory(status=Run.Status.RUNNING)

    finish_with(run, {})

    assert PgCatalogue.objects.get().reported_by == "a"
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED


def test_a_catalogue_without_a_version_is_not_kept_and_the_run_still_ends() -> None:
    run = RunFactory(status=Run.Status.RUNNING)

    finish_with(run, {"catalogue": {"format": 1, "settings": []}})

    assert not PgCatalogue.objects.exists()
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
