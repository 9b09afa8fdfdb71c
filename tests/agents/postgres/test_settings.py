"""Settings validation against PostgreSQL 16.15's own catalogue, and applying settings."""

from contextlib import nullcontext
from pathlib import Path

import psycopg
import pytest

from agents.contract.errors import JobError
from agents.contract.settings import guc_values
from agents.contract.settings.catalogue import Catalogue, validate_settings
from agents.postgres.cluster.lifecycle import Cluster
from agents.postgres.installs.inventory import Install
from agents.postgres.settings import (
    apply_settings,
    catalogue_path,
    load_or_read_catalogue,
    read_catalogue,
    read_effective_settings,
)


@pytest.fixture(scope="module")
def catalogue(request, pg16_install: Install, agent_cache_dir: Path) -> Catalogue:
    """16.15's catalogue; a shared cluster is started only if the cache lacks it."""
    return load_or_read_catalogue(
        pg16_install, agent_cache_dir, lambda: nullcontext(request.getfixturevalue("pg_cluster"))
    )


def _error(requested: dict, catalogue: Catalogue, allowed: frozenset = frozenset()) -> JobError:
    with pytest.raises(JobError) as raised:
        validate_settings(requested, catalogue, set(allowed))
    return raised.value


def test_catalogue_is_read_once_per_version_and_cached(pg_cluster, pg16_install, tmp_path) -> None:
    started = []

    def factory():
        started.append(True)
        return nullcontext(pg_cluster)

    first = load_or_read_catalogue(pg16_install, tmp_path, factory)
    second = load_or_read_catalogue(pg16_install, tmp_path, factory)

    assert started == [True]
    assert catalogue_path(tmp_path, "16.15") == tmp_path / "catalogue-16.15.json"
    assert (tmp_path / "catalogue-16.15.json").exists()
    assert second == first
    assert first.version == "16.15"
    assert first.get("SHARED_BUFFERS").unit == "8kB"
    assert Catalogue.from_json(first.as_json()) == first


def test_valid_settings_pass_and_unsafe_ones_warn(catalogue: Catalogue) -> None:
    warnings = validate_settings(
        {
            "shared_buffers": "256MB",
            "Work_Mem": "1.5GB",
            "max_wal_size": 2048,
            "checkpoint_completion_target": 0.9,
            "synchronous_commit": "false",
            "wal_sync_method": "FDATASYNC",
            "fsync": False,
            "full_page_writes": "off",
            "jit": True,
            "statement_timeout": "1min",
        },
        catalogue,
        set(),
    )

    assert [warning.split(":")[0:2] for warning in warnings] == [
        ["unsafe", " fsync=off"],
        ["unsafe", " full_page_writes=off"],
    ]


def test_unknown_setting_suggests_the_closest_name(catalogue: Catalogue) -> None:
    error = _error({"shared_bufers": "1GB"}, catalogue)

    assert error.code == "unknown_setting"
    assert error.field == "settings.shared_bufers"
    assert error.message == (
        'shared_bufers: unknown setting in PostgreSQL 16.15 (did you mean "shared_buffers"?)'
    )


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("fsync", "maybe", 'fsync: "maybe" is not a boolean: use on or off'),
        ("wal_sync_method", "bogus", 'wal_sync_method: "bogus" is not one of fsync, fdatasync'),
        ("shared_buffers", "lots", 'shared_buffers: "lots" is not a number'),
        ("max_connections", "100MB", 'max_connections: "100MB" is not a plain number'),
        ("shared_buffers", "1PB", 'shared_buffers: "1PB" invalid unit "PB": valid units'),
        ("shared_buffers", "1gb", 'shared_buffers: "1gb" invalid unit "gb"'),
        ("checkpoint_timeout", "5 minutes", 'checkpoint_timeout: "5 minutes" invalid unit'),
        ("block_size", "4096", "block_size: cannot be set"),
        ("transaction_isolation", "serializable", "cannot be set in a configuration file"),
        ("application_name", "two\nlines", "must be a single line"),
        ("work_mem", None, "work_mem: must be a string, a number or a boolean"),
    ],
)
def test_bad_values_are_invalid(catalogue: Catalogue, name, value, expected) -> None:
    error = _error({name: value}, catalogue)

    assert error.code == "invalid_setting_value"
    assert error.field == f"settings.{name}"
    assert expected in error.message


def test_out_of_range_says_the_range_in_the_settings_own_unit(catalogue: Catalogue) -> None:
    too_big = _error({"shared_buffers": "16TB"}, catalogue)
    too_short = _error({"checkpoint_timeout": "10s"}, catalogue)
    below = _error({"checkpoint_completion_target": 2}, catalogue)

    assert too_big.code == "invalid_setting_value"
    assert too_big.message == (
        'shared_buffers: "16TB" is out of range: '
        "must be between 16 (128kB) and 1073741823 (8TB) in units of 8kB"
    )
    assert too_short.message == (
        'checkpoint_timeout: "10s" is out of range: must be between 30 (30s) and 86400 (1d) '
        "in units of s"
    )
    assert below.message.endswith("must be between 0 and 1")


def test_refused_setting_unless_the_agent_allows_it(catalogue: Catalogue) -> None:
    error = _error({"archive_command": "cp %p /tmp/%f"}, catalogue)

    assert error.code == "refused_setting"
    assert error.field == "settings.archive_command"
    assert "runs shell commands" in error.message
    assert validate_settings({"archive_command": "true"}, catalogue, {"archive_command"}) == []
    assert _error({"include_dir": "/etc"}, catalogue).code == "refused_setting"


