"""One error format for the whole API (`runs.api.serializers.ErrorSerializer`).

Every error answers `{"error": {"code", "message", "fields"}}`. `code` is
stable:

- `invalid` (400): `fields` maps each field to its messages, a nested field
  by its path such as `scripts[0].weight`;
- the agent's codes for a spec it would refuse (`refused_setting`,
  `refused_script`, `unknown_setting`, ...; 400 with `fields`);
- `conflict` (409): the object's state does not allow the action;
- `in_use` (409): `used_by` names what uses the object;
- `already_exists` (409): a unique name is taken, `fields` names it;
- `too_large` (413): the body is over DATA_UPLOAD_MAX_MEMORY_SIZE (or has more
  fields than DATA_UPLOAD_MAX_NUMBER_FIELDS);
- `limit_reached` (400): a fair-use limit (runs.services.limits); `limit`,
  `current` and `setting` say which and how far;
- DRF's own codes (`not_authenticated`, `permission_denied`, `not_found`,
  `method_not_allowed`, `parse_error`, ...).
"""

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from agents.contract.errors import USER_CODES, JobError
from runs.services.errors import Conflict, InUse, LimitReached


def error_body(
    code: str, message: str, fields: Mapping[str, object] | None = None, **extra: object
) -> dict[str, object]:
    return {"error": {"code": code, "message": message, "fields": fields or {}, **extra}}


def job_error_detail(exc: JobError) -> dict[str, list[str]]:
    """A JobError as DRF validation detail: {field: [message]}."""
    return {exc.field or "non_field_errors": [exc.message]}


def exception_handler(exc: Exception, context: dict[str, object]) -> Response | None:
    """Answer JobError with 400, Conflict with 409, a body over the limit with 413; reshape
    DRF's own errors."""
    if isinstance(exc, RequestDataTooBig | TooManyFieldsSent):
        return Response(
            error_body("too_large", _too_large(exc)), status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
        )
    if isinstance(exc, LimitReached):
        limits = {"limit": exc.limit, "current": exc.current, "setting": exc.setting}
        body = error_body(exc.code, exc.message, job_error_detail(exc), **limits)
        return Response(body, status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, JobError):
        body = error_body(exc.code, exc.message, job_error_detail(exc))
        return Response(body, status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, InUse):
        body = error_body(exc.code, exc.message, used_by=exc.used_by)
        return Response(body, status.HTTP_409_CONFLICT)
    if isinstance(exc, Conflict):
        return Response(error_body(exc.code, exc.message), status.HTTP_409_CONFLICT)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ValidationError) and _only_codes(exc.get_codes()) == {"unique"}:
        fields = flatten_detail(exc.detail)
        response.data = error_body("already_exists", _summary(fields, "Already taken"), fields)
        response.status_code = status.HTTP_409_CONFLICT
    elif isinstance(exc, ValidationError):
        fields = flatten_detail(exc.detail)
        response.data = error_body(_validation_code(exc.detail), _summary(fields), fields)
    elif isinstance(exc, APIException):
        codes = exc.get_codes()
        response.data = error_body(
            codes if isinstance(codes, str) else exc.default_code, str(exc.detail)
        )
    return response


def _too_large(exc: RequestDataTooBig | TooManyFieldsSent) -> str:
    if isinstance(exc, TooManyFieldsSent):
        return (
            f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} fields "
            "(DATA_UPLOAD_MAX_NUMBER_FIELDS)."
        )
    return (
        f"The request body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes "
        "(DATA_UPLOAD_MAX_MEMORY_SIZE); a source tarball goes to builds/{id}/source/ as a file."
    )


def flatten_detail(detail: Any, path: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail as {"field.sub[0].name": [messages]}."""
    if isinstance(detail, dict):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            flat.update(flatten_detail(value, f"{path}.{key}" if path else str(key)))
        return flat
    if isinstance(detail, list) and any(isinstance(item, dict | list) for item in detail):
        flat = {}
        for index, item in enumerate(detail):
            flat.update(flatten_detail(item, f"{path}[{index}]"))
        return flat
    messages = detail if isinstance(detail, list) else [detail]
    return {path or "non_field_errors": [str(message) for message in messages]}


def _summary(fields: dict[str, list[str]], what: str = "The request is not valid") -> str:
    """`The request is not valid: settings: Expected a dictionary of items ...`."""
    if not fields:
        return f"{what}."
    name, messages = next(iter(fields.items()))
    return f"{what}: {name}: {messages[0]}"


def _only_codes(codes: Any) -> set[str]:
    """Every leaf code of DRF's nested `get_codes()`."""
    if isinstance(codes, dict):
        codes = list(codes.values())
    if isinstance(codes, list):
        return set().union(*(_only_codes(code) for code in codes)) if codes else set()
    return {codes}


def _validation_code(detail: Any) -> str:
    """The agent's code (e.g. `refused_setting`) when one explains the error, else `invalid`."""
    if isinstance(detail, dict):
        detail = list(detail.values())
    for messages in detail if isinstance(detail, list) else []:
        for message in messages if isinstance(messages, list) else [messages]:
            if getattr(message, "code", None) in USER_CODES:
                return message.code
    return "invalid"


@csrf_exempt
def api_not_found(request: HttpRequest, path: str) -> JsonResponse:
    """JSON 404 for a path under /api/ that names no endpoint (not Django's HTML page)."""
    message = f"There is no API endpoint at /api/{path}: see /api/ and /api/schema/."
    return JsonResponse(error_body("not_found", message), status=404)
