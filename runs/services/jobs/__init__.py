"""Jobs and their events: a run's job leaving for its agent's queue (`dispatch`), and what
agents send back stored, one event at a time (`events`) or a batch at once (`ingest`)."""
