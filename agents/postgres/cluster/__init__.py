"""A throw-away PostgreSQL cluster for one job: its lifecycle (`lifecycle`: initdb, start,
stop, destroy), its directories and configuration files (`directories`), how clients reach
it (`clients`: the superuser's and the workload's connections) and the removal of what
dead agents left (`leftovers`); the owner marker on its directories is agents/markers.py,
below the cluster since job cgroups and client halves read it too."""
