"""A point's counters per transaction as the lab reads them: the run page's table
(`points`) and the counters that moved between two compared cells (`movers`), each a test
(`evidence`), on the basis its kind calls for (`kinds`), in words (`wording`)."""
