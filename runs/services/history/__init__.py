"""Writes of the history: series of scheduled experiments, imported runs, alert webhooks."""
