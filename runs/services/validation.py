"""Checks a job spec the way the agent will, before anything is queued.

The contract's pure checks do the work (`agents.contract.spec.document`,
`agents.contract.workload_text.scripts`, `agents.contract.settings.catalogue`): the agent runs the
same ones, so the web tier and the agent cannot disagree. Errors are
`agents.contract.errors.JobError` with the field to fix; the API answers them
with 400 (see runs.api.errors).
"""

import logging
from collections.abc import Mapping

from agents.contract.errors import JobError
from agents.contract.settings.catalogue import Catalogue, refuse_settings, validate_settings
from agents.contract.spec.document import JobSpec, SettingValue, validate_spec
from agents.contract.spec.pgbench_versions import refuse_missing_options
from agents.contract.workload_text.scripts import check_workload_scripts
from agents.contract.workload_text.workload_sql import check_workload_sql
from runs.models import PgBuild, PgCatalogue, Workload
from runs.services.spec_sections import workload_spec

logger = logging.getLogger(__name__)

NO_CATALOGUE_NOTE = (
    "no pg_settings catalogue for PostgreSQL {version} has been reported by an agent yet: "
    "only refused settings were checked here, the agent validates the rest before it starts"
)


def find_catalogue(version: str) -> PgCatalogue | None:
    """The catalogue of an exact version ("16.15"), or the newest minor of a major ("16")."""
    exact = PgCatalogue.objects.filter(version=version).first()
    if exact is not None or "." in version:
        return exact
    minors = PgCatalogue.objects.filter(version__startswith=f"{version}.")
    return max(minors, key=lambda c: [int(part) for part in c.version.split(".")], default=None)


def refuse_unsafe_settings(requested: Mapping[str, SettingValue]) -> None:
    """Refuse settings that run commands or load code (the agent refuses them too).

    The web tier cannot know an agent's local allow list, so it allows nothing.
    """
    refuse_settings(requested, allowed=set())


def workload_check(workload: Workload) -> None:
    """Check a workload's dataset and scripts as the agent will; raise JobError naming the field.

    Scripts with \\shell or \\setshell, and server-side COPY in the setup SQL or a
    script, are always refused here: the web tier cannot know whether an agent's
    local configuration allows them.
    """
    spec = {"version": 1, **workload_spec(workload), "sweep": {"clients": [1], "duration_s": 1}}
    normalised = validate_spec(spec)
    check_workload_scripts(normalised["workload"], allow_shell=False)
    check_workload_sql(normalised, allow_superuser_sql=False)


def check_settings(requested: Mapping[str, SettingValue], version: str) -> list[str]:
    """Validate settings for a PostgreSQL version; return notes for the user.

    With a known catalogue every name and value is checked (notes then warn
    about unsafe values such as fsync=off); without one only the settings that
    run commands or load code are refused here and a note says so.
    """
    refuse_unsafe_settings(requested)
    catalogue = find_catalogue(version)
    if catalogue is None:
        return [NO_CATALOGUE_NOTE.format(version=version)]
    return validate_settings(requested, load_catalogue(catalogue), set())


def load_catalogue(stored: PgCatalogue) -> Catalogue:
    """The agent's Catalogue from what registration stored (a JSON object or its text)."""
    if isinstance(stored.catalogue, str):
        return Catalogue.from_json(stored.catalogue)
    return Catalogue.from_dict(stored.catalogue)


def config_profile_check(requested: Mapping[str, SettingValue]) -> list[str]:
    """Validate a profile's effective settings for every PostgreSQL version the lab's builds use.

    Raises JobError (its message names the version); returns notes for
    versions without a catalogue.
    """
    refuse_unsafe_settings(requested)
    notes: list[str] = []
    for version in sorted(set(PgBuild.objects.values_list("version", flat=True))):
        try:
            notes += check_settings(requested, version)
        except JobError as exc:
            message = f"{exc.message} (PostgreSQL {version})"
            raise JobError(exc.code, message, field=exc.field) from exc
    return notes


def check_job_spec(spec: Mapping[str, object]) -> tuple[JobSpec, list[str]]:
    """Return the normalised spec and notes, or raise JobError naming the field to fix."""
    normalised = validate_spec(spec)
    check_workload_scripts(normalised["workload"], allow_shell=False)
    check_workload_sql(normalised, allow_superuser_sql=False)
    refuse_missing_options(normalised)
    notes = check_settings(normalised["settings"], normalised["postgres"]["version"])
    return normalised, notes
