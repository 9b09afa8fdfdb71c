"""BenchLab agent: runs pgbench experiments on a benchmark host. Never imports Django."""

# Recorded in every result document (`agent_version`) and run manifest.
__version__ = "0.1.0"
