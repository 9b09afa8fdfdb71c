"""pgbench's output, every version from 9.2 to 18, read into typed documents: the
documents (`documents`), the summary and per-script line rules (`summary_lines`), the
reader of a benchmark run's output (`parse`) and of `pgbench -i` progress (`init_progress`)."""
