"""The API's one error format, as the schema describes it (runs/api/errors.py builds it)."""

from rest_framework import serializers

from runs.api.fields import Document


class ErrorDetailSerializer(serializers.Serializer[Document]):
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


class ErrorSerializer(serializers.Serializer[Document]):
    """Every error the API answers: `{"error": {"code", "message", "fields"}}`."""

    error = ErrorDetailSerializer()
