# The README's commands.
.PHONY: lab test lint format

lab:        ## start the whole lab locally: web, control worker, one agent (and Redis if none runs)
	scripts/lab

test:       ## the whole test suite
	scripts/test

lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

format:
	.venv/bin/ruff format . && .venv/bin/ruff check --fix .
