"""`python -m benchlab.cli`: the same as the `benchlab` command."""

from benchlab.cli.main import main

raise SystemExit(main())