def test_every_problem_is_reported_at_once(catalogue: Catalogue) -> None:
    error = _error({"work_mem": "64MB", "foo": 1, "shared_buffers": "1PB", "port": 5433}, catalogue)

    assert error.code == "unknown_setting"
    assert error.field == "settings.foo"
    assert error.message.startswith("3 settings are not acceptable: foo: unknown setting")
    assert '; shared_buffers: "1PB" invalid unit' in error.message
    assert "; port: refused because it is managed by the agent" in error.message


# The server itself is the reference for how values parse: SET each value in a
# session and compare what PostgreSQL stored with what the validator computed.
SERVER_CASES = [
    ("work_mem", "1.5GB"), ("work_mem", "1000kB"), ("work_mem", "0x100"), ("work_mem", "010"),
    ("work_mem", " 4MB "), ("work_mem", "64.5"), ("work_mem", "1e3"), ("work_mem", "1024 kB"),
    ("work_mem", "100000B"), ("work_mem", "1.5"), ("work_mem", "2.5"), ("work_mem", "1kb"),
    ("work_mem", "1 TB"), ("work_mem", "x"), ("work_mem", ".5MB"), ("work_mem", "-1"),
    ("statement_timeout", "1.5min"), ("statement_timeout", "2500us"),
    ("statement_timeout", "1d"), ("statement_timeout", "3 h"), ("statement_timeout", "1y"),
    ("vacuum_cost_delay", "500us"), ("vacuum_cost_delay", "0.25"), ("vacuum_cost_delay", "1s"),
    ("random_page_cost", "1.1"), ("random_page_cost", "inf"), ("random_page_cost", "nan"),
    ("random_page_cost", "1e400"), ("enable_seqscan", "of"), ("enable_seqscan", "o"),
    ("enable_seqscan", "TR"), ("enable_seqscan", "Yes"), ("enable_seqscan", "2"),
    ("synchronous_commit", "yes"), ("synchronous_commit", "Remote_Apply"),
    ("synchronous_commit", "tr"), ("constraint_exclusion", "0"),
]  # fmt: skip


def _server_accepts(conn: psycopg.Connection, name: str, value: str) -> str | None:
    """What the server stores for `name = value` in a session, or None if it refuses it."""
    try:
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    except psycopg.errors.DataError:
        return None
    return conn.execute("SELECT setting FROM pg_settings WHERE name = %s", (name,)).fetchone()[0]


def _validator_value(catalogue: Catalogue, name: str, value: str) -> str | None:
    try:
        validate_settings({name: value}, catalogue, set())
    except JobError:
        return None
    info = catalogue.get(name)
    if info.vartype == "integer":
        return str(guc_values.parse_integer(value, info.unit))
    if info.vartype == "real":
        return f"{guc_values.parse_real(value, info.unit):g}"
    return "accepted"


def test_values_parse_exactly_as_the_server_parses_them(pg_cluster, catalogue) -> None:
    with pg_cluster.connect() as conn:
        for name, value in SERVER_CASES:
            stored = _server_accepts(conn, name, value)
            ours = _validator_value(catalogue, name, value)
            if ours == "accepted":
                assert stored is not None, (name, value)
            else:
                assert ours == stored, (name, value)


def test_postmaster_setting_is_applied_after_restart_and_read_back(pg_cluster: Cluster) -> None:
    pid_before = pg_cluster.postmaster_pid
    try:
        apply_settings(
            pg_cluster,
            {"shared_buffers": "48MB", "max_connections": 40, "application_name": "it's a \\ test"},
        )
        with pg_cluster.connect() as conn:
            effective = {row["name"]: row for row in read_effective_settings(conn)}
            application_name = conn.execute("SHOW application_name").fetchone()[0]
    finally:
        apply_settings(pg_cluster, {})

    assert pg_cluster.postmaster_pid != pid_before
    assert effective["shared_buffers"] == {
        "name": "shared_buffers", "setting": "6144", "unit": "8kB", "source": "configuration file",
    }  # fmt: skip
    assert effective["max_connections"]["setting"] == "40"
    assert effective["wal_sync_method"]["source"] == "default"
    assert application_name == "it's a \\ test"
    with pg_cluster.connect() as conn:
        assert conn.execute("SHOW shared_buffers").fetchone() == ("128MB",)


def test_value_the_server_refuses_names_the_setting(make_cluster) -> None:
    cluster: Cluster = make_cluster()
    cluster.initdb()

    with pytest.raises(JobError) as raised:
        apply_settings(cluster, {"TimeZone": "Nowhere/Land"})

    assert raised.value.code == "invalid_setting_value"
    assert raised.value.field == "settings.TimeZone"
    assert 'invalid value for parameter "TimeZone"' in raised.value.message


def test_catalogue_of_a_running_server_lists_its_settings(pg_cluster: Cluster) -> None:
    catalogue = read_catalogue(pg_cluster)
    shared_buffers = catalogue.get("shared_buffers")

    assert catalogue.version == "16.15"
    assert (shared_buffers.vartype, shared_buffers.context) == ("integer", "postmaster")
    assert (shared_buffers.min_val, shared_buffers.max_val) == ("16", "1073741823")
    assert "fdatasync" in catalogue.get("wal_sync_method").enumvals
