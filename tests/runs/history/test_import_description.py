"""Reading what an import's user states of its files: per file, by a pattern, later wins."""

import pytest

from runs.services.history.import_description import DescriptionError, parse_description

PRESET_2 = """
# preset 2: three devices, three wal_sync_methods
*sas*: storage=SAS 15k
*ssd*: storage=SSD
*-fsync.log: wal_sync_method=fsync
*-fdatasync.log: wal_sync_method=fdatasync
ssd-fsync.log: host=db2, version=9.2.4
"""


def test_patterns_state_storage_and_settings_and_a_later_line_adds_to_them():
    description = parse_description(PRESET_2)
    sas = description.of("sas-fdatasync.log")
    assert (sas.storage, sas.settings, sas.host) == (
        "SAS 15k",
        {"wal_sync_method": "fdatasync"},
        "",
    )
    ssd = description.of("ssd-fsync.log")
    assert (ssd.storage, ssd.host, ssd.version) == ("SSD", "db2", "9.2.4")
    assert ssd.settings == {"wal_sync_method": "fsync"}
    assert description.of("notes.txt").settings == {}


def test_a_later_line_overrides_an_earlier_one():
    description = parse_description("*: storage=disk\nfast*: storage=ram, Shared_Buffers=1GB")
    assert description.of("fast-1.log").storage == "ram"
    assert description.of("fast-1.log").settings == {"shared_buffers": "1GB"}
    assert description.of("slow.log").storage == "disk"


def test_a_line_matching_no_file_is_named():
    description = parse_description(PRESET_2)
    names = [f"{d}-{m}.log" for d in ("sas", "ssd") for m in ("fsync", "fdatasync")]
    assert description.unmatched(names) == []
    assert description.unmatched(["sas-fsync.log"]) == [
        "line 4 (*ssd*) matched none of the files",
        "line 6 (*-fdatasync.log) matched none of the files",
        "line 7 (ssd-fsync.log) matched none of the files",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("storage=SSD", "line 1: write `PATTERN: key=value, ...`"),
        ("*ssd*: storage", "line 1: `storage` needs a value"),
        ("\n*ssd*:", "line 2: states nothing after the colon"),
        (
            "*: shared buffers=1GB",
            "`shared buffers` is neither host, storage, version nor a setting",
        ),
        ("*: storage=a\x1bb", "holds a control character"),
    ],
)
def test_a_bad_line_is_refused_naming_it_and_the_fix(text, message):
    with pytest.raises(DescriptionError, match=message.replace("*", r"\*").replace("(", r"\(")):
        parse_description(text)
