"""One error format for the whole API.

Every error answers `{"error": {"code", "message", "fields"}}`. `code` is
stable: `invalid` (validation; `fields` maps each field to its messages),
the agent's codes for a spec it would refuse (`refused_setting`,
`refused_script`, `unknown_setting`, ... with `fields`), `conflict` (409),
and DRF's own codes (`not_authenticated`, `permission_denied`, `not_found`, ...).
"""

from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from agents.errors import USER_CODES, JobError
from runs.services.errors import Conflict


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def exception_handler(exc, context):
    """Answer JobError with 400 and Conflict with 409; reshape DRF's own errors."""
    if isinstance(exc, JobError):
        fields = {exc.field or "non_field_errors": [exc.message]}
        return Response(error_body(exc.code, exc.message, fields), status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, Conflict):
        return Response(error_body(exc.code, exc.message), status.HTTP_409_CONFLICT)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ValidationError):
        detail = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        response.data = error_body(_validation_code(detail), "The request is not valid.", detail)
    elif isinstance(exc, APIException):
        codes = exc.get_codes()
        response.data = error_body(
            codes if isinstance(codes, str) else exc.default_code, str(exc.detail)
        )
    return response


def _validation_code(detail: dict) -> str:
    """The agent's code (e.g. `refused_setting`) when one explains the error, else `invalid`."""
    for messages in detail.values():
        for message in messages if isinstance(messages, list) else []:
            if getattr(message, "code", None) in USER_CODES:
                return message.code
    return "invalid"
