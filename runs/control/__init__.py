"""What the control worker runs besides Celery: the event consumer and the reaper.

`runs.control.worker` starts both, each in a thread of its own, when the
control worker is ready (`celery -A benchlab worker -Q control`).
"""
