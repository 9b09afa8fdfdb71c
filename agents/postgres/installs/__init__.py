"""PostgreSQL installs a job runs: those found on this host and in the cache
(`inventory`), the one a job's version gets (`ensure`), prebuilt releases downloaded
(`prebuilt`), the cache's directories, lock and sealing (`cache`), and builds from source
(`source_build`, with its steps in `build_steps`)."""
