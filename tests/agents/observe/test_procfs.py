"""The /proc readers the samplers use every second: the kept-open file reads the current
content each time, and the targeted parsers read what the whole-file ones read."""

from pathlib import Path

from agents.observe.procfs import (
    KeptOpen,
    cpu_times_of,
    diskstats_of,
    meminfo_bytes,
    read_cpu_times,
    read_diskstats,
    read_meminfo,
)


def test_a_kept_open_file_reads_its_current_content_each_time(tmp_path: Path):
    path = tmp_path / "counters"
    path.write_bytes(b"1\n")
    kept = KeptOpen(str(path))
    try:
        assert kept.read() == b"1\n"
        path.write_bytes(b"2" * 40_000 + b"\n")
        assert kept.read() == b"2" * 40_000 + b"\n", "a file larger than the first buffer"
    finally:
        kept.close()


def test_proc_stat_kept_open_moves_with_the_cpu_time_spent():
    kept = KeptOpen("/proc/stat")
    try:
        before = cpu_times_of(kept.read())
        sum(range(3_000_000))
        after = cpu_times_of(kept.read())
    finally:
        kept.close()
    assert after.total > before.total


def test_the_targeted_meminfo_reader_gives_the_whole_readers_values():
    names = ("MemTotal", "MemAvailable", "Dirty", "HugePages_Total", "NoSuchEntry")
    targeted = meminfo_bytes(Path("/proc/meminfo").read_bytes(), names)
    whole = read_meminfo()
    assert targeted.keys() == {"MemTotal", "MemAvailable", "Dirty", "HugePages_Total"}
    assert targeted["MemTotal"] == whole["MemTotal"]
    text = b"MemTotal:       24683648 kB\nDirty:              1204 kB\nAnonPages: 10 kB"
    assert meminfo_bytes(text, ("MemTotal", "AnonPages", "Dirty")) == {
        "MemTotal": 24683648 * 1024,
        "AnonPages": 10 * 1024,
        "Dirty": 1204 * 1024,
    }


def test_the_content_parsers_read_what_the_path_readers_read(tmp_path: Path):
    stat = tmp_path / "stat"
    stat.write_bytes(b"cpu  10 1 20 300 4 0 5 6 0 0\ncpu0 5 0 10 150 2 0 3 3 0 0\nintr 1 2\n")
    assert cpu_times_of(stat.read_bytes()) == read_cpu_times(str(stat))
    assert read_cpu_times(str(stat)).total == 346
    diskstats = tmp_path / "diskstats"
    diskstats.write_bytes(
        b" 254       0 vda 100 0 800 50 200 0 1600 70 0 90 120 0 0 0 0\n"
        b" 254       1 vda1 1 0 8 5 2 0 16 7 0 9 12 0 0 0 0\n"
    )
    assert diskstats_of(diskstats.read_bytes(), {"vda"}) == read_diskstats({"vda"}, str(diskstats))
    assert read_diskstats({"vda"}, str(diskstats))["vda"].write_sectors == 1600
