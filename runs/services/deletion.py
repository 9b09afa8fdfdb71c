"""Deleting what people define: only its owner or staff, never something in use.

Something in use is refused with `InUse` (409) naming what uses it, so the
caller knows what to delete or cancel first: a build, config profile or
workload that runs or experiments use (runs keep a snapshot, but their rows
point at it), a profile other profiles build on, an experiment with runs
still queued or running, whose runs a comparison holds or that a series repeats.
"""

import logging

from django.db import transaction
from django.db.models import Model, ProtectedError, QuerySet

from runs.models import Comparison, ConfigProfile, Experiment, PgBuild, Run, Workload
from runs.services.access.permissions import AnyUser, check_can_change
from runs.services.errors import InUse

logger = logging.getLogger(__name__)

SHOWN_IDS = 5
PROTECTING_KEYS = {Run: "runs", ConfigProfile: "config_profiles"}

Deletable = PgBuild | ConfigProfile | Workload | Experiment | Comparison


def object_delete(obj: Deletable, user: AnyUser) -> None:
    """Delete `obj` if `user` may and nothing uses it; else PermissionDenied or InUse."""
    check_can_change(user, obj, "delete")
    users = usages(obj)
    if users:
        raise InUse(_in_use_message(obj, users), users)
    label = f"{obj._meta.verbose_name} {obj.pk}"
    try:
        with transaction.atomic():
            obj.delete()
    except ProtectedError as exc:
        # Something started using it between the check and the delete.
        users = _protecting(exc)
        raise InUse(_in_use_message(obj, users), users) from exc
    logger.info("%s deleted by %s", label, user)


def usages(obj: Deletable) -> dict[str, list[int]]:
    """What uses `obj`: {"runs": [ids], "experiments": [ids], ...}, empty lists left out."""
    found = {name: _ids(queryset) for name, queryset in _users(obj).items()}
    return {name: ids for name, ids in found.items() if ids}


def _users(obj: Deletable) -> dict[str, QuerySet[Model]]:
    if isinstance(obj, Experiment):
        active = obj.runs.filter(status__in=Run.ACTIVE_STATES)
        return {
            "active_runs": active,
            "comparisons": Comparison.objects.filter(runs__experiment=obj).distinct(),
            "series": obj.series_templates.all(),
        }
    if isinstance(obj, Comparison):
        return {}
    related: dict[str, QuerySet[Model]] = {
        "runs": obj.runs.all(),
        "experiments": obj.experiments.all(),
    }
    if isinstance(obj, ConfigProfile):
        related["config_profiles"] = obj.children.all()
    return related


def _protecting(exc: ProtectedError) -> dict[str, list[int]]:
    """The objects that blocked a delete, as {"runs": [ids], ...}."""
    found: dict[str, list[int]] = {}
    for protecting in exc.protected_objects:
        key = PROTECTING_KEYS.get(type(protecting)) or type(protecting).__name__.lower()
        found.setdefault(key, []).append(protecting.pk)
    return found


def _ids(queryset: QuerySet[Model]) -> list[int]:
    return list(queryset.order_by("pk").values_list("pk", flat=True))


def _in_use_message(obj: Model, users: dict[str, list[int]]) -> str:
    """`workload 3 is in use (runs 4, 5; experiments 2): delete or cancel those first.`"""
    parts = []
    for name, ids in users.items():
        shown = ", ".join(str(i) for i in ids[:SHOWN_IDS])
        more = f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
        parts.append(f"{name.replace('_', ' ')} {shown}{more}")
    name = f"{obj._meta.verbose_name} {obj.pk}"
    return f"{name} is in use ({'; '.join(parts)}): delete or cancel those first."
