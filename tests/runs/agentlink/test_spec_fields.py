"""Every declared spec field travels the whole path: form, API, preset, series occurrence,
job spec and manifest, and one left out has its declared default in each. A field some
layer drops fails here by name."""

import pytest

from agents.contract.spec.document import validate_spec
from agents.contract.spec.fields import Field
from agents.contract.spec.manifest import make_manifest
from runs import presets, services
from runs.agentlink.row_fields import EXPERIMENT_ROW_FIELDS, WORKLOAD_ROW_FIELDS
from runs.api.serializers import WorkloadSerializer
from runs.forms.catalogue import WorkloadForm
from runs.forms.experiments import SUGGESTED, ScheduleForm
from runs.models import Experiment, Workload
from runs.presets import PRESETS, Preset
from runs.services.experiments import build_job_spec, experiment_cells
from runs.services.history.series import copied_fields
from tests.runs.factories import (
    ExperimentFactory,
    UserFactory,
)
from tests.runs.scheduling import as_ids, one_new_cell

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


# A sweep measures by duration or by transactions: each walk leaves the other empty.
MEASURED_BY = ["duration_s", "transactions"]


def walked_sweep(measured_by: str) -> dict[str, object]:
    """A value other than its default for every sweep field an experiment stores."""
    values = {field.name: sample(field) for field in EXPERIMENT_ROW_FIELDS}
    values["clients"] = [3, 5]
    values["transactions" if measured_by == "duration_s" else "duration_s"] = None
    return values


def posted(values: dict[str, object]) -> dict[str, object]:
    """Sweep values as the schedule page posts them: text, client counts comma-separated,
    an empty number empty, a switch that is off left out."""
    form: dict[str, object] = {}
    for name, value in values.items():
        if isinstance(value, list):
            form[name] = ",".join(str(count) for count in value)
        elif value is not False:
            form[name] = "" if value is None else "on" if value is True else str(value)
    return form


@pytest.fixture
def matrix() -> dict[str, object]:
    """The schedule form's other inputs: one cell."""
    return {"name": "walked", **as_ids(one_new_cell()), "storage": "default", "execution": "rounds"}


def scheduled_from(form: ScheduleForm) -> Experiment:
    assert form.is_valid(), form.errors
    return services.experiment_schedule(UserFactory(), form.service_data(), False).experiment


@pytest.mark.parametrize("measured_by", MEASURED_BY)
def test_every_sweep_field_travels_from_the_schedule_form_to_the_experiment(matrix, measured_by):
    values = walked_sweep(measured_by)
    form = ScheduleForm(data={**matrix, **posted(values)})

    experiment = scheduled_from(form)

    for field in EXPERIMENT_ROW_FIELDS:
        assert form.service_data()[field.name] == values[field.name], field.name
        assert getattr(experiment, field.name) == values[field.name], field.name


@pytest.mark.parametrize("measured_by", MEASURED_BY)
def test_every_sweep_field_travels_through_the_api(api_client, experiment_payload, measured_by):
    values = walked_sweep(measured_by)

    created = api_client.post("/api/experiments/", experiment_payload(**values), format="json")

    assert created.status_code == 201, created.json()
    read = api_client.get(f"/api/experiments/{created.json()['id']}/").json()
    for field in EXPERIMENT_ROW_FIELDS:
        assert read[field.name] == values[field.name], field.name


@pytest.mark.parametrize("measured_by", MEASURED_BY)
def test_every_sweep_field_a_preset_sets_opens_the_schedule_form_with_it(matrix, measured_by):
    values = walked_sweep(measured_by)
    preset = Preset("walked", "walked", "", [], [], [], sweep=values)
    opened = ScheduleForm(initial=presets.form_initial(preset))
    shown = {field.name: opened[field.name].value() for field in EXPERIMENT_ROW_FIELDS}

    experiment = scheduled_from(ScheduleForm(data={**matrix, **posted(shown)}))

    for field in EXPERIMENT_ROW_FIELDS:
        assert getattr(experiment, field.name) == values[field.name], field.name


def test_a_sweep_field_left_out_gets_its_one_declared_default_everywhere(
    api_client, experiment_payload
):
    payload = experiment_payload()
    created = api_client.post("/api/experiments/", payload, format="json").json()
    experiment = Experiment.objects.get(pk=created["id"])
    spec = build_job_spec(experiment, experiment_cells(experiment)[0])
    # A job spec document that leaves it out too, as the agent reads one.
    document = validate_spec({"version": 1, "sweep": {"duration_s": 1}})
    form, preset_form = ScheduleForm(), ScheduleForm(initial=presets.form_initial(PRESETS[0]))

    left_out = [field for field in EXPERIMENT_ROW_FIELDS if field.name not in payload]
    assert "between_points" in {field.name for field in left_out}
    for field in left_out:
        assert created[field.name] == field.default, field.name
        assert spec["sweep"][field.name] == field.default, field.name
        if field.name != "duration_s":
            assert document["sweep"][field.name] == field.default, field.name
        if field.name not in SUGGESTED:
            assert form[field.name].value() == field.default, field.name
        if field.name not in PRESETS[0].sweep:
            assert preset_form[field.name].value() == field.default, field.name


def test_a_preset_sweep_names_declared_fields_with_values_they_accept():
    with pytest.raises(ValueError, match="warm_up_s: not a declared field"):
        Preset("typo", "typo", "", [], [], [], sweep={"clients": [1], "warm_up_s": 3})
    with pytest.raises(ValueError, match="between_points must be one of"):
        Preset("flush", "flush", "", [], [], [], sweep={"clients": [1], "between_points": "flush"})
