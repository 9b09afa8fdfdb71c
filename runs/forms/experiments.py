"""The forms that start and compare experiments: the schedule form, the comparison picker."""

import re
from collections.abc import Callable
from typing import Any

from django import forms
from django.db.models import QuerySet

from agents.contract.errors import JobError
from agents.contract.spec.document import StorageSpec
from agents.contract.spec.fields import Field
from runs.agentlink import row_fields
from runs.agentlink.choices import text_choices
from runs.agentlink.execution import SEED_LIMIT
from runs.agentlink.row_fields import EXPERIMENT_ROW_FIELDS
from runs.models import ConfigProfile, Experiment, Host, PgBuild, Run, Workload
from runs.models.catalogue import agent_hosts
from runs.services.adaptive import ADAPTIVE_FIELDS
from runs.services.capacity import CAPACITY_FIELDS
from runs.services.history.imported import not_imported


class CheckboxList(forms.CheckboxSelectMultiple):
    """Checkboxes that carry per-option data attributes (a host's name, for the pages' tests
    and scripts to find its box by)."""

    def __init__(
        self, option_data: Callable[[Any], dict[str, Any]] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.option_data = option_data or (lambda instance: {})

    def create_option(  # type: ignore[override]
        self,
        name: str,
        value: Any,
        label: str,
        selected: bool,
        index: int,
        subindex: int | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        option = super().create_option(name, value, label, selected, index, subindex, attrs)
        instance = getattr(value, "instance", None)
        if instance is not None:
            option["attrs"].update(self.option_data(instance))
        return option


def parse_clients(text: str) -> list[int]:
    """`1,2,4 8` -> [1, 2, 4, 8]; raises ValidationError naming the bad entry."""
    clients = []
    for part in re.split(r"[\s,;]+", text.strip()):
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise forms.ValidationError(
                f"“{part}” is not a client count: use whole numbers from 1, e.g. 1,2,4,8,16"
            )
        clients.append(int(part))
    if not clients:
        raise forms.ValidationError("give at least one client count, e.g. 1,2,4,8,16")
    return clients


def parse_storage_layouts(text: str) -> list[StorageSpec]:
    """`nvme, nvme:sata` -> [{"data": "nvme", "wal": None}, {"data": "nvme", "wal": "sata"}]."""
    layouts: list[StorageSpec] = []
    for part in re.split(r"[\s,;]+", text.strip()):
        if not part:
            continue
        data, _, wal = part.partition(":")
        if not data:
            raise forms.ValidationError(f"“{part}” has no data target: write data or data:wal")
        layouts.append({"data": data, "wal": wal or None})
    if not layouts:
        raise forms.ValidationError("name at least one storage target, e.g. default")
    return layouts


# Where a service's JobError field points in the schedule form: each sweep field an
# experiment stores has an input of its name.
SPEC_FIELD_TO_FORM = {
    **{f"sweep.{name}": name for name in row_fields.names(EXPERIMENT_ROW_FIELDS)},
    "repeats": "repeats",
    "storage": "storage",
    "settings": "config_profiles",
    "postgres": "builds",
    "workload": "workloads",
    "dataset": "workloads",
    "hosts": "hosts",
    "client_host": "client_host",
    "network": "client_host",
    "execution": "execution",
    "duet": "duet",
    **{name: name for name in ADAPTIVE_FIELDS},
    **{name: name for name in CAPACITY_FIELDS},
}


def form_field_for(spec_field: str | None) -> str | None:
    """The schedule form field a spec field belongs to (None: the whole form)."""
    if not spec_field:
        return None
    if spec_field in SPEC_FIELD_TO_FORM:
        return SPEC_FIELD_TO_FORM[spec_field]
    return SPEC_FIELD_TO_FORM.get(spec_field.split(".")[0])


def _experiment_field(name: str, label: str | None = None) -> forms.Field:
    """The Experiment model field's own form field, optional (empty: the model's default)."""
    model_field = Experiment._meta.get_field(name)
    field = model_field.formfield(required=False, label=label) if model_field.concrete else None
    if not isinstance(field, forms.Field):
        raise TypeError(f"Experiment.{name} has no form field")
    return field


# What the schedule form suggests where the declared default is no choice (no duration) or
# the smallest one (one client count): a sweep worth starting from.
SUGGESTED = {"clients": [1, 2, 4, 8, 16], "duration_s": 10}


def sweep_input(declared: Field) -> forms.Field:
    """The schedule form's input for a declared sweep field: its label, help, lower bound,
    choices and starting value come from the declaration (upper bounds are checked with the
    experiment: the contract's, and fair use's for repeats, runs.services.limits)."""
    initial = SUGGESTED.get(declared.name, declared.default)
    described = row_fields.described(declared)
    if declared.kind == "bool":
        return forms.BooleanField(required=False, initial=initial, **described)
    required = not declared.null
    if declared.kind == "int":
        return forms.IntegerField(
            required=required, min_value=declared.minimum, initial=initial, **described
        )
    if declared.kind == "choice":
        choices = text_choices(declared.name, declared.choices).choices
        return forms.ChoiceField(choices=choices, initial=initial, **described)
    if declared.name == "clients":
        return ClientsField(initial=initial, **described)
    raise TypeError(f"sweep field {declared.name} of kind {declared.kind} has no form input")


class ClientsField(forms.CharField):
    """Client counts typed as text, `1,2,4 8`, cleaned into a list of whole numbers; a list
    given as the starting value is shown as that text."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return ",".join(str(count) for count in value)
        return super().prepare_value(value)

    def clean(self, value: Any) -> list[int]:
        return parse_clients(super().clean(value))


class ScheduleForm(forms.Form):
    """Everything an experiment needs, on one form."""

    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    hosts = forms.ModelMultipleChoiceField(
        # Only approved agents get jobs (runs.services.hosts.enrollment).
        agent_hosts().filter(enrollment=Host.Enrollment.APPROVED),
        widget=CheckboxList(lambda host: {"data-host": host.name}),
        error_messages={"required": "pick at least one host"},
    )
    client_host = forms.ModelChoiceField(
        agent_hosts().filter(enrollment=Host.Enrollment.APPROVED),
        required=False,
        label="Client host",
        empty_label="none: pgbench on each server host",
        help_text="Run pgbench on this host, over TCP to the server host (the network path is "
        "part of what is measured). Both hosts are busy for each run.",
    )
    # Builds, configs and workloads an import made describe runs made elsewhere.
    builds = forms.ModelMultipleChoiceField(
        not_imported(PgBuild.objects.all()),
        widget=CheckboxList(),
        error_messages={"required": "pick at least one PostgreSQL build"},
    )
    config_profiles = forms.ModelMultipleChoiceField(
        not_imported(ConfigProfile.objects.all()),
        label="Config profiles",
        widget=CheckboxList(),
        error_messages={"required": "pick at least one config profile"},
    )
    workloads = forms.ModelMultipleChoiceField(
        not_imported(Workload.objects.all()),
        widget=CheckboxList(),
        error_messages={"required": "pick at least one workload"},
    )
    storage = forms.CharField(
        initial="default",
        label="Storage (data[:wal])",
        help_text="One layout per entry, comma-separated: <code>default</code>, "
        "<code>nvme:sata</code> puts WAL on sata. Each layout is one column of the matrix.",
    )
    execution = forms.ChoiceField(
        choices=Experiment.Execution.choices,
        initial=Experiment.Execution.ROUNDS,
        help_text="Rounds run every cell once per round in a random order, each repeat in its "
        "own cluster: drift over time cannot read as a difference between cells. Blocks are "
        "faster: one cluster per cell, cells one after another.",
    )
    seed = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=SEED_LIMIT - 1,
        help_text="For the random orders; empty: drawn and recorded. Reuse one to repeat an order.",
    )
    duet = _experiment_field("duet", label="Duet: both cells at once")
    adaptive = _experiment_field("adaptive")
    max_rounds = _experiment_field("max_rounds")
    max_hours = _experiment_field("max_hours")
    margin_pct = _experiment_field("margin_pct", label="Margin (±%)")
    min_effect_pct = _experiment_field("min_effect_pct", label="Minimum effect (%)")
    capacity = _experiment_field("capacity", label="Capacity search")
    capacity_percentile = _experiment_field("capacity_percentile", label="Percentile")
    capacity_limit_ms = _experiment_field("capacity_limit_ms", label="Latency limit (ms)")
    capacity_skip_limit_ms = _experiment_field("capacity_skip_limit_ms", label="Skip limit -L (ms)")
    capacity_max_skipped_pct = _experiment_field("capacity_max_skipped_pct", label="Skipped (%)")
    capacity_low_tps = _experiment_field("capacity_low_tps", label="Lowest rate (tps)")
    capacity_high_tps = _experiment_field("capacity_high_tps", label="Highest rate (tps)")
    capacity_probes = _experiment_field("capacity_probes", label="Most probes")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for declared in EXPERIMENT_ROW_FIELDS:
            self.fields[declared.name] = sweep_input(declared)

    @property
    def sweep_inputs(self) -> list[forms.BoundField]:
        """An input per sweep field an experiment stores, in their declared order."""
        return [self[declared.name] for declared in EXPERIMENT_ROW_FIELDS]

    def clean_storage(self) -> list[StorageSpec]:
        return parse_storage_layouts(self.cleaned_data["storage"])

    def _in_submitted_order(self, name: str) -> list[Any]:
        """A matrix axis's choices in the order they were submitted (the first is the
        experiment's first cell), not the order the database returns them in."""
        submitted = self.data.getlist(name) if hasattr(self.data, "getlist") else []
        place = {str(raw): position for position, raw in enumerate(submitted)}
        chosen = list(self.cleaned_data[name])
        return sorted(chosen, key=lambda item: place.get(str(item.pk), len(place)))

    def service_data(self) -> dict[str, object]:
        """The values `services.experiment_schedule` takes."""
        data = self.cleaned_data
        return {
            "name": data["name"],
            "description": data["description"],
            "hosts": self._in_submitted_order("hosts"),
            "client_host": data.get("client_host"),
            "builds": self._in_submitted_order("builds"),
            "config_profiles": self._in_submitted_order("config_profiles"),
            "workloads": self._in_submitted_order("workloads"),
            "storage_layouts": data["storage"],
            **{name: data[name] for name in row_fields.names(EXPERIMENT_ROW_FIELDS)},
            "execution": data["execution"],
            "seed": data["seed"],
            "duet": data["duet"],
            # Left empty: the model's default.
            **{name: data[name] for name in ADAPTIVE_FIELDS if data.get(name) is not None},
            **{name: data[name] for name in CAPACITY_FIELDS if data.get(name) is not None},
        }

    def add_job_error(self, exc: JobError) -> None:
        """Show a service's error next to the field it is about."""
        self.add_error(form_field_for(exc.field), exc.message)


class EstimateForm(ScheduleForm):
    """The schedule form as its live estimate reads it, while the user fills it in: an
    experiment needs no name to be estimated."""

    name = forms.CharField(max_length=200, required=False)


class CompareForm(forms.Form):
    """Runs picked from the run list, a baseline among them, and a name."""

    runs = forms.ModelMultipleChoiceField(
        Run.objects.all(), error_messages={"required": "tick at least two runs to compare"}
    )
    baseline = forms.ModelChoiceField(Run.objects.all(), required=False)
    name = forms.CharField(max_length=200, required=False)

    def clean_runs(self) -> QuerySet[Run]:
        runs = self.cleaned_data["runs"]
        if len(runs) < 2:
            raise forms.ValidationError("tick at least two runs to compare")
        return runs
