"""Create the first sign-in for a local lab, once.

The password comes from BENCHLAB_ADMIN_PASSWORD, or is generated and written to
var/admin-password (mode 0600) so the person who started the lab can read it.
"""

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the admin user of a local lab if no user exists yet."

    def handle(self, *args: object, **options: object) -> None:
        users = get_user_model()
        if users.objects.exists():
            self.stdout.write("ensure_admin: users exist; nothing to do")
            return
        username = os.environ.get("BENCHLAB_ADMIN_USER", "admin")
        password = os.environ.get("BENCHLAB_ADMIN_PASSWORD") or self._generated_password()
        users.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(f"ensure_admin: created user {username!r}")

    def _generated_password(self) -> str:
        path = Path(settings.BASE_DIR) / "var" / "admin-password"
        password = secrets.token_urlsafe(12)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(password + "\n")
        path.chmod(0o600)
        self.stdout.write(f"ensure_admin: password written to {path}")
        return password
