"""Typed API fields for what the models keep as JSON.

A JSON column takes any JSON, but the API promises shapes: settings are an
object of scalar values, workload scripts a list of objects, client counts a
list of integers. These fields say so in the OpenAPI schema and answer a
wrong type with 400 naming the field. Nothing here holds a NUL character:
PostgreSQL's jsonb and text cannot store one.
"""

import re
from collections.abc import Mapping
from typing import Any, TypeVar

from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents.contract.vocabulary import BUILTIN_SCRIPTS


class JsonTyped:
    """Refuse a value of the wrong JSON type instead of coercing it (DRF reads 0 as "0")."""

    json_types: tuple[type, ...] = ()

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) != (bool in self.json_types) or not isinstance(
            data, self.json_types
        ):
            self.fail("invalid")  # type: ignore[attr-defined]
        return super().to_internal_value(data)  # type: ignore[misc]


class StrictCharField(JsonTyped, serializers.CharField):
    json_types = (str,)


class StrictRegexField(JsonTyped, serializers.RegexField):
    json_types = (str,)


class StrictIntegerField(JsonTyped, serializers.IntegerField):
    json_types = (int,)


class StrictFloatField(JsonTyped, serializers.FloatField):
    json_types = (int, float)


class StrictBooleanField(JsonTyped, serializers.BooleanField):
    json_types = (bool,)


# What a serializer of no model reads and shows: a JSON object (a query, a document).
Document = Mapping[str, object]
SerializedModel = TypeVar("SerializedModel", bound=models.Model)
Scalar = str | int | float | bool


class StrictModelSerializer(serializers.ModelSerializer[SerializedModel]):
    """A ModelSerializer whose model fields take only their own JSON type, and that refuses
    a field it does not have (a misspelt `repeat` would otherwise leave the default)."""

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.CharField: StrictCharField,
        models.TextField: StrictCharField,
        models.IntegerField: StrictIntegerField,
        models.PositiveIntegerField: StrictIntegerField,
        models.BigIntegerField: StrictIntegerField,
        models.FloatField: StrictFloatField,
        models.BooleanField: StrictBooleanField,
    }

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            known = ", ".join(name for name, field in self.fields.items() if not field.read_only)
            unknown = {
                name: [f"there is no field {name!r}; the fields are: {known}"]
                for name in sorted(set(data) - set(self.fields))
            }
            if unknown:
                raise serializers.ValidationError(unknown)
        return super().to_internal_value(data)


SETTING_NAME = re.compile(r"^[a-z_][a-z0-9_.]*$")
VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SCALAR_SCHEMA = {
    "oneOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}],
}


@extend_schema_field(SCALAR_SCHEMA)
class ScalarField(serializers.Field[Scalar, object, object, object]):
    """A string (one line, no NUL), a number or a boolean."""

    default_error_messages = {
        "type": "must be a string, number or boolean",
        "line": "must be a single line without NUL characters",
    }

    def to_internal_value(self, data: object) -> Scalar:
        if not isinstance(data, str | int | float | bool):
            self.fail("type")
        if isinstance(data, str) and ("\n" in data or "\x00" in data):
            self.fail("line")
        return data

    def to_representation(self, value: object) -> object:
        return value


class NamedScalarsField(serializers.DictField):
    """An object of names (matching `pattern`) to scalar values."""

    child = ScalarField()

    def __init__(self, pattern: re.Pattern[str], what: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pattern = pattern
        self.what = what

    def to_internal_value(self, data: Any) -> dict[str, Scalar]:
        values = super().to_internal_value(data)
        bad = [name for name in values if not self.pattern.match(name)]
        if bad:
            raise serializers.ValidationError(
                f"{bad[0]!r} is not a valid {self.what} (pattern {self.pattern.pattern})"
            )
        return values


def settings_field(**kwargs: Any) -> NamedScalarsField:
    """postgresql.conf settings: {"shared_buffers": "1GB", "jit": false}."""
    return NamedScalarsField(SETTING_NAME, "setting name", **kwargs)


def defines_field(**kwargs: Any) -> NamedScalarsField:
    """pgbench `-D` variables: {"aid_max": 100000}."""
    return NamedScalarsField(VARIABLE_NAME, "pgbench variable name", **kwargs)


class ScriptSerializer(serializers.Serializer[Document]):
    """A built-in pgbench script (`builtin`) or a custom one (`name` and `text`), with a weight."""

    builtin = serializers.ChoiceField(choices=BUILTIN_SCRIPTS, required=False)
    name = StrictCharField(max_length=64, required=False)
    text = StrictCharField(max_length=100_000, required=False, trim_whitespace=False)
    weight = StrictIntegerField(min_value=0, max_value=1_000_000, default=1)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("builtin" in attrs) == ("text" in attrs):
            raise serializers.ValidationError("give either builtin, or name and text")
        return attrs


class StorageLayoutSerializer(serializers.Serializer[Document]):
    """Where a run keeps its data and (optionally, on another target) its WAL."""

    # The key is `data`, which shadows Serializer.data for the type checker only.
    data = StrictCharField(max_length=100)  # type: ignore[assignment]
    wal = StrictCharField(max_length=100, allow_null=True, required=False, default=None)
