"""The contract between the lab (runs/, benchlab/) and its agents: the only part of
`agents` the lab imports, and it imports nothing but the standard library.

- `vocabulary`: the words of specs and results (sources, query modes, ...), each once.
- `spec`: the job spec's type, defaults and validation.
- `events`, `results`: the event envelope and each event type, the result
  document and its point results.
- `errors`: error codes, their categories, `JobError`.
- `catalogue`, `guc_values`, `scripts`: the pure checks both sides run on
  settings and pgbench scripts before anything is provisioned.
- `wire`: the Celery task, queue, Redis key and stream names.
"""
