"""API representations. Writes that are more than a plain definition go
through runs.services; serializers only shape and check input."""

from django.contrib.auth.models import User
from django.forms.models import model_to_dict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents.contract.errors import JobError
from agents.contract.spec import VERSION_PATTERN, ScriptSpec, StorageSpec
from runs import services
from runs.analysis import stats
from runs.analysis.stats import Verdict
from runs.analysis.validity import CHECKS
from runs.api.errors import job_error_detail
from runs.api.fields import (
    ScriptSerializer,
    StorageLayoutSerializer,
    StrictCharField,
    StrictIntegerField,
    StrictModelSerializer,
    StrictRegexField,
    defines_field,
    settings_field,
)
from runs.api.permissions import signed_in_user
from runs.contract.execution import SEED_LIMIT
from runs.contract.spec_fields import WORKLOAD_ROW_FIELDS, help_texts, names
from runs.models import (
    Comparison,
    ConfigProfile,
    Experiment,
    Host,
    PgBuild,
    ProgressSample,
    Result,
    Run,
    ShareLink,
    StorageTarget,
    Workload,
)
from runs.services.errors import LimitReached
from runs.services.specs import clean_build_definition


def owner_name() -> "serializers.StringRelatedField[User]":
    """`created_by` as the owner's username, read-only; null for a row without an owner."""
    return serializers.StringRelatedField(allow_null=True)


class StorageTargetSerializer(StrictModelSerializer):
    host: "serializers.SlugRelatedField[Host]" = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )

    class Meta:
        model = StorageTarget
        fields = ["id", "host", "name", "path", "device", "filesystem", "facts"]
        read_only_fields = fields


class HostSerializer(StrictModelSerializer):
    is_online = serializers.BooleanField(read_only=True)
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


class PgBuildSerializer(StrictModelSerializer):
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

    def validate(self, attrs: dict) -> dict:
        """A source build's definition is checked as the agent checks it (400 naming the part)."""
        source = attrs.get("source", getattr(self.instance, "source", PgBuild.Source.AUTO))
        definition = attrs.get("definition", getattr(self.instance, "definition", {}))
        attrs["definition"] = clean_build_definition(source, definition)
        return attrs


class ConfigProfileSerializer(StrictModelSerializer):
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
    def get_effective_settings(self, profile: ConfigProfile) -> dict:
        return profile.effective_settings()

    def get_validation_notes(self, profile: ConfigProfile) -> list[str]:
        """What the catalogues known now say about the effective settings."""
        try:
            return services.config_profile_check(profile.effective_settings())
        except JobError as exc:
            return [str(exc)]

    def validate(self, attrs: dict) -> dict:
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


class ConfigProfileDiffSerializer(serializers.Serializer):
    added = serializers.DictField()
    changed = serializers.DictField()


class WorkloadSerializer(StrictModelSerializer):
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

    def validate(self, attrs: dict) -> dict:
        """Check the dataset options and scripts as the agent will (\\shell is refused)."""
        stored = model_to_dict(self.instance, exclude=["id", "created_by"]) if self.instance else {}
        values = {**stored, **attrs}
        try:
            services.workload_check(Workload(**values))
        except JobError as exc:
            raise serializers.ValidationError(job_error_detail(exc), code=exc.code) from exc
        return attrs


class ExperimentSerializer(StrictModelSerializer):
    hosts = serializers.PrimaryKeyRelatedField(
        queryset=Host.objects.all(), many=True, allow_empty=False
    )
    builds = serializers.PrimaryKeyRelatedField(
        queryset=PgBuild.objects.all(), many=True, allow_empty=False
    )
    config_profiles = serializers.PrimaryKeyRelatedField(
        queryset=ConfigProfile.objects.all(), many=True, allow_empty=False
    )
    workloads = serializers.PrimaryKeyRelatedField(
        queryset=Workload.objects.all(), many=True, allow_empty=False
    )
    client_host = serializers.PrimaryKeyRelatedField(
        queryset=Host.objects.all(),
        allow_null=True,
        required=False,
        help_text="The host that runs pgbench over TCP (null: each server host runs its own).",
    )
    storage_layouts: "serializers.ListSerializer[list[StorageSpec]]" = serializers.ListSerializer(
        child=StorageLayoutSerializer(), required=False, max_length=64
    )
    clients = serializers.ListField(
        child=StrictIntegerField(min_value=1, max_value=10_000), min_length=1, max_length=256
    )
    seed = serializers.IntegerField(
        min_value=0,
        max_value=SEED_LIMIT - 1,
        required=False,
        help_text="Seeds the order of cells in each round and random client orders; "
        "drawn and recorded when left out.",
    )
    start = serializers.BooleanField(
        write_only=True,
        required=False,
        default=False,
        help_text="Queue the runs at once (otherwise POST .../start/ later).",
    )
    status = serializers.CharField(read_only=True)
    created_by = owner_name()

    class Meta:
        model = Experiment
        fields = [
            "id",
            "name",
            "description",
            "hosts",
            "builds",
            "config_profiles",
            "workloads",
            "storage_layouts",
            "clients",
            "threads",
            "duration_s",
            "transactions",
            "repeats",
            "order",
            "execution",
            "seed",
            "warmup_s",
            "between_points",
            "client_host",
            "start",
            "status",
            "created_by",
            "created_at",
        ]
        read_only_fields = ["status", "created_by", "created_at"]

    def validate_storage_layouts(self, value: list[dict]) -> list[dict]:
        return [{"data": v["data"], "wal": v.get("wal") or None} for v in value]

    def create(self, validated_data: dict) -> Experiment:
        user = signed_in_user(self.context["request"])
        try:
            start = validated_data.pop("start")
            return services.experiment_schedule(user, validated_data, start).experiment
        except LimitReached:
            raise  # answered with its limit, count and setting (runs.api.errors)
        except JobError as exc:
            raise serializers.ValidationError(job_error_detail(exc), code=exc.code) from exc


