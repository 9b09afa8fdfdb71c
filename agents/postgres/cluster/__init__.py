"""A throw-away PostgreSQL cluster for one job: its lifecycle (`lifecycle`: initdb, start,
stop, destroy), its directories and configuration files (`directories`), how clients reach
it (`clients`: the superuser's and the workload's connections), the owner marker on its
directories (`markers`) and the removal of what dead agents left (`leftovers`)."""
