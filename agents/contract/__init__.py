"""The contract between the lab (runs/, benchlab/) and its agents: the only part of
`agents` the lab imports, and it imports nothing but the standard library.

- `vocabulary`: the words of specs and results (sources, query modes, ...), each once.
- `errors`: error codes, their categories, `JobError`.
- `wire`, `signing`, `redaction`: the Celery task, queue, Redis key and stream
  names; the signatures on jobs and events; secrets kept out of logs and dead letters.
- `spec/`: what a job asks for: the job spec, its declared fields, the pgbench
  versions its options need, the disk it needs, the run manifest that replays it.
- `reports/`: what an agent says back: events, the result document and its
  points, latency percentiles, the host's facts, its installs.
- `pgbench_output/`: pgbench's output of every version, read into typed documents.
- `workload_text/`: custom scripts and SQL as pgbench and psql read them, and the
  checks on them.
- `settings/`: postgresql.conf settings: a version's catalogue, GUC value parsing.
- `builds/`: a build from source: its definition, allowed flags, source tree checks.
"""