class EstimateSerializer(serializers.Serializer):
    execution = serializers.CharField()
    runs = serializers.IntegerField(help_text="Runs to queue: one cluster setup each.")
    points = serializers.IntegerField()
    setup_seconds = serializers.IntegerField(
        allow_null=True, help_text="The busiest host's time in cluster setups."
    )
    estimated_seconds = serializers.IntegerField(allow_null=True)


class RunSerializer(StrictModelSerializer):
    host: "serializers.SlugRelatedField[Host]" = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    build: "serializers.SlugRelatedField[PgBuild]" = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    config_profile: "serializers.SlugRelatedField[ConfigProfile]" = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    workload: "serializers.SlugRelatedField[Workload]" = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    client_host: "serializers.SlugRelatedField[Host]" = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "experiment",
            "host",
            "build",
            "config_profile",
            "workload",
            "storage_data",
            "storage_wal",
            "position",
            "cell",
            "round",
            "status",
            "step",
            "error_code",
            "error_category",
            "error_field",
            "error_message",
            "queued_at",
            "started_at",
            "finished_at",
            "last_event_at",
            "rerun_of",
            "client_host",
            "network",
        ]
        read_only_fields = fields


class RunDetailSerializer(RunSerializer):
    class Meta(RunSerializer.Meta):
        fields = [
            *RunSerializer.Meta.fields,
            "spec",
            "install",
            "facts",
            "storage_facts",
            "effective_settings",
            "steps",
            "server_log_tail",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Run) -> dict:
        data = super().to_representation(instance)
        data["spec"] = {k: v for k, v in data["spec"].items() if k != "token"}
        return data


class ResultSerializer(StrictModelSerializer):
    class Meta:
        model = Result
        exclude = ["id", "run"]


class ProgressSampleSerializer(StrictModelSerializer):
    class Meta:
        model = ProgressSample
        fields = ["point", "t", "tps", "latency_ms", "stddev_ms", "failed"]


class SampleSerializer(serializers.Serializer):
    point = serializers.IntegerField()
    t = serializers.FloatField(allow_null=True)
    # The key is `data`, which shadows Serializer.data for the type checker only.
    data = serializers.DictField()  # type: ignore[assignment]


class RunResultsQuerySerializer(serializers.Serializer):
    point = serializers.IntegerField(
        min_value=0, max_value=2**31 - 1, required=False, help_text="only this point's timelines"
    )


class RunResultsSerializer(serializers.Serializer):
    """A run's points with their timelines (`runs.api.views.run_results`)."""

    results = ResultSerializer(many=True)
    progress = ProgressSampleSerializer(many=True)
    host_samples = SampleSerializer(many=True)
    client_host_samples = SampleSerializer(many=True)
    server_samples = SampleSerializer(many=True)


class StatisticsQuerySerializer(serializers.Serializer):
    min_effect = serializers.FloatField(
        min_value=0.0,
        max_value=stats.MAX_MIN_EFFECT_PCT,
        default=stats.DEFAULT_MIN_EFFECT_PCT,
        help_text="smallest difference in percent that earns a verdict word",
    )


class ValidityWarningSerializer(serializers.Serializer):
    code = serializers.ChoiceField(choices=sorted(CHECKS))
    title = serializers.CharField()
    detail = serializers.CharField()
    why = serializers.CharField()


