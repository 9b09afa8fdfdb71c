"""The catalogue's counters of the benchmark's tables, of the sampled wait events and of the
operating system (agents/contract/reports/counter_catalogue.py gathers them)."""

from agents.contract.reports.counter_entry import EVERY_VERSION, STAT_IO, WAIT_EVENTS, Counter

_TABLES = "summed over the benchmark database's user tables"
_ACCOUNTS = (
    "of pgbench_accounts alone (or its partitions): the table whose pages fill; "
    "pgbench_tellers' and pgbench_branches' rows share a page or two that takes HOT updates "
    "at any fillfactor, and in the sum over all tables they dilute the accounts' change "
    "(a third of tpcb-like's HOT updates each)"
)
_NOT_PGBENCH = "0 in a workload without pgbench's tables (the sum over all tables still counts)"
_STATIO = "summed over the benchmark database's user tables and their indexes"


_AUTOVACUUM_NAPTIME = "autovacuum looks for work every autovacuum_naptime"


def _table(
    label: str, unit: str, column: str, meaning: str, trap: str = "", per_window: str = ""
) -> Counter:
    return Counter(
        label,
        unit,
        ((EVERY_VERSION, column),),
        f"{meaning}, {_TABLES}",
        trap=trap,
        per_window=per_window,
    )


TABLE_COUNTERS: dict[str, Counter] = {
    "tables.hot_updates": _table(
        "HOT updates",
        "rows",
        "pg_stat_user_tables.n_tup_hot_upd",
        "updates that stayed on their page and touched no index (heap-only tuples)",
    ),
    "tables.newpage_updates": Counter(
        "updates to a new page",
        "rows",
        ((STAT_IO, "pg_stat_user_tables.n_tup_newpage_upd"),),
        f"updates whose new row version went to another page, {_TABLES}",
    ),
    "tables.accounts_hot_updates": Counter(
        "HOT updates of pgbench_accounts",
        "rows",
        ((EVERY_VERSION, "pg_stat_user_tables.n_tup_hot_upd, relname pgbench_accounts"),),
        f"updates that stayed on their page and touched no index, {_ACCOUNTS}",
        trap=_NOT_PGBENCH,
    ),
    "tables.accounts_newpage_updates": Counter(
        "updates of pgbench_accounts to a new page",
        "rows",
        ((STAT_IO, "pg_stat_user_tables.n_tup_newpage_upd, relname pgbench_accounts"),),
        f"updates whose new row version went to another page, {_ACCOUNTS}",
        trap="at fillfactor 100 the first update of each page goes to a new page and the "
        "later ones mostly stay (the page's pruned versions leave room): a one-off of the "
        "first pass over the table, so repeats in one cluster count it in the first ones "
        f"only; {_NOT_PGBENCH}",
    ),
    "tables.seq_scans": _table(
        "sequential scans", "scans", "pg_stat_user_tables.seq_scan", "sequential scans started"
    ),
    "tables.idx_scans": _table(
        "index scans", "scans", "pg_stat_user_tables.idx_scan", "index scans started"
    ),
    "tables.vacuums": _table(
        "manual vacuums", "vacuums", "pg_stat_user_tables.vacuum_count", "VACUUM commands run"
    ),
    "tables.autovacuums": _table(
        "autovacuums",
        "vacuums",
        "pg_stat_user_tables.autovacuum_count",
        "vacuums by the autovacuum daemon",
        trap="counted when the vacuum ends: one of a big table may end after the window",
        per_window=_AUTOVACUUM_NAPTIME,
    ),
    "tables.analyzes": _table(
        "manual analyzes", "analyzes", "pg_stat_user_tables.analyze_count", "ANALYZE commands run"
    ),
    "tables.autoanalyzes": _table(
        "autoanalyzes",
        "analyzes",
        "pg_stat_user_tables.autoanalyze_count",
        "analyzes by the autovacuum daemon",
        per_window=_AUTOVACUUM_NAPTIME,
    ),
    "tables.heap_blks_read": Counter(
        "table blocks read",
        "blocks",
        ((EVERY_VERSION, "pg_statio_user_tables.heap_blks_read"),),
        f"table blocks not in shared buffers, {_STATIO}",
    ),
    "tables.heap_blks_hit": Counter(
        "table blocks hit",
        "blocks",
        ((EVERY_VERSION, "pg_statio_user_tables.heap_blks_hit"),),
        f"table blocks found in shared buffers, {_STATIO}",
    ),
    "tables.idx_blks_read": Counter(
        "index blocks read",
        "blocks",
        ((EVERY_VERSION, "pg_statio_user_tables.idx_blks_read"),),
        f"index blocks not in shared buffers, {_STATIO}",
    ),
    "tables.idx_blks_hit": Counter(
        "index blocks hit",
        "blocks",
        ((EVERY_VERSION, "pg_statio_user_tables.idx_blks_hit"),),
        f"index blocks found in shared buffers, {_STATIO}",
    ),
}

