"""The OpenAPI schema documents every error the API answers, with its body.

drf-spectacular documents the success responses; this AutoSchema adds the
error responses each operation can give (all with `ErrorSerializer`):

- 401 and 403 everywhere: no or bad credentials; not allowed (not the owner).
- 400 where a request body is read; 400 on lists (bad filter values).
- 404 where the path names an object, and on lists (a page past the end).
- Request bodies of the model serializers take no property they do not list
  (`additionalProperties: false`): a misspelt field answers 400.
- 409 where a body is read (a unique name taken), on DELETE (in use) and
  on actions whose object's state may not allow them (`cancel`, `rerun`,
  `approve`, `revoke`, `start`).
- 413 and 415 where a body is read: over DATA_UPLOAD_MAX_MEMORY_SIZE; not JSON.
"""

from typing import Literal

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema

from runs.api.fields import StrictModelSerializer
from runs.api.serializers import ErrorSerializer

ERROR_DESCRIPTIONS = {
    400: "The request is not valid: `fields` names each field to fix.",
    401: "No credentials, or credentials that are not valid.",
    403: "Signed in, but not allowed: only the owner or staff may change it.",
    404: "No such object (or page).",
    409: "The object's state does not allow this, or it is in use (`used_by`).",
    413: "The request body is over the size limit (DATA_UPLOAD_MAX_MEMORY_SIZE).",
    415: "The request body's content type is not one this operation reads.",
}
WRITE_METHODS = ("POST", "PUT", "PATCH")
CONFLICT_ACTIONS = ("cancel", "rerun", "approve", "revoke", "start")
Direction = Literal["request", "response"]


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's AutoSchema plus the error responses of `ERROR_DESCRIPTIONS`."""

    def _get_response_bodies(self, direction: Direction = "response") -> dict[str, object]:
        responses = super()._get_response_bodies(direction)
        for code in self.error_codes():
            if str(code) in responses:
                continue
            body = self._get_response_for_code(ErrorSerializer, str(code), direction=direction)
            body["description"] = ERROR_DESCRIPTIONS[code]
            responses[str(code)] = body
        return responses

    def _map_serializer(
        self, serializer: object, direction: Direction, bypass_extensions: bool = False
    ) -> dict[str, object]:
        """Request bodies of a StrictModelSerializer say they take no other property."""
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        if direction == "request" and isinstance(serializer, StrictModelSerializer):
            schema["additionalProperties"] = False
        return schema

    def error_codes(self) -> list[int]:
        """The error statuses this operation can answer."""
        codes = {401, 403}
        is_list = self.method == "GET" and self._is_list_view()
        takes_body = self.method in WRITE_METHODS and self.get_request_serializer() is not None
        if self.method in WRITE_METHODS or is_list:
            codes.add(400)
        if "{" in self.path or is_list:
            codes.add(404)
        if (
            takes_body
            or self.method == "DELETE"
            or getattr(self.view, "action", None) in CONFLICT_ACTIONS
        ):
            codes.add(409)
        if takes_body:
            codes.update((413, 415))
        return sorted(codes)
