"""One error format for the whole API.

Every error answers `{"error": {"code", "message", "fields"}}`: `code` is stable
(`invalid`, `not_authenticated`, `permission_denied`, `not_found`, `conflict`,
...), `fields` maps a field path to its messages for validation errors.
"""

from rest_framework.exceptions import ValidationError
from rest_framework.views import exception_handler as drf_exception_handler


def exception_handler(exc, context):
    """DRF's handler, with its body rewritten into the stable format."""
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ValidationError):
        fields = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        response.data = {
            "error": {"code": "invalid", "message": "The request is not valid.", "fields": fields}
        }
        return response
    code = exc.get_codes() if hasattr(exc, "get_codes") else "error"
    response.data = {
        "error": {
            "code": code if isinstance(code, str) else "error",
            "message": str(getattr(exc, "detail", exc)),
            "fields": {},
        }
    }
    return response
