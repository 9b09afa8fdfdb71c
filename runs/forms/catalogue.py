"""Forms of the catalogue pages (config profiles, workloads, builds, host notes).

They parse and check input; writes go through runs.services.
"""

import json
import re
from collections.abc import Mapping
from typing import Any, cast

from django import forms
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from agents.contract.errors import JobError
from agents.contract.spec.document import BUILTIN_SCRIPTS, VERSION_PATTERN, ScriptSpec, SettingValue
from agents.contract.spec.fields import DATASET, WORKLOAD
from runs import services
from runs.agentlink import row_fields
from runs.agentlink.row_fields import WORKLOAD_ROW_FIELDS
from runs.forms import workload_editor
from runs.models import ConfigProfile, Host, PgBuild, Workload
from runs.services.spec_sections import clean_build_definition
from runs.services.uploads import source_upload_check, source_upload_store, upload_digest

# The workload inputs shown under Measurement; every other workload option is a pgbench option.
MEASUREMENT = ("latency_log", "statement_latencies", "progress")

SETTING_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=?\s*(.*?)\s*$")


def parse_settings(text: str) -> dict[str, str]:
    """postgresql.conf lines (`name = value`, `#` comments) -> {name: value}."""
    settings: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = SETTING_LINE.match(line)
        if not match or not match.group(2):
            raise forms.ValidationError(
                f"line {number}: “{line}” is not a setting: write name = value"
            )
        settings[match.group(1)] = match.group(2).strip("'\"")
    return settings


def format_settings(settings: Mapping[str, SettingValue]) -> str:
    return "\n".join(f"{name} = {value}" for name, value in settings.items())


class ConfigProfileForm(forms.ModelForm[ConfigProfile]):
    """A profile's settings as postgresql.conf lines, checked against the known catalogues."""

    settings_text = forms.CharField(
        required=False,
        label="Settings",
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false"}),
        help_text="One per line, as in postgresql.conf: <code>shared_buffers = 256MB</code>. "
        "Checked against the pg_settings catalogue of every build's version.",
    )

    class Meta:
        model = ConfigProfile
        fields = ["name", "description", "parent"]
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.notes: list[str] = []
        if self.instance.pk:
            self.fields["settings_text"].initial = format_settings(self.instance.settings)
            parent = cast(forms.ModelChoiceField[ConfigProfile], self.fields["parent"])
            parent.queryset = ConfigProfile.objects.exclude(pk=self.instance.pk)

    def clean_settings_text(self) -> dict[str, str]:
        return parse_settings(self.cleaned_data["settings_text"])

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        parent, values = cleaned.get("parent"), cleaned.get("settings_text")
        if self.instance.pk and parent and self.instance in [parent, *parent.ancestors()]:
            self.add_error("parent", "a profile cannot build on itself")
            return cleaned
        if values is None:
            return cleaned
        merged = {**(parent.effective_settings() if parent else {}), **values}
        try:
            self.notes = services.config_profile_check(merged)
        except JobError as exc:
            self.add_error("settings_text", exc.message)
        return cleaned

    def save(self, commit: bool = True) -> ConfigProfile:
        self.instance.settings = self.cleaned_data["settings_text"]
        return super().save(commit)


# The workload's spec fields that are one input each (scripts, -D and processes have editors).
SPEC_INPUTS = row_fields.scalar(WORKLOAD_ROW_FIELDS)


