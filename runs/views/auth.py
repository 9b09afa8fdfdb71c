"""The request a `login_required` view receives (django-stubs' recommended pattern)."""

from django.contrib.auth.models import User
from django.http import HttpRequest


class AuthenticatedHttpRequest(HttpRequest):
    """A request `login_required` let through: `user` is a signed-in User, never anonymous."""

    user: User
