"""What scheduling an experiment takes, for the tests of the form, the API and the services:
the matrix's axes (hosts, builds, config profiles, workloads) of one new cell or of an
experiment, as rows (services.experiment_schedule) or as ids (a form or an API body)."""

from django.db.models import Model

from runs.services.experiments import M2M_FIELDS
from tests.runs.factories import (
    ConfigProfileFactory,
    HostFactory,
    PgBuildFactory,
    WorkloadFactory,
)

Axes = dict[str, list[Model]]


def one_new_cell(**axes: list[Model]) -> Axes:
    """One new host, build, config profile and workload; `axes` replace any of them."""
    new: Axes = {
        "hosts": [HostFactory()],
        "builds": [PgBuildFactory()],
        "config_profiles": [ConfigProfileFactory()],
        "workloads": [WorkloadFactory()],
    }
    return {**new, **axes}


def axes_of(experiment: Model) -> Axes:
    """An experiment's axes, as scheduling it again would give them."""
    return {name: list(getattr(experiment, name).all()) for name in M2M_FIELDS}


def as_ids(axes: Axes) -> dict[str, list[int]]:
    """The axes as a form or an API body sends them."""
    return {name: [row.pk for row in rows] for name, rows in axes.items()}
