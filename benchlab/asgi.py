"""ASGI entry point (uvicorn benchlab.asgi:application); live pages use Server-Sent Events.

Django's own `get_asgi_application`, with the handler that answers a sync view's
StopIteration instead of hanging (benchlab.view_errors); uvicorn's log handlers, set up
before it loads this module, and Django's own, mask share-link tokens (benchlab.log_redaction).
"""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchlab.settings")
django.setup(set_prefix=False)

from benchlab.log_redaction import redact_web_logs  # noqa: E402  (needs the settings)
from benchlab.view_errors import LabASGIHandler  # noqa: E402  (needs the settings above)

redact_web_logs()
application = LabASGIHandler()
