"""API representations of experiments, their runs and what the runs measured.

Writes that are more than a plain definition go through runs.services; serializers only
shape and check input.
"""

from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from agents.contract.errors import JobError
from agents.contract.spec.document import StorageSpec
from runs import services
from runs.agentlink import row_fields
from runs.agentlink.execution import SEED_LIMIT
from runs.agentlink.row_fields import EXPERIMENT_ROW_FIELDS
from runs.api.errors import job_error_detail
from runs.api.fields import (
    Document,
    StorageLayoutSerializer,
    StrictIntegerField,
    StrictModelSerializer,
)
from runs.api.permissions import signed_in_user
from runs.api.serializers.catalogue import owner_name
from runs.estimates import RATE_SOURCES
from runs.models import (
    ConfigProfile,
    Experiment,
    Host,
    PgBuild,
    ProgressSample,
    Provenance,
    Result,
    Run,
    Workload,
)
from runs.services.capacity import CAPACITY_FIELDS
from runs.services.errors import LimitReached
from runs.services.history.imported import same_output_as


@extend_schema_serializer(deprecate_fields=["profile"])
class ExperimentSerializer(StrictModelSerializer[Experiment]):
    # What experiment_schedule noted, for the answer to the request that created it.
    _schedule_notes: tuple[str, ...] = ()
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
    schedule_notes = serializers.SerializerMethodField(
        help_text="Advice from scheduling, not errors (the experiment was made): e.g. a duet on "
        "too few CPUs, or capacity probes so short that one stall of the host fails them. In "
        "the answer to the request that created the experiment; empty when it is read later."
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
    # `cpu_profile` under the name it had before: read and written as that field, which
    # wins when a request sends both.
    profile = serializers.BooleanField(
        source="cpu_profile", required=False, help_text="Deprecated: use cpu_profile."
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
            # Before the row fields: fields are read in this order, so cpu_profile wins.
            "profile",
            *row_fields.names(EXPERIMENT_ROW_FIELDS),
            "execution",
            "seed",
            "client_host",
            "duet",
            "adaptive",
            "max_rounds",
            "max_hours",
            "margin_pct",
            "min_effect_pct",
            "adaptive_state",
            *CAPACITY_FIELDS,
            "capacity_state",
            "schedule_notes",
            "start",
            "status",
            "created_by",
            "created_at",
        ]
        read_only_fields = [
            "status",
            "created_by",
            "created_at",
            "adaptive_state",
            "capacity_state",
        ]
        extra_kwargs = {
            name: {"help_text": text}
            for name, text in row_fields.help_texts(EXPERIMENT_ROW_FIELDS).items()
        }

    def validate_storage_layouts(self, value: list[StorageSpec]) -> list[StorageSpec]:
        return [{"data": v["data"], "wal": v.get("wal") or None} for v in value]

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_schedule_notes(self, experiment: Experiment) -> list[str]:
        return list(self._schedule_notes)

    def create(self, validated_data: dict[str, Any]) -> Experiment:
        user = signed_in_user(self.context["request"])
        try:
            start = validated_data.pop("start")
            scheduled = services.experiment_schedule(user, validated_data, start)
            self._schedule_notes = tuple(scheduled.notes)
            return scheduled.experiment
        except LimitReached:
            raise  # answered with its limit, count and setting (runs.api.errors)
        except JobError as exc:
            raise serializers.ValidationError(job_error_detail(exc), code=exc.code) from exc


class EstimateSerializer(serializers.Serializer[Document]):
    execution = serializers.CharField()
    runs = serializers.IntegerField(help_text="Runs to queue: one cluster setup each.")
    points = serializers.IntegerField()
    setup_seconds = serializers.IntegerField(
        allow_null=True, help_text="The busiest host's time in cluster setups."
    )
    estimated_seconds = serializers.IntegerField(allow_null=True)
    expected_seconds = serializers.IntegerField(
        allow_null=True, help_text="Adaptive: the expected time in all, added rounds included."
    )
    max_seconds = serializers.IntegerField(
        allow_null=True, help_text="Adaptive: the time if every cell takes the most rounds."
    )
    transaction_rates = serializers.ChoiceField(
        choices=list(RATE_SOURCES),
        allow_null=True,
        help_text="A sweep by transactions: whether its points' tps was learned on the hosts, "
        "borrowed from the same scripts at another scale or client count, or guessed "
        "(null for a sweep by duration).",
    )
    build_seconds = serializers.IntegerField(
        allow_null=True,
        help_text="Of setup_seconds: compiling the source builds the busiest host has not "
        "built yet (null when nothing is compiled).",
    )
    build_times = serializers.ChoiceField(
        choices=["learned", "guessed"],
        allow_null=True,
        help_text="Whether build_seconds was learned from the host's earlier source builds "
        "or guessed (it has built none).",
    )
    capacity_probes = serializers.IntegerField(
        allow_null=True,
        help_text="A capacity search: the probes a cell's search is expected to take, "
        "expected_seconds' count (null for other experiments).",
    )
    window_spread_pct = serializers.FloatField(
        allow_null=True,
        help_text="A capacity search: how much the windows at one rate spread (%) in the "
        "hosts' latest capacity searches with probes as long, which costs probes (null where "
        "they spread too little to matter, or searched none).",
    )
    probes_beyond_schedule = serializers.IntegerField(
        allow_null=True,
        help_text="A capacity search: how many probes the hosts' latest ended searches with "
        "probes as long that found a capacity took beyond a steady host's schedule (their "
        "median; null where none did), which capacity_probes counts.",
    )


class RunSerializer(StrictModelSerializer[Run]):
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


class ProvenanceSerializer(StrictModelSerializer[Provenance]):
    """Where an imported run came from, and the other runs imported from the same content."""

    same_output_as = serializers.SerializerMethodField(
        help_text="Ids of other runs imported from a file with the same sha256."
    )

    class Meta:
        model = Provenance
        fields = [
            "file_name", "sha256", "command_line", "pg_version", "notes", "file_said",
            "imported_at", "same_output_as",
        ]  # fmt: skip
        read_only_fields = fields

    def get_same_output_as(self, provenance: Provenance) -> list[int]:
        return [run.pk for run in same_output_as(provenance.run)]


class RunDetailSerializer(RunSerializer):
    provenance = serializers.SerializerMethodField(
        help_text="For an imported run: its file; null for a run the lab measured."
    )

    class Meta(RunSerializer.Meta):
        fields = [
            *RunSerializer.Meta.fields,
            "provenance",
            "spec",
            "install",
            "facts",
            "storage_facts",
            "effective_settings",
            "steps",
            "server_log_tail",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Run) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["spec"] = {k: v for k, v in data["spec"].items() if k != "token"}
        return data

    @extend_schema_field(ProvenanceSerializer(allow_null=True))
    def get_provenance(self, run: Run) -> dict[str, Any] | None:
        provenance = getattr(run, "provenance", None)
        return ProvenanceSerializer(provenance).data if provenance is not None else None


class ResultSerializer(StrictModelSerializer[Result]):
    class Meta:
        model = Result
        exclude = ["id", "run"]


class ProgressSampleSerializer(StrictModelSerializer[ProgressSample]):
    class Meta:
        model = ProgressSample
        fields = list(ProgressSample.SHOWN_FIELDS)


class SampleSerializer(serializers.Serializer[Document]):
    point = serializers.IntegerField()
    t = serializers.FloatField(allow_null=True)
    # The key is `data`, which shadows Serializer.data for the type checker only.
    data = serializers.DictField()  # type: ignore[assignment]


class RunResultsQuerySerializer(serializers.Serializer[Document]):
    point = serializers.IntegerField(
        min_value=0, max_value=2**31 - 1, required=False, help_text="only this point's timelines"
    )


class RunResultsSerializer(serializers.Serializer[Document]):
    """A run's points with their timelines (`runs.api.views.run_results`)."""

    results = ResultSerializer(many=True)
    progress = ProgressSampleSerializer(many=True)
    host_samples = SampleSerializer(many=True)
    client_host_samples = SampleSerializer(many=True)
    server_samples = SampleSerializer(many=True)
