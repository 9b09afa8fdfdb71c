"""API of the history features: imports, series, alerts, notes and run manifests.

Registered in runs/api/urls.py; the services in runs.services.history.imports and
runs.services.history.series do the work.
"""

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from runs.api.fields import Document, StrictCharField, StrictModelSerializer
from runs.api.permissions import OwnerOrStaffMayChange, signed_in_user
from runs.api.serializers import ErrorSerializer, owner_name
from runs.models import Alert, Experiment, Host, Note, Run, Series
from runs.services.access.permissions import check_can_change
from runs.services.history import alerts as alerts_service
from runs.services.history import series as series_service
from runs.services.history.import_description import (
    DESCRIBE_HELP,
    DescriptionError,
    ImportDescription,
    parse_description,
)
from runs.services.history.import_reading import UploadedOutput
from runs.services.history.imported import refuse_imported_template
from runs.services.history.imports import ImportDetails, pgbench_import
from runs.services.history.webhooks import WebhookRefused, webhook_check

MAX_IMPORT_FILES = 100
MAX_FILE_CHARS = 5_000_000


class ImportFileSerializer(serializers.Serializer[Document]):
    name = StrictCharField(max_length=300)
    content = StrictCharField(max_length=MAX_FILE_CHARS, trim_whitespace=False)


class ImportSerializer(serializers.Serializer[Document]):
    """One or many raw pgbench outputs (what pgbench printed) with what the user knows."""

    files: "serializers.ListSerializer[list[Document]]" = serializers.ListSerializer(
        child=ImportFileSerializer(), allow_empty=False, max_length=MAX_IMPORT_FILES
    )
    command_line = StrictCharField(max_length=2000, required=False, allow_blank=True, default="")
    pg_version = StrictCharField(max_length=40, required=False, allow_blank=True, default="")
    notes = StrictCharField(required=False, allow_blank=True, default="", max_length=10000)
    host_name = StrictCharField(
        max_length=80,
        required=False,
        allow_blank=True,
        default="",
        help_text="The runs go to host 'imported: NAME' ('imported: unknown machine').",
    )
    describe = StrictCharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=20000,
        help_text=DESCRIBE_HELP,
    )

    def validate_describe(self, value: str) -> ImportDescription:
        try:
            return parse_description(value)
        except DescriptionError as error:
            raise serializers.ValidationError(str(error)) from error


class ImportOutcomeSerializer(serializers.Serializer[Document]):
    experiment = serializers.IntegerField(allow_null=True)
    runs = serializers.ListField(child=serializers.IntegerField())
    refused = serializers.ListField(
        child=serializers.CharField(), help_text="One message per file not imported."
    )
    duplicates = serializers.ListField(
        child=serializers.CharField(),
        help_text="One message per imported file whose content an earlier import holds: "
        "'NAME: same output as run ID (...)'.",
    )
    unmatched = serializers.ListField(
        child=serializers.CharField(),
        help_text="One message per line of `describe` that matched none of the files.",
    )


class ImportViewSet(viewsets.GenericViewSet[Run]):
    """Import pgbench outputs as runs marked imported; `refused` names each file not imported."""

    # The stubs tie serializer_class to the viewset's model; this one takes a document.
    serializer_class = ImportSerializer  # type: ignore[assignment]

    @extend_schema(
        request=ImportSerializer,
        responses={201: ImportOutcomeSerializer, 400: ErrorSerializer},
    )
    def create(self, request: Request) -> Response:
        """201 when at least one file imported; 400 naming each file when none could be read."""
        given = ImportSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        uploads = [UploadedOutput(f["name"], f["content"].encode()) for f in data["files"]]
        details = ImportDetails(
            data["command_line"],
            data["pg_version"],
            data["notes"],
            data["host_name"],
            data["describe"],
        )
        outcome = pgbench_import(signed_in_user(request), uploads, details)
        body = {
            "experiment": outcome.experiment.pk if outcome.experiment else None,
            "runs": [run.pk for run in outcome.runs],
            "refused": outcome.errors,
            "duplicates": outcome.duplicates,
            "unmatched": outcome.unmatched,
        }
        if not outcome.runs:
            raise serializers.ValidationError({"files": outcome.errors}, code="invalid")
        return Response(body, status=status.HTTP_201_CREATED)


class SeriesSerializer(StrictModelSerializer[Series]):
    template = serializers.PrimaryKeyRelatedField(queryset=Experiment.objects.all())
    created_by = owner_name()

    class Meta:
        model = Series
        fields = [
            "id", "name", "template", "schedule", "enabled", "webhook_url", "alert_email",
            "deliver",
            "created_by", "created_at",
        ]  # fmt: skip
        read_only_fields = ["created_by", "created_at"]

    def validate_template(self, value: Experiment) -> Experiment:
        try:
            refuse_imported_template(value)
        except ValueError as error:
            raise serializers.ValidationError(str(error)) from error
        return value

    def validate_schedule(self, value: str) -> str:
        try:
            series_service.cron_fields(value)
        except ValueError as error:
            raise serializers.ValidationError(str(error)) from error
        return " ".join(value.split())

    def validate_webhook_url(self, value: str) -> str:
        if value:
            try:
                webhook_check(value)
            except WebhookRefused as error:
                raise serializers.ValidationError(str(error)) from error
        return value

    def create(self, validated_data: dict[str, Any]) -> Series:
        owner = signed_in_user(self.context["request"])
        return series_service.series_save(Series(created_by=owner, **validated_data))

    def update(self, instance: Series, validated_data: dict[str, Any]) -> Series:
        for name, value in validated_data.items():
            setattr(instance, name, value)
        return series_service.series_save(instance)


class SeriesViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet[Series],
):
    """Experiments on a cron schedule (UTC); changing one is for its owner or staff."""

    permission_classes = [OwnerOrStaffMayChange]
    queryset = Series.objects.select_related("created_by")
    serializer_class = SeriesSerializer


class AlertSerializer(StrictModelSerializer[Alert]):
    series: "serializers.PrimaryKeyRelatedField[Series]" = serializers.PrimaryKeyRelatedField(
        read_only=True
    )
    experiment = serializers.IntegerField(source="occurrence.experiment_id", read_only=True)
    acknowledged_by = owner_name()
    low_percent = serializers.FloatField(source="change_point.low_percent", default=None)
    high_percent = serializers.FloatField(source="change_point.high_percent", default=None)
    host_evidence = serializers.CharField(source="change_point.host_evidence", default="")
    notes = serializers.SerializerMethodField()

    class Meta:
        model = Alert
        fields = [
            "id", "series", "experiment", "metric", "key", "before", "after", "change_percent",
            "low_percent", "high_percent", "state", "confirmation", "confirmation_experiment",
            "host_evidence", "created_at", "delivery", "acknowledged_at", "acknowledged_by",
            "acknowledgement", "notes",
        ]  # fmt: skip
        read_only_fields = fields

    def get_notes(self, alert: Alert) -> list[dict[str, str]]:
        return [
            {
                "text": note.text,
                "by": note.created_by.get_username() if note.created_by else "",
                "at": note.created_at.isoformat(),
            }
            for note in alert.notes.all()
        ]


# A write on an alert: the alert, who, the note's text.
AlertWrite = Callable[[Alert, User, str], object]


class AcknowledgeSerializer(serializers.Serializer[Document]):
    note = StrictCharField(max_length=2000)


class AlertViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Alert]
):
    """Alerts of series' change points and their states; the series' owner or staff
    acknowledges one, marks it fixed or adds a note, each with a note's text."""

    queryset = Alert.objects.select_related(
        "occurrence", "acknowledged_by", "change_point", "series"
    ).prefetch_related("notes__created_by")
    serializer_class = AlertSerializer

    def _write(self, request: Request, action: str, write: AlertWrite) -> Response:
        given = AcknowledgeSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        alert = self.get_object()
        check_can_change(request.user, alert.series, f"{action} alerts of")
        write(alert, signed_in_user(request), given.validated_data["note"])
        return Response(AlertSerializer(self.get_queryset().get(pk=alert.pk)).data)

    @extend_schema(request=AcknowledgeSerializer, responses=AlertSerializer)
    @action(detail=True, methods=["post"])
    def acknowledge(self, request: Request, pk: str | None = None) -> Response:
        return self._write(request, "acknowledge", alerts_service.alert_acknowledge)

    @extend_schema(request=AcknowledgeSerializer, responses=AlertSerializer)
    @action(detail=True, methods=["post"])
    def fixed(self, request: Request, pk: str | None = None) -> Response:
        return self._write(request, "mark fixed", alerts_service.alert_fixed)

    @extend_schema(request=AcknowledgeSerializer, responses=AlertSerializer)
    @action(detail=True, methods=["post"])
    def note(self, request: Request, pk: str | None = None) -> Response:
        def add(alert: Alert, user: User, text: str) -> None:
            series_service.note_add(user, text, alert=alert)

        return self._write(request, "add notes to", add)


class NoteSerializer(StrictModelSerializer[Note]):
    # A note is on a run or on a host; the other is null.
    run = serializers.PrimaryKeyRelatedField(
        queryset=Run.objects.all(), required=False, allow_null=True
    )
    host = serializers.PrimaryKeyRelatedField(
        queryset=Host.objects.all(), required=False, allow_null=True
    )
    created_by = owner_name()

    class Meta:
        model = Note
        fields = ["id", "run", "host", "text", "created_by", "created_at"]
        read_only_fields = ["created_by", "created_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if (attrs.get("run") is None) == (attrs.get("host") is None):
            raise serializers.ValidationError({"run": "Give exactly one of run and host."})
        user = self.context["request"].user
        if attrs.get("host") is not None and not user.is_staff:
            raise PermissionDenied("Only staff add notes to hosts.")
        return attrs

    def create(self, validated_data: dict[str, Any]) -> Note:
        host = validated_data.get("host")
        return series_service.note_add(
            signed_in_user(self.context["request"]),
            validated_data["text"],
            run=validated_data.get("run"),
            host_id=host.pk if host else None,
        )


class NoteViewSet(mixins.CreateModelMixin, mixins.ListModelMixin, viewsets.GenericViewSet[Note]):
    """Dated notes on runs and hosts ("firmware updated"); hosts' notes are for staff to add."""

    serializer_class = NoteSerializer

    def get_queryset(self) -> QuerySet[Note]:
        return Note.objects.select_related("created_by").order_by("created_at")
