"""A PostgreSQL build from source: its definition and record (`definition`), the configure
flags and CFLAGS allowed (`flags`), what may enter its source tree (`source_tree`)."""
