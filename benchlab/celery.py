"""The control-plane Celery app: queue `control`, JSON only.

Jobs for agents are sent by name (agents.contract.wire.RUN_JOB_TASK) with
`app.send_task`; the control plane never imports the agent's Celery app.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchlab.settings")

app = Celery("benchlab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