class StatisticsRowSerializer(serializers.Serializer):
    """One run (or cell in rounds), client count and metric (runs.analysis.compare.cell_record)."""

    run_id = serializers.IntegerField()
    clients = serializers.IntegerField()
    metric = serializers.CharField()
    is_baseline = serializers.BooleanField()
    n = serializers.IntegerField()
    mean = serializers.FloatField(allow_null=True)
    median = serializers.FloatField(allow_null=True)
    sd = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    mde_pct = serializers.FloatField(allow_null=True)
    diff_pct = serializers.FloatField(allow_null=True)
    diff_ci_low_pct = serializers.FloatField(allow_null=True)
    diff_ci_high_pct = serializers.FloatField(allow_null=True)
    p = serializers.FloatField(allow_null=True)
    q = serializers.FloatField(allow_null=True)
    verdict = serializers.ChoiceField(choices=[v.value for v in Verdict], allow_null=True)
    verdict_note = serializers.CharField(allow_blank=True)
    warnings = ValidityWarningSerializer(many=True)


class ComparisonStatisticsSerializer(serializers.Serializer):
    """A comparison's statistics table (`runs.api.views.ComparisonViewSet.statistics`)."""

    baseline_run_id = serializers.IntegerField()
    min_effect_pct = serializers.FloatField()
    confidence = serializers.FloatField()
    comparisons = serializers.IntegerField(help_text="how many p-values BH adjusts together")
    false_discovery_control = serializers.CharField()
    rows = StatisticsRowSerializer(many=True)


class ComparisonSerializer(StrictModelSerializer):
    runs = serializers.PrimaryKeyRelatedField(
        queryset=Run.objects.all(), many=True, allow_empty=False
    )
    baseline = serializers.PrimaryKeyRelatedField(
        queryset=Run.objects.all(), required=False, allow_null=True
    )
    created_by = owner_name()

    class Meta:
        model = Comparison
        fields = ["id", "name", "description", "runs", "baseline", "created_by", "created_at"]
        read_only_fields = ["created_by", "created_at"]

    def create(self, validated_data: dict) -> Comparison:
        try:
            return services.comparison_create(
                signed_in_user(self.context["request"]), **validated_data
            )
        except JobError as exc:
            raise serializers.ValidationError(job_error_detail(exc), code="invalid") from exc


class ShareLinkSerializer(StrictModelSerializer):
    # A link shares one of these; the other two are null.
    run = serializers.PrimaryKeyRelatedField(
        queryset=Run.objects.all(), required=False, allow_null=True
    )
    experiment = serializers.PrimaryKeyRelatedField(
        queryset=Experiment.objects.all(), required=False, allow_null=True
    )
    comparison = serializers.PrimaryKeyRelatedField(
        queryset=Comparison.objects.all(), required=False, allow_null=True
    )
    target_kind = serializers.CharField(read_only=True)
    is_active = serializers.BooleanField(read_only=True)
    created_by = owner_name()

    class Meta:
        model = ShareLink
        fields = [
            "id",
            "token",
            "run",
            "experiment",
            "comparison",
            "target_kind",
            "is_active",
            "created_by",
            "created_at",
            "revoked_at",
        ]
        read_only_fields = ["token", "created_by", "created_at", "revoked_at"]

    def validate(self, attrs: dict) -> dict:
        targets = [attrs[k] for k in ("run", "experiment", "comparison") if attrs.get(k)]
        if len(targets) != 1:
            raise serializers.ValidationError(
                {"non_field_errors": ["give exactly one of run, experiment, comparison"]}
            )
        return {"target": targets[0]}

    def create(self, validated_data: dict) -> ShareLink:
        user = signed_in_user(self.context["request"])
        return services.share_link_create(user, validated_data["target"])


class ErrorDetailSerializer(serializers.Serializer):
    """`code` is stable (runs.api.errors); `fields` maps each bad field to its messages."""

    code = serializers.CharField()
    message = serializers.CharField()
    # The key is `fields`, which shadows Serializer.fields for the type checker only.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField())
    )
    used_by = serializers.DictField(
        child=serializers.ListField(child=serializers.IntegerField()),
        required=False,
        help_text="For `in_use` (409): the ids of what uses the object, by kind.",
    )
    limit = serializers.IntegerField(
        required=False, help_text="For `limit_reached` (400): the limit's value."
    )
    current = serializers.IntegerField(
        required=False,
        help_text="For `limit_reached` (400): what you have (runs queued or running) or asked "
        "for (repeats).",
    )
    setting = serializers.CharField(
        required=False, help_text="For `limit_reached` (400): the setting that holds the limit."
    )


class ErrorSerializer(serializers.Serializer):
    """Every error the API answers: `{"error": {"code", "message", "fields"}}`."""

    error = ErrorDetailSerializer()
