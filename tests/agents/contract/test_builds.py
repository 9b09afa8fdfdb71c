"""Source build definitions and pgbench options by version: checked before anything runs."""

import io
import tarfile

import pytest

from agents.contract.builds.source_tree import UnsafeSource, bounded_members
from agents.contract.errors import JobError
from agents.contract.spec.document import validate_spec
from agents.contract.spec.pgbench_versions import refuse_missing_options, version_num

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


@pytest.mark.parametrize(
    "cflags",
    [
        "-O2 -g",
        "-O3 -march=native -mtune=znver3 -fno-omit-frame-pointer",
        "-Og -ggdb3 -DLOCK_DEBUG -DWAL_DEBUG=1 -UNDEBUG",
        "-O2 -flto=auto -msse4.2 -mcpu=neoverse-n1 -Wno-unused-variable",
        "-O1 -fsanitize=address,undefined -fno-sanitize-recover=all",
    ],
)
def test_the_compiler_flags_people_use_are_allowed(cflags: str) -> None:
    assert validate_spec(build_spec(cflags=cflags))["postgres"]["build"]["cflags"] == cflags


@pytest.mark.parametrize(
    ("cflags", "says"),
    [
        ("-wrapper /bin/sh,-c,touch CANARY", "-wrapper is refused: it makes the compiler run"),
        ("-O2 -B/tmp/bin", "-B/tmp/bin is refused: it makes the compiler run"),
        ("-specs=/tmp/x.specs", "it makes the compiler run"),
        ("-fplugin=/tmp/evil.so", "it makes the compiler run"),
        ("@/tmp/flags", "it makes the compiler run"),
        ("-Wl,-plugin,/tmp/evil.so", "it makes the compiler run"),
        ("-O2 $(touch x)", "'$' is not allowed"),
        ("-O2;id", "';' is not allowed"),
        ("-O2\t-B/tmp", "'\\t' is not allowed"),
        ("-DX='a b'", '"\'" is not allowed'),
        ("-include /etc/passwd", "not on the agents' list"),
        ("-fprofile-use=/tmp/p", "'/' is not allowed"),
    ],
)
def test_compiler_flags_that_run_programs_or_name_paths_are_refused(cflags: str, says: str):
    error = refusal(build_spec(cflags=cflags))
    assert error.field == "postgres.build.cflags"
    assert says in error.message and "use -O0..-O3" in error.message


@pytest.mark.parametrize(
    "flag",
    [
        "--with-includes=/tmp",
        "--with-libraries=/tmp",
        "--with-system-tzdata=/usr/share/zoneinfo",
        "--bindir=/tmp",
        "CC=/tmp/cc",
        "--with-blocksize=16;id",
        "--with-blocksize=16\n",
        "--enable-debug=yes",
        "--with-template=linux",
    ],
)
def test_configure_flags_outside_the_allow_list_are_refused(flag: str) -> None:
    error = refusal(build_spec(configure_flags=["--enable-debug", flag]))
    assert error.field == "postgres.build.configure_flags[1]"


def test_the_configure_flags_people_use_are_allowed() -> None:
    flags = [
        "--enable-debug", "--enable-cassert", "--with-blocksize=32", "--with-wal-blocksize=64",
        "--with-segsize=2", "--without-readline", "--without-icu", "--with-lz4", "--with-zstd",
        "--with-ssl=openssl", "--disable-spinlocks", "--with-extra-version=-bench1",
    ]  # fmt: skip
    assert (
        validate_spec(build_spec(configure_flags=flags))["postgres"]["build"]["configure_flags"]
        == flags
    )


def patch_with(diff: str, strip: int = 1) -> dict:
    return build_spec(patches=[{"name": "p", "diff": diff, "strip": strip}])


@pytest.mark.parametrize(
    ("diff", "says"),
    [
        ("--- a/../../etc/x\n+++ b/../../etc/x\n@@ -1 +1 @@\n-a\n+b\n", "climbs out"),
        ("--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "an absolute path"),
        (
            "diff --git a/x b/x\nnew file mode 120000\n--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+/\n",
            "makes a symlink",
        ),
        ("diff --git a/x b/y\nrename from x\nrename to ../y\n+++ b/y\n", "climbs out"),
        ("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n!rm -rf /\n", "breaks off a hunk"),
        ("*** a/x\n--- b/x\n+++ b/x\n", "context diff"),
        ('--- "a/x y"\n+++ "a/x y"\n@@ -1 +1 @@\n-a\n+b\n', "no spaces or quotes"),
    ],
)
def test_a_patch_naming_files_outside_the_tree_is_refused(diff: str, says: str) -> None:
    error = refusal(patch_with(diff))
    assert error.field == "postgres.build.patches[0].diff"
    assert says in error.message and "only files in the source tree" in error.message


def test_hunk_lines_that_look_like_headers_are_not_read_as_file_names() -> None:
    """A removed SQL comment `-- /etc/x` is `--- /etc/x` inside a hunk, not a header."""
    diff = "--- a/x.sql\n+++ b/x.sql\n@@ -1,2 +1,2 @@\n--- /etc/x\n+-- y\n a\n"
    assert validate_spec(patch_with(diff))["postgres"]["build"]["patches"][0]["diff"] == diff
    assert refusal(patch_with(diff, strip=3)).field == "postgres.build.patches[0].diff"


def tarball_of(members: list[tuple[tarfile.TarInfo, bytes]]) -> io.BytesIO:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as archive:
        for member, content in members:
            member.size = len(content)
            archive.addfile(member, io.BytesIO(content))
    data.seek(0)
    return data


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (member("/etc/cron.d/x"), "an absolute path"),
        (member("pg/../../x"), "climbs out"),
        (member("pg/link", tarfile.SYMTYPE, "/etc"), "an absolute path"),
        (member("pg/link", tarfile.SYMTYPE, "../.."), "climbs out"),
        (member("pg/hard", tarfile.LNKTYPE, "/etc/passwd"), "an absolute path"),
        (member("pg/dev", tarfile.CHRTYPE), "a device or FIFO"),
        (member("pg/fifo", tarfile.FIFOTYPE), "a device or FIFO"),
    ],
)
def test_tarball_members_leaving_the_tree_are_refused(bad: tarfile.TarInfo, says: str) -> None:
    data = tarball_of([(member("pg/configure"), b"#!/bin/sh\n"), (bad, b"")])
    with tarfile.open(fileobj=data) as archive, pytest.raises(UnsafeSource, match=says):
        list(bounded_members(archive))


def test_unpacking_stops_at_the_member_that_passes_the_limit() -> None:
    members = [(member(f"pg/part{i}"), bytes(1000)) for i in range(10)]
    with tarfile.open(fileobj=tarball_of(members)) as archive:
        seen = []
        with pytest.raises(UnsafeSource, match="unpacks to more than"):
            for checked in bounded_members(archive, limit=4500):
                seen.append(checked.name)
    assert seen == ["pg/part0", "pg/part1", "pg/part2", "pg/part3"]
