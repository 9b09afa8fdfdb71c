"""The heartbeat's question to the ledger (which finished jobs has the lab not confirmed),
asked every few seconds also while a point measures: each entry file is parsed once per
change, not on every beat, and the answer stays the one a full read gives."""

import os
import time
from pathlib import Path

import pytest

from agents.job import new_result
from agents.worker.ledger import KEEP_S, Ledger


def finished(ledger: Ledger, job_id: str) -> None:
    result = new_result({"run_id": job_id, "token": "t"})
    result["status"] = "succeeded"
    ledger.finish(ledger.start(job_id, job_id, "t"), result)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The entry files parsed, by name, in order."""
    parsed: list[str] = []
    real = Ledger._read

    def counted(self: Ledger, path: Path):  # type: ignore[no-untyped-def]
        parsed.append(path.name)
        return real(self, path)

    monkeypatch.setattr(Ledger, "_read", counted)
    return parsed


def test_a_beat_parses_only_the_entries_written_since_the_last(tmp_path: Path, reads: list[str]):
    ledger = Ledger(tmp_path, "a")
    for job_id in ("job-1", "job-2", "job-3"):
        finished(ledger, job_id)
    assert {entry.job_id for entry in ledger.unconfirmed()} == {"job-1", "job-2", "job-3"}
    assert len(reads) == 3

    reads.clear()
    assert len(ledger.unconfirmed()) == 3
    assert reads == [], "nothing changed: nothing parsed"

    confirmed = ledger.entry("job-2")
    assert confirmed is not None
    reads.clear()
    ledger.confirm(confirmed)
    assert {entry.job_id for entry in ledger.unconfirmed()} == {"job-1", "job-3"}
    assert reads == [], "a confirmed entry is not read again"


def test_a_confirmation_leaves_the_entry_as_written_and_survives_a_new_ledger(tmp_path: Path):
    # The heartbeat confirms while the next job measures: the entry (its result and log)
    # is not written again, an empty confirmation file beside it says it.
    ledger = Ledger(tmp_path, "a")
    finished(ledger, "job-1")
    entry = ledger.entry("job-1")
    assert entry is not None and not entry.confirmed
    written = ledger.path("job-1").stat()
    ledger.confirm(entry)
    assert ledger.path("job-1").stat().st_mtime_ns == written.st_mtime_ns
    again = Ledger(tmp_path, "a")  # a restarted agent
    assert again.unconfirmed() == []
    kept = again.entry("job-1")
    assert kept is not None and kept.confirmed and kept.result is not None


def test_an_entry_written_again_is_not_confirmed_by_its_earlier_confirmation(tmp_path: Path):
    ledger = Ledger(tmp_path, "a")
    finished(ledger, "job-1")
    entry = ledger.entry("job-1")
    assert entry is not None
    ledger.confirm(entry)
    finished(ledger, "job-1")
    assert [entry.job_id for entry in Ledger(tmp_path, "a").unconfirmed()] == ["job-1"]


def test_entries_past_the_keep_time_are_forgotten_confirmed_or_not(tmp_path: Path):
    ledger = Ledger(tmp_path, "a")
    for job_id in ("old-confirmed", "old", "new"):
        finished(ledger, job_id)
    old_confirmed = ledger.entry("old-confirmed")
    assert old_confirmed is not None
    ledger.confirm(old_confirmed)
    assert {entry.job_id for entry in ledger.unconfirmed()} == {"old", "new"}

    for job_id in ("old-confirmed", "old"):
        entry = ledger.entry(job_id)
        assert entry is not None
        entry.finished_at = time.time() - KEEP_S - 60
        ledger._write(entry)

    assert [entry.job_id for entry in ledger.unconfirmed()] == ["new"]
    assert not ledger.path("old").exists() and not ledger.path("old-confirmed").exists()
    assert [path.name for path in ledger.directory.iterdir()] == [ledger.path("new").name]
    assert ledger.path("new").exists()


def settle(ledger: Ledger) -> None:
    """Date the ledger's directory back, as if nothing had been written for a minute."""
    old = time.time() - 60
    os.utime(ledger.directory, (old, old))


def test_a_settled_directory_unchanged_since_the_last_beat_is_not_listed_again(
    tmp_path: Path, reads: list[str]
):
    ledger = Ledger(tmp_path, "a")
    for job_id in ("job-1", "job-2"):
        finished(ledger, job_id)
    settle(ledger)
    assert len(ledger.unconfirmed()) == 2
    # An entry file removed behind the ledger's back (the directory's mtime put back):
    # the directory looks unchanged, so the beat answers from its last listing.
    mtime = ledger.directory.stat().st_mtime_ns
    ledger.path("job-1").unlink()
    os.utime(ledger.directory, ns=(mtime, mtime))
    assert len(ledger.unconfirmed()) == 2

    finished(ledger, "job-3")  # a write changes the directory: listed again at once
    assert {entry.job_id for entry in ledger.unconfirmed()} == {"job-2", "job-3"}


def test_a_directory_written_just_before_the_beat_is_listed_again_next_time(tmp_path: Path):
    ledger = Ledger(tmp_path, "a")
    finished(ledger, "job-1")
    assert len(ledger.unconfirmed()) == 1
    # A write in the same tick of the file system's clock as that listing would leave the
    # mtime as it was: a listing of a directory that had just changed is not reused.
    mtime = ledger.directory.stat().st_mtime_ns
    ledger.path("job-1").unlink()
    os.utime(ledger.directory, ns=(mtime, mtime))
    assert ledger.unconfirmed() == []


def test_a_settled_listing_ends_when_an_entry_is_due_to_be_forgotten(tmp_path: Path):
    ledger = Ledger(tmp_path, "a")
    finished(ledger, "job-1")
    entry = ledger.entry("job-1")
    assert entry is not None
    entry.finished_at = time.time() - KEEP_S + 0.5
    ledger._write(entry)
    settle(ledger)
    assert len(ledger.unconfirmed()) == 1
    time.sleep(0.6)
    assert ledger.unconfirmed() == []
    assert not ledger.path("job-1").exists()
