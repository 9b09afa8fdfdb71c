"""A point's counters per transaction as the lab reads them: the run page's table
(`points`) and the counters that moved most between two compared cells (`movers`)."""
