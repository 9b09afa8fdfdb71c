"""postgresql.conf settings a job may ask for: a version's catalogue and the checks on
requested settings (`catalogue`), values parsed as PostgreSQL's GUC code does (`guc_values`)."""
