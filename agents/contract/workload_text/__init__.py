"""A workload's text (custom pgbench scripts, setup SQL) as pgbench and psql read it,
and the checks both tiers run on it before anything is provisioned: where pgbench finds
meta-commands (`script_reader`), shell meta-commands refused (`scripts`), SQL split into
statements (`sql_text`), SQL that plainly needs superuser rights refused (`workload_sql`)."""
