"""The wording of an agent's refusals and the lab's review, and which build sources an
entry of build_sources covers (the lab checks them before queuing, the agent again)."""

from agents.contract.host_allows import how_to_allow_source, how_to_enable, source_allowed


def test_each_fix_names_the_scripts_lab_variable_the_worker_option_and_the_config_key():
    assert how_to_enable("allow_user_patches") == (
        "for the local agent of scripts/lab set BENCHLAB_AGENT_ALLOW_PATCHES=1; for another "
        "agent start `python -m agents worker` with --allow-user-patches (config key "
        "allow_user_patches)"
    )
    source = how_to_allow_source("/srv/pg.git")
    assert "BENCHLAB_AGENT_BUILD_SOURCES='/srv/pg.git'" in source
    assert "--allow-source-builds --build-source /srv/pg.git" in source


def test_a_source_is_allowed_only_under_an_entry_that_covers_it():
    url = "https://ftp.postgresql.org/pub/source/"
    assert source_allowed("url", url + "v17.2/postgresql-17.2.tar.bz2", url)
    assert not source_allowed("url", url + "../evil.tar.bz2", url)
    assert not source_allowed("url", "https://example.org/pg.tar.bz2", url)
    assert source_allowed("path", "/srv/src/pg17", "/srv/src")
    assert not source_allowed("path", "/srv/src/../etc", "/srv/src")
    assert not source_allowed("path", "/srv/srcx", "/srv/src")
    assert source_allowed("git", "/srv/pg.git", "/srv/pg.git")
    assert source_allowed("upload", "0" * 64, "upload")
    assert not source_allowed("upload", "0" * 64, "/srv/src")
