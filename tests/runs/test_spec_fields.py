"""Every declared spec field travels the whole path: form, API, preset, series occurrence,
job spec and manifest. A field some layer drops fails here by name."""

import pytest

from agents.contract.spec.fields import Field
from agents.contract.spec.manifest import make_manifest
from runs.agentlink.row_fields import EXPERIMENT_ROW_FIELDS, WORKLOAD_ROW_FIELDS
from runs.api.serializers import WorkloadSerializer
from runs.forms.catalogue import WorkloadForm
from runs.models import Experiment, Workload
from runs.services.experiments import build_job_spec, experiment_cells
from runs.services.history.series import copied_fields
from tests.runs.factories import ExperimentFactory

pytestmark = pytest.mark.django_db


def sample(field: Field) -> object:
    """A value of the field other than its default."""
    if field.kind == "bool":
        return not field.default
    if field.kind == "choice":
        return next(choice for choice in field.choices if choice != field.default)
    if field.kind in ("int", "float"):
        return (field.minimum or 1) + 1
    if field.kind == "str":
        return "dtg"
    return [{"builtin": "select-only", "weight": 2}] if field.kind == "list" else {"n": "1"}


def walked_workload() -> Workload:
    values = {field.name: sample(field) for field in WORKLOAD_ROW_FIELDS}
    # As a preset gives them: the catalogue Workload's field values, by name.
    return Workload.objects.create(name="walked", **values)


def test_every_workload_field_reaches_form_api_job_spec_and_manifest():
    workload = walked_workload()
    experiment = ExperimentFactory(workloads=[workload])
    spec = build_job_spec(experiment, experiment_cells(experiment)[0])
    form, api = WorkloadForm(instance=workload), WorkloadSerializer(workload).data
    manifest = make_manifest("1", spec, {}, {}, [])

    for field in WORKLOAD_ROW_FIELDS:
        section = "dataset" if field.name in spec["dataset"] else "workload"
        value = sample(field)
        assert spec[section][field.name] == value, field.name
        assert manifest["spec"][section][field.name] == value, field.name
        assert api[field.name] == value, field.name
        if not field.compound:
            assert form.initial[field.name] == value, field.name


def test_every_sweep_field_reaches_the_job_spec_and_the_series_occurrence():
    values = {field.name: sample(field) for field in EXPERIMENT_ROW_FIELDS}
    values.update(clients=[3], execution=Experiment.Execution.BLOCKS)
    experiment = ExperimentFactory(**values)
    spec = build_job_spec(experiment, experiment_cells(experiment)[0])

    for field in EXPERIMENT_ROW_FIELDS:
        assert spec["sweep"][field.name] == values[field.name], field.name
        assert field.name in copied_fields(), field.name
