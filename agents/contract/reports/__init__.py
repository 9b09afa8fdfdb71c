"""What an agent says back: events (`events`), the result document and its points
(`results`), the samplers' documents (`samples`), how latency percentiles were obtained
(`latency`), the host's facts (`facts`) and its PostgreSQL installs (`installs`)."""
