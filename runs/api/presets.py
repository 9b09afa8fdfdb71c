"""Presets through the API: list them, and make an experiment from one (what the
Schedule form's `?preset=KEY` starts from, with the request's fields over it)."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers as drf
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from runs.api import serializers
from runs.forms.experiments import parse_storage_layouts
from runs.presets import PRESETS, Preset, find, form_initial, load_presets


class PresetSerializer(drf.Serializer[dict[str, object]]):
    """A preset as the API lists it (`preset_document`)."""

    key = drf.CharField()
    title = drf.CharField()
    description = drf.CharField()
    sweep = drf.DictField(help_text="the sweep fields it sets; the others keep their defaults")
    execution = drf.CharField()


def preset_document(preset: Preset) -> dict[str, object]:
    return {
        "key": preset.key,
        "title": preset.title,
        "description": preset.description,
        "sweep": dict(preset.sweep),
        "execution": preset.execution,
    }


def preset_experiment_body(preset: Preset, given: dict[str, Any]) -> dict[str, Any]:
    """The experiment API's fields for `preset` (its catalogue entries created if missing),
    with `given` over them."""
    load_presets()
    initial = form_initial(preset)
    storage = str(initial.pop("storage"))
    return {**initial, "storage_layouts": parse_storage_layouts(storage), **given}


class PresetViewSet(viewsets.ViewSet):
    """Presets by key; `experiment` makes (and with `start`, starts) one's experiment."""

    lookup_value_regex = r"[a-z0-9-]+"

    @extend_schema(operation_id="presets_list", responses={200: PresetSerializer(many=True)})
    def list(self, request: Request) -> Response:
        return Response([preset_document(preset) for preset in PRESETS])

    @extend_schema(operation_id="presets_retrieve", responses={200: PresetSerializer})
    def retrieve(self, request: Request, pk: str | None = None) -> Response:
        return Response(preset_document(self._preset(pk)))

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={201: serializers.ExperimentSerializer, 400: serializers.ErrorSerializer},
    )
    @action(detail=True, methods=["post"])
    def experiment(self, request: Request, pk: str | None = None) -> Response:
        """An experiment from the preset: the body's experiment fields (`hosts`, `start`,
        ...) over the preset's; hosts are the only host when the lab has one."""
        given = request.data if isinstance(request.data, dict) else {}
        body = preset_experiment_body(self._preset(pk), dict(given))
        made = serializers.ExperimentSerializer(data=body, context={"request": request})
        made.is_valid(raise_exception=True)
        made.save()
        return Response(made.data, status=status.HTTP_201_CREATED)

    def _preset(self, key: str | None) -> Preset:
        preset = find(key or "")
        if preset is None:
            known = ", ".join(preset.key for preset in PRESETS)
            raise NotFound(f"no preset {key!r}; the presets are {known}")
        return preset
