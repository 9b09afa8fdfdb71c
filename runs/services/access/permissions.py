"""Who may change what.

Everyone signed in may read and compare everything. Changing, deleting,
starting or revoking something is for its owner (`created_by`) and staff;
a row without an owner (from before ownership, a preset, a deleted user)
is staff only. A run also belongs to the owner of its experiment, and a
share link to the owner of what it shares.
"""

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db.models import Model

from runs.models import Run, ShareLink

AnyUser = AbstractBaseUser | AnonymousUser


def owner_ids(obj: Model) -> set[int]:
    """The ids of the users who own `obj` (none for an ownerless row)."""
    ids = {getattr(obj, "created_by_id", None)}
    if isinstance(obj, Run):
        ids.add(obj.experiment.created_by_id)
    if isinstance(obj, ShareLink):
        ids.add(obj.target.created_by_id)
    return {pk for pk in ids if pk is not None}


def can_change(user: AnyUser, obj: Model) -> bool:
    """Whether `user` may change, delete, start, cancel or revoke `obj`."""
    if not user.is_authenticated:
        return False
    if getattr(user, "is_staff", False):
        return True
    return user.pk in owner_ids(obj)


def check_can_change(user: AnyUser, obj: Model, action: str) -> None:
    """Raise PermissionDenied (403) naming who may `action` the object."""
    if can_change(user, obj):
        return
    name = obj._meta.verbose_name
    owners = "its owner or staff" if owner_ids(obj) else "staff (it has no owner)"
    raise PermissionDenied(f"Only {owners} may {action} this {name}.")
