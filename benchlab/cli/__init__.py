"""`benchlab`, the lab's command line client: thin over the HTTP API (runs/api/), with a
token from BENCHLAB_TOKEN or ~/.config/benchlab/config.toml. Standard library only: it
never imports Django, Celery or `runs` (tests/benchlab/cli/test_cli.py), so it runs
on a laptop with nothing of the lab installed."""
