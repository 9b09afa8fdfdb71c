"""BenchLab agent: runs pgbench experiments on a benchmark host. Never imports Django."""
