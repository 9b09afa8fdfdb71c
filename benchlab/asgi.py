"""ASGI entry point (uvicorn benchlab.asgi:application); live pages use Server-Sent Events."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchlab.settings")

application = get_asgi_application()
