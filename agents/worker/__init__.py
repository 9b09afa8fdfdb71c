"""The agent as a long-running worker for the lab: the Celery worker (`celery_worker`),
its transport to the lab over Redis (`transport`), exactly-once delivery (`exactly_once`)
on its on-disk ledger (`ledger`), and its identity, the secret it signs with (`identity`)."""
