"""`{% if link|may_change:request.user %}`: show a write button only to who may use it."""

from django import template
from django.db.models import Model

from runs.services.access.permissions import AnyUser, can_change

register = template.Library()


@register.filter
def may_change(obj: Model, user: AnyUser) -> bool:
    """Whether `user` may change, delete, start, cancel or revoke `obj` (owner or staff)."""
    return can_change(user, obj)
