"""API permissions: everyone signed in reads; owners and staff change things.

The rule itself is `runs.services.permissions`.
"""

from django.db.models import Model
from rest_framework.permissions import SAFE_METHODS, IsAuthenticated
from rest_framework.request import Request
from rest_framework.views import APIView

from runs.services.permissions import check_can_change

ACTION_VERBS = {
    "update": "change",
    "partial_update": "change",
    "destroy": "delete",
}


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