# pg_stat_activity's wait_event_type -> counter key; "CPU": active with no wait event.
WAIT_TYPES: dict[str, str] = {
    "CPU": "waits.cpu",
    "Lock": "waits.lock",
    "LWLock": "waits.lwlock",
    "IO": "waits.io",
    "IPC": "waits.ipc",
    "Client": "waits.client",
    "BufferPin": "waits.buffer_pin",
    "Timeout": "waits.timeout",
    "Activity": "waits.activity",
    "Extension": "waits.extension",
}
_WAIT_WORDS = {
    "CPU": "running (active with no wait event)",
    "Lock": "waiting for heavyweight locks (rows, tables, transactions)",
    "LWLock": "waiting for lightweight locks (WAL insertion, buffer mappings, ...)",
    "IO": "waiting for I/O (data file reads, WAL writes and syncs)",
    "IPC": "waiting for other processes (a synchronous standby, parallel workers, ...)",
    "Client": "waiting for the client (pgbench) to send or read",
    "BufferPin": "waiting for a buffer pin",
    "Timeout": "waiting for a timeout (pg_sleep, a vacuum delay)",
    "Activity": "idle in their main loop",
    "Extension": "waiting inside an extension",
}
WAIT_COUNTERS: dict[str, Counter] = {
    key: Counter(
        f"backend time {_WAIT_WORDS[wait_type].split(' (')[0]}",
        "backend-seconds",
        ((WAIT_EVENTS, f"pg_stat_activity.wait_event_type {wait_type}, sampled every second"),),
        f"active backends seen {_WAIT_WORDS[wait_type]} by the once-a-second sampler, one "
        "second each",
        trap="sampled: a backend counts for the whole second it was seen in, so short "
        "points hold few samples and only large shares of time show",
    )
    for wait_type, key in WAIT_TYPES.items()
}

OS_COUNTERS: dict[str, Counter] = {
    "os.server_cpu_s": Counter(
        "server CPU time",
        "s",
        ((EVERY_VERSION, "/proc/<pid>/stat utime+stime of the server's processes"),),
        "CPU time of the postmaster and its children",
    ),
    "os.disk_read_bytes": Counter(
        "disk reads",
        "bytes",
        ((EVERY_VERSION, "/proc/diskstats sectors read by the data and WAL devices"),),
        "bytes the data and WAL devices read (every process on the host)",
    ),
    "os.disk_write_bytes": Counter(
        "disk writes",
        "bytes",
        ((EVERY_VERSION, "/proc/diskstats sectors written by the data and WAL devices"),),
        "bytes the data and WAL devices wrote (every process on the host)",
    ),
    "os.pgbench_cpu_s": Counter(
        "pgbench CPU time",
        "s",
        ((EVERY_VERSION, "wait4() rusage of pgbench"),),
        "CPU time of pgbench",
    ),
    "os.pgbench_voluntary_switches": Counter(
        "pgbench voluntary context switches",
        "switches",
        ((EVERY_VERSION, "wait4() rusage ru_nvcsw of pgbench"),),
        "pgbench's waits",
    ),
    "os.pgbench_involuntary_switches": Counter(
        "pgbench involuntary context switches",
        "switches",
        ((EVERY_VERSION, "wait4() rusage ru_nivcsw of pgbench"),),
        "pgbench preempted",
    ),
    "os.host_context_switches": Counter(
        "context switches on the host",
        "switches",
        ((EVERY_VERSION, "/proc/stat ctxt"),),
        "context switches of every process on the host",
    ),
}
