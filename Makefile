# The README's commands.
.PHONY: lab test test-fast lint format bench-pages bench-ingest

lab:        ## start the whole lab locally: web, control worker, one agent (and Redis if none runs)
	scripts/lab

test:       ## the whole test suite
	scripts/test

test-fast:  ## the tests that need no server, then ruff and mypy (under two minutes)
	scripts/test --fast

bench-pages:  ## page times and sizes of long runs (throw-away database; docs/benchmarks.md)
	scripts/bench pages

bench-ingest: ## events a second one control worker stores (throw-away databases)
	scripts/bench ingest

lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

format:
	.venv/bin/ruff format . && .venv/bin/ruff check --fix .
