"""API permissions: everyone signed in reads; owners and staff change things.

The rule itself is `runs.services.access.permissions`.
"""

from django.contrib.auth.models import User
from django.db.models import Model
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import SAFE_METHODS, IsAuthenticated
from rest_framework.request import Request
from rest_framework.views import APIView

from runs.services.access.permissions import check_can_change

ACTION_VERBS = {
    "update": "change",
    "partial_update": "change",
    "destroy": "delete",
}


def signed_in_user(request: Request) -> User:
    """The request's user, who owns what the request creates.

    The API's permission classes let no anonymous request reach a view; this
    says so to the type checker and answers 401 should one ever get through.
    """
    if not isinstance(request.user, User):
        raise NotAuthenticated()
    return request.user


class OwnerOrStaffMayChange(IsAuthenticated):
    """Reads for everyone signed in; any other request on an object for its owner or staff.

    A viewset lists actions anyone signed in may take on others' objects
    (`rerun` makes the user's own run) in `open_actions`. A refusal is a 403
    whose message says who may.
    """

    def has_object_permission(self, request: Request, view: APIView, obj: Model) -> bool:
        action = getattr(view, "action", None) or ""
        if request.method in SAFE_METHODS or action in getattr(view, "open_actions", ()):
            return True
        check_can_change(request.user, obj, ACTION_VERBS.get(action, action))
        return True