class WorkloadForm(forms.ModelForm[Workload]):
    """A workload: dataset options, setup SQL, several scripts (built-in or custom, each with
    its weight, runs/forms/workload_editor.py), -D variables and the processes of a point."""

    builtins = forms.MultipleChoiceField(
        required=False,
        choices=[(name, name) for name in BUILTIN_SCRIPTS],
        widget=forms.CheckboxSelectMultiple,
        label="Built-in scripts",
    )
    defines_text = forms.CharField(
        required=False,
        label="Variables (-D)",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="<code>name=value</code>, one per line.",
    )
    processes_text = forms.CharField(
        required=False,
        label="Several pgbench processes per point (JSON)",
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text='Empty: one process running the scripts above. Else a list such as <code>[{"'
        'scripts": [{"name": "t1", "text": "INSERT INTO t1 VALUES (1);", "weight": 1}], '
        '"clients": 1}, ...]</code>: the processes start together, their tps are summed.',
    )

    class Meta:
        model = Workload
        fields = ["name", "description", *row_fields.names(SPEC_INPUTS)]
        widgets = {
            "description": forms.Textarea(attrs={"rows": 2}),
            "setup_sql": forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        }
        labels = row_fields.labels(SPEC_INPUTS)
        help_texts = row_fields.help_texts(SPEC_INPUTS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        scripts = self.instance.scripts or []
        self.slots = workload_editor.slot_count(scripts, self.data if self.is_bound else None)
        workload_editor.add_script_fields(self, scripts, self.slots)
        self.fields["builtins"].initial = [s["builtin"] for s in scripts if "builtin" in s]
        self.fields["defines_text"].initial = "\n".join(
            f"{k}={v}" for k, v in (self.instance.defines or {}).items()
        )
        processes = self.instance.processes or []
        self.fields["processes_text"].initial = json.dumps(processes, indent=1) if processes else ""

    def _inputs(self, section: str) -> list[forms.BoundField]:
        """The inputs of one panel: `dataset` (setup SQL aside), `measurement` or `options`."""
        chosen = {
            "dataset": [f.name for f in DATASET if f.name != "setup_sql"],
            "measurement": list(MEASUREMENT),
            "options": [f.name for f in WORKLOAD if f.name not in MEASUREMENT],
        }[section]
        return [self[f.name] for f in SPEC_INPUTS if f.name in chosen]

    def dataset_inputs(self) -> list[forms.BoundField]:
        return self._inputs("dataset")

    def measurement_inputs(self) -> list[forms.BoundField]:
        return self._inputs("measurement")

    def option_inputs(self) -> list[forms.BoundField]:
        return self._inputs("options")

    def script_slots(self) -> list[tuple[forms.BoundField, ...]]:
        return workload_editor.slots_of(self, self.slots)

    def clean_defines_text(self) -> dict[str, str]:
        defines: dict[str, str] = {}
        for line in self.cleaned_data["defines_text"].splitlines():
            if line.strip():
                name, sep, value = line.partition("=")
                if not sep or not name.strip():
                    raise forms.ValidationError(f"“{line}” is not name=value")
                defines[name.strip()] = value.strip()
        return defines

    def clean_processes_text(self) -> list[object]:
        return workload_editor.processes_from(self.cleaned_data["processes_text"])

    def scripts(self) -> list[ScriptSpec]:
        return workload_editor.scripts_from(self.cleaned_data, self.slots)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        scripts = self.scripts()
        if not scripts:
            self.add_error("builtins", "choose a built-in script or write a custom one")
            return cleaned
        workload = {
            "scripts": scripts,
            "processes": cleaned.get("processes_text") or [],
            "vacuum_all": bool(cleaned.get("vacuum_all")),
            "no_vacuum": bool(cleaned.get("no_vacuum")),
        }
        try:
            # Only the scripts and their options vary here; the rest is the smallest valid spec.
            services.check_job_spec(
                {"version": 1, "workload": workload, "sweep": {"duration_s": 1}}
            )
        except JobError as exc:
            self.add_error(self._field_of(exc.field, scripts), exc.message)
        return cleaned

    @staticmethod
    def _field_of(spec_field: str | None, scripts: list[ScriptSpec]) -> str:
        """The form field a spec error about the workload belongs to."""
        if (spec_field or "").startswith("workload.processes"):
            return "processes_text"
        if spec_field == "workload.vacuum_all":
            return "vacuum_all"
        return workload_editor.script_error_field(spec_field, scripts)

    def save(self, commit: bool = True) -> Workload:
        self.instance.scripts = self.scripts()
        self.instance.defines = self.cleaned_data["defines_text"]
        self.instance.processes = self.cleaned_data["processes_text"]
        return super().save(commit)


BUILD_DEFINITION_HELP = (
    'For source "Built from source" only, as JSON: {"source": {"kind": "url", "location": '
    '"https://.../postgresql-14.3.tar.bz2"}, "configure_flags": ["--with-blocksize=16"], '
    '"patches": [{"name": "...", "diff": "unified diff", "strip": 1}], "cflags": null}. '
    "kind is url, path (on the agent host) or git (with a ref). Configure flags and CFLAGS "
    "come from the agents' allow-lists (README); patches apply only on agents that allow them."
)


class PgBuildForm(forms.ModelForm[PgBuild]):
    definition = forms.JSONField(
        required=False,
        label="Build definition",
        help_text=BUILD_DEFINITION_HELP,
        widget=forms.Textarea(attrs={"rows": 8}),
    )

    source_tarball = forms.FileField(
        required=False,
        label="Source tarball upload",
        help_text="A release tarball: it becomes the build definition's source.",
    )

    class Meta:
        model = PgBuild
        fields = ["name", "version", "source", "definition", "source_tarball", "notes"]
        widgets = {"notes": forms.Textarea(attrs={"rows": 2})}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        tarball = cleaned.get("source_tarball")
        if tarball and cleaned.get("source") == PgBuild.Source.BUILD:
            try:
                source_upload_check(tarball, self.uploader, replacing=self.instance)
            except JobError as error:
                self.add_error("source_tarball", error.message)
                return cleaned
            # save() keeps the file once the build exists.
            source = {"kind": "upload", "location": upload_digest(tarball), "ref": None}
            cleaned["definition"] = {**(cleaned.get("definition") or {}), "source": source}
        if "source" in cleaned and "definition" in cleaned:
            try:
                cleaned["definition"] = clean_build_definition(
                    cleaned["source"], cleaned["definition"]
                )
            except ValidationError as error:
                self.add_error("definition", error.message_dict["definition"])
        return cleaned

    @property
    def uploader(self) -> User | None:
        """Who the upload counts against: the build's owner (the view sets the signed-in user)."""
        return self.instance.created_by

    @transaction.atomic
    def save(self, commit: bool = True) -> PgBuild:
        build = super().save(commit)
        tarball = self.cleaned_data.get("source_tarball")
        if commit and tarball and build.source == PgBuild.Source.BUILD:
            source_upload_store(build, tarball, self.uploader)
        return build

    def clean_version(self) -> str:
        version = self.cleaned_data["version"].strip()
        if not VERSION_PATTERN.match(version):
            raise forms.ValidationError("a version looks like 16 or 16.15")
        return version


class HostNotesForm(forms.ModelForm[Host]):
    labels_text = forms.CharField(
        required=False, label="Labels", help_text="Comma-separated, e.g. RAID1 write-through"
    )

    class Meta:
        model = Host
        fields = ["notes"]
        widgets = {"notes": forms.Textarea(attrs={"rows": 3})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["labels_text"].initial = ", ".join(self.instance.labels or [])

    def save(self, commit: bool = True) -> Host:
        text = self.cleaned_data["labels_text"]
        self.instance.labels = [label.strip() for label in text.split(",") if label.strip()]
        return super().save(commit)
