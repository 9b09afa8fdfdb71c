"""Source build definitions and pgbench options by version: checked before anything runs."""

import pytest

from agents.contract.errors import JobError
from agents.contract.pgbench_versions import refuse_missing_options, version_num
from agents.contract.spec import validate_spec

TARBALL = {"kind": "url", "location": "https://example.org/postgresql-14.3.tar.bz2"}
TWO_SCRIPTS = [{"builtin": "select-only", "weight": 1}, {"builtin": "tpcb-like", "weight": 1}]
PATCH = "--- a/x.h\n+++ b/x.h\n@@ -1 +1 @@\n-a\n+b\n"


def spec_with(postgres: dict, **sections: object) -> dict:
    return {
        "version": 1,
        "postgres": postgres,
        "sweep": {"clients": [1], "duration_s": 1},
        **sections,
    }


def build_spec(**build: object) -> dict:
    return spec_with({"version": "14", "source": "build", "build": {"source": TARBALL, **build}})


def refusal(doc: dict) -> JobError:
    with pytest.raises(JobError) as caught:
        validate_spec(doc)
    return caught.value


def test_a_source_build_gets_its_defaults() -> None:
    postgres = validate_spec(build_spec(configure_flags=["--with-blocksize=16"]))["postgres"]
    assert postgres["build"] == {
        "source": {**TARBALL, "ref": None},
        "configure_flags": ["--with-blocksize=16"],
        "patches": [],
        "cflags": None,
    }


@pytest.mark.parametrize(
    ("build", "field"),
    [
        ({"configure_flags": ["--prefix=/tmp/x"]}, "configure_flags[0]"),
        ({"configure_flags": ["; rm -rf /"]}, "configure_flags[0]"),
        ({"patches": [{"name": "p", "diff": "not a diff", "strip": 1}]}, "patches[0].diff"),
        ({"patches": [{"name": "p", "diff": PATCH, "strip": 9}]}, "patches[0].strip"),
        ({"source": {"kind": "git", "location": "https://git.example/pg.git"}}, "source.ref"),
        ({"source": {"kind": "path", "location": "relative.tar.gz"}}, "source.location"),
        ({"cflags": "-O2\n-g"}, "cflags"),
    ],
)
def test_a_bad_build_definition_names_the_field(build: dict, field: str) -> None:
    error = refusal(build_spec(**build))
    assert (error.code, error.field) == ("invalid_spec", f"postgres.build.{field}")


def test_source_build_needs_a_definition_and_only_it_takes_one() -> None:
    assert refusal(spec_with({"version": "14", "source": "build"})).field == "postgres.build"
    prebuilt = {"version": "16", "source": "prebuilt", "build": {"source": TARBALL}}
    assert refusal(spec_with(prebuilt)).field == "postgres.build"


def test_versions_are_numbered_as_the_server_numbers_them() -> None:
    assert [version_num(v) for v in ("9.2", "9.6", "13", "13.16")] == [90200, 90600, 130000, 130016]


@pytest.mark.parametrize(
    ("version", "sections", "field", "first"),
    [
        ("14", {"workload": {"max_tries": 3}}, "workload.max_tries", "15"),
        ("12", {"dataset": {"partitions": 4}}, "dataset.partitions", "13"),
        ("9.6", {"dataset": {"init_steps": "dtg"}}, "dataset.init_steps", "11"),
        ("9.4", {"workload": {"latency_limit_ms": 50}}, "workload.latency_limit_ms", "9.5"),
        ("9.5", {"workload": {"scripts": TWO_SCRIPTS}}, "workload.scripts", "9.6"),
        ("9.5", {"workload": {"latency_limit_ms": 50}}, None, None),
        ("9.3", {"workload": {"progress": True}}, "workload.progress", "9.4"),
        ("9.3", {}, None, None),
    ],
)
def test_options_an_old_pgbench_lacks_are_refused_naming_the_first_version(
    version: str, sections: dict, field: str | None, first: str | None
) -> None:
    spec = validate_spec(spec_with({"version": version, "source": "system"}, **sections))
    if field is None:
        refuse_missing_options(spec)
        return
    with pytest.raises(JobError) as caught:
        refuse_missing_options(spec)
    assert caught.value.field == field
    assert f"it came in {first}" in caught.value.message
