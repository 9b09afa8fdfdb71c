"""API representations of the catalogue: hosts, storage, builds, config profiles, workloads."""

from typing import Any

from django.contrib.auth.models import User
from django.forms.models import model_to_dict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents.contract.errors import JobError
from agents.contract.spec.document import VERSION_PATTERN, ScriptSpec, SettingValue
from runs import services
from runs.agentlink.row_fields import WORKLOAD_ROW_FIELDS, help_texts, names
from runs.api.errors import job_error_detail
from runs.api.fields import (
    Document,
    ScriptSerializer,
    StrictCharField,
    StrictModelSerializer,
    StrictRegexField,
    defines_field,
    settings_field,
)
from runs.models import (
    ConfigProfile,
    Host,
    PgBuild,
    StorageTarget,
    Workload,
)
from runs.services.spec_sections import clean_build_definition


def owner_name() -> "serializers.StringRelatedField[User]":
    """`created_by` as the owner's username, read-only; null for a row without an owner."""
    return serializers.StringRelatedField(allow_null=True)


class StorageTargetSerializer(StrictModelSerializer[StorageTarget]):
    host: "serializers.SlugRelatedField[Host]" = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )

    class Meta:
        model = StorageTarget
        fields = ["id", "host", "name", "path", "device", "filesystem", "facts"]
        read_only_fields = fields


class HostSerializer(StrictModelSerializer[Host]):
    is_online = serializers.BooleanField(read_only=True)
    has_twin = serializers.BooleanField(
        read_only=True,
        help_text="Two agent workers answered to this name within the offline window.",
    )
    fingerprint = serializers.CharField(
        read_only=True, help_text="Digest of the agent's secret, compared before approving."
    )
    storage_targets = StorageTargetSerializer(many=True, read_only=True)
    labels = serializers.ListField(
        child=StrictCharField(max_length=100), max_length=50, required=False
    )

    class Meta:
        model = Host
        fields = [
            "id",
            "name",
            "enrollment",
            "fingerprint",
            "is_online",
            "has_twin",
            "last_seen",
            "registered_at",
            "current_run",
            "notes",
            "labels",
            "facts",
            "installs",
            "storage_targets",
        ]
        read_only_fields = [f for f in fields if f not in ("notes", "labels")]


class PgBuildSerializer(StrictModelSerializer[PgBuild]):
    version = StrictRegexField(
        VERSION_PATTERN,
        max_length=20,
        error_messages={"invalid": "a version looks like 16 or 16.15"},
    )
    created_by = owner_name()

    class Meta:
        model = PgBuild
        fields = [
            "id", "name", "version", "source", "definition", "notes", "created_by", "created_at"
        ]  # fmt: skip
        read_only_fields = ["created_by", "created_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A source build's definition is checked as the agent checks it (400 naming the part)."""
        source = attrs.get("source", getattr(self.instance, "source", PgBuild.Source.AUTO))
        definition = attrs.get("definition", getattr(self.instance, "definition", {}))
        attrs["definition"] = clean_build_definition(source, definition)
        return attrs


class ConfigProfileSerializer(StrictModelSerializer[ConfigProfile]):
    settings = settings_field(required=False)
    effective_settings = serializers.SerializerMethodField()
    validation_notes = serializers.SerializerMethodField()
    created_by = owner_name()

    class Meta:
        model = ConfigProfile
        fields = [
            "id",
            "name",
            "description",
            "settings",
            "parent",
            "effective_settings",
            "validation_notes",
            "created_by",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["created_by", "created_at", "updated_at"]

    @extend_schema_field(settings_field())
    def get_effective_settings(self, profile: ConfigProfile) -> dict[str, SettingValue]:
        return profile.effective_settings()

    def get_validation_notes(self, profile: ConfigProfile) -> list[str]:
        """What the catalogues known now say about the effective settings."""
        try:
            return services.config_profile_check(profile.effective_settings())
        except JobError as exc:
            return [str(exc)]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Check the merged settings against the catalogues of the lab's build versions."""
        values = dict(attrs.get("settings", getattr(self.instance, "settings", {})))
        parent = attrs.get("parent", getattr(self.instance, "parent", None))
        if parent is not None and self.instance is not None:
            if parent == self.instance or self.instance in parent.ancestors():
                raise serializers.ValidationError({"parent": ["a profile cannot build on itself"]})
        merged = {**(parent.effective_settings() if parent else {}), **values}
        try:
            services.config_profile_check(merged)
        except JobError as exc:
            raise serializers.ValidationError(job_error_detail(exc), code=exc.code) from exc
        return attrs


class ConfigProfileDiffSerializer(serializers.Serializer[Document]):
    added = serializers.DictField()
    changed = serializers.DictField()


class WorkloadSerializer(StrictModelSerializer[Workload]):
    scripts: "serializers.ListSerializer[list[ScriptSpec]]" = serializers.ListSerializer(
        child=ScriptSerializer(), max_length=128, min_length=1, required=False
    )
    defines = defines_field(required=False)
    created_by = owner_name()

    class Meta:
        model = Workload
        fields = [
            "id",
            "name",
            "description",
            *names(WORKLOAD_ROW_FIELDS),
            "created_by",
            "created_at",
        ]
        read_only_fields = ["created_by", "created_at"]
        extra_kwargs = {
            **{name: {"help_text": text} for name, text in help_texts(WORKLOAD_ROW_FIELDS).items()},
            "latency_log": {
                "help_text": help_texts(WORKLOAD_ROW_FIELDS)["latency_log"],
                "error_messages": {
                    "invalid_choice": f'"{{input}}" is not a latency log: use one of '
                    f"{', '.join(Workload.LatencyLog.values)}."
                },
            },
        }

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Check the dataset options and scripts as the agent will (\\shell is refused)."""
        stored = model_to_dict(self.instance, exclude=["id", "created_by"]) if self.instance else {}
        values = {**stored, **attrs}
        try:
            services.workload_check(Workload(**values))
        except JobError as exc:
            raise serializers.ValidationError(job_error_detail(exc), code=exc.code) from exc
        return attrs
