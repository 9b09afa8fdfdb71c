"""The control-plane Celery app: queue `control`, JSON only.

Jobs for agents are sent by name (agents.contract.wire.RUN_JOB_TASK) with
`app.send_task`; the control plane never imports the agent's Celery app.
"""

import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger

from agents.contract.redaction import redact_celery_logs

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchlab.settings")

app = Celery("benchlab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Celery replaces the handlers of the loggers it sets up: mask secrets in theirs too.
after_setup_logger.connect(redact_celery_logs, weak=False)
after_setup_task_logger.connect(redact_celery_logs, weak=False)
